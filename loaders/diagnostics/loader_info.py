"""What the wrapped loader has: its kind and the settings advice may change.

Advice is about changes to *this* loader, so the diagnosis first reads what it is and how it is
set: a torch ``DataLoader`` (``num_workers``, ``persistent_workers``, ``prefetch_factor``,
``pin_memory``), a :class:`loaders.StoreLoader` (``prefetch``, ``num_threads``, ``io``,
``buffer_chunks``) or a DALI loader (``prefetch``, ``num_threads``). Anything else is ``other``:
an iterable whose settings cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DALI", "DATALOADER", "OTHER", "STORELOADER", "LoaderInfo", "describe_loader"]

DATALOADER = "dataloader"
STORELOADER = "storeloader"
DALI = "dali"
OTHER = "other"


@dataclass(frozen=True)
class LoaderInfo:
    """The wrapped loader's kind and settings.

    Attributes:
        kind: ``dataloader``, ``storeloader``, ``dali`` or ``other``.
        name: The loader's class name.
        settings: The settings read from it (only those its kind has).
    """

    kind: str
    name: str
    settings: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """Return one setting, or ``default`` when the loader does not have it."""
        return self.settings.get(key, default)

    @property
    def helpers(self) -> int:
        """Parallel helpers that load: worker processes or reader threads (0: none)."""
        if self.kind == DATALOADER:
            return int(self.get("num_workers") or 0)
        if self.kind in (STORELOADER, DALI):
            return int(self.get("num_threads") or 0)
        return 0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {"kind": self.kind, "name": self.name, "settings": dict(self.settings)}


def _dataloader(it: Any) -> dict[str, Any]:
    workers = int(it.num_workers)
    return {
        "num_workers": workers,
        "persistent_workers": bool(it.persistent_workers),
        # torch's default depth is 2 batches per worker when prefetch_factor is None
        "prefetch_factor": (it.prefetch_factor or 2) if workers > 0 else None,
        "pin_memory": bool(it.pin_memory),
        "batch_size": it.batch_size,
        "drop_last": bool(it.drop_last),
    }


def _storeloader(it: Any) -> dict[str, Any]:
    layout = it.source.layout
    streamed = next(iter(it.source.streams.values()), None)  # a v2 store may have no image
    return {
        "prefetch": it.prefetch,
        "num_threads": it.num_threads,
        "io": getattr(streamed, "io", None),
        "buffer_chunks": it.buffer_chunks,
        "chunk_samples": layout.chunk_samples,
        "batch_size": it.batch_size,
        "device": str(it.device),
        "augment": it.augment is not None,
    }


def _dali(it: Any) -> dict[str, Any]:
    return {
        "prefetch": it.prefetch,
        "num_threads": it.num_threads,
        "batch_size": it.batch_size,
        "device": str(it.device),
    }


def _is_instance(it: Any, module: str, name: str) -> bool:
    """``isinstance`` against a class that is only looked up if its module is imported already."""
    import sys

    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls is not None and isinstance(it, cls)


def describe_loader(it: Any) -> LoaderInfo:
    """Return the kind and settings of ``it`` (no import of a backend the caller did not use)."""
    name = type(it).__name__
    if _is_instance(it, "torch.utils.data", "DataLoader"):
        return LoaderInfo(DATALOADER, name, _dataloader(it))
    if _is_instance(it, "loaders.torch_loader", "StoreLoader"):
        return LoaderInfo(STORELOADER, name, _storeloader(it))
    if _is_instance(it, "loaders.dali.base", "DaliLoaderBase"):
        return LoaderInfo(DALI, name, _dali(it))
    return LoaderInfo(OTHER, name)

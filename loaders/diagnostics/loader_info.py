"""What the wrapped loader has: its kind and the settings advice may change.

Advice is about changes to *this* loader, so the diagnosis first reads what it is and how it is
set: a torch ``DataLoader`` (``num_workers``, ``persistent_workers``, ``prefetch_factor``,
``pin_memory``), a :class:`loaders.StoreLoader` (``prefetch``, ``num_threads``, ``io``,
``buffer_chunks``), a DALI loader (``prefetch``, ``num_threads``, and whether it decodes raw
files: ``JpegLoader``), a ``loaders.tf`` dataset and a ``loaders.jax`` iterator (the settings of
the StoreLoader behind them, and how many epochs one iteration serves), or another
``tf.data`` pipeline (its stages: parallel maps, a final prefetch; :mod:`.frameworks`).
Anything else is ``other``: an iterable whose settings cannot be read.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DALI",
    "DATALOADER",
    "JAX",
    "OTHER",
    "STORELOADER",
    "STORE_FAMILY",
    "TF_DATA",
    "TF_STORE",
    "LoaderInfo",
    "describe_loader",
]

DATALOADER = "dataloader"
STORELOADER = "storeloader"
DALI = "dali"
TF_STORE = "loaders.tf"  # a loaders.tf dataset: a StoreLoader behind tf.data
JAX = "loaders.jax"  # a loaders.jax iterator: a StoreLoader behind jax.Array batches
TF_DATA = "tf.data"  # any other tf.data pipeline (decoding on TensorFlow's threads)
OTHER = "other"
STORE_FAMILY = (STORELOADER, TF_STORE, JAX)  # a StoreLoader's settings decide
THREADED = (*STORE_FAMILY, DALI, TF_DATA)  # load on threads of this process

# How a setting of each kind is changed, for the advice's wording.
CALLS = {TF_STORE: "loaders.tf.dataset(...)", JAX: "loaders.jax.batches(...)"}


@dataclass(frozen=True)
class LoaderInfo:
    """The wrapped loader's kind and settings.

    Attributes:
        kind: ``dataloader``, ``storeloader``, ``dali``, ``loaders.tf``, ``loaders.jax``,
            ``tf.data`` or ``other``.
        name: The loader's class name (or the call that made it).
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
        if self.kind in (*STORE_FAMILY, DALI):
            return int(self.get("num_threads") or 0)
        return 0

    @property
    def where(self) -> str:
        """Where its settings are given, when not on the loader itself (`` in <call>``)."""
        call = CALLS.get(self.kind)
        return f" in {call}" if call else ""

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
    return {
        "prefetch": it.prefetch,
        "num_threads": it.num_threads,
        "io": it.io,  # as it reads now: "ram" once io="ram" holds the rows in memory
        "buffer_chunks": it.buffer_chunks,
        "chunk_samples": layout.chunk_samples,
        "batch_size": it.batch_size,
        "device": str(it.device),
        "augment": it.augment is not None,
        "shards": -(-layout.num_samples // max(1, layout.shard_samples)),
        "shard_samples": layout.shard_samples,
        "remote": _remote(it.source),
    }


def _remote(source: Any) -> bool:
    """Whether a store (or a store of a mixture) lies in object storage (read over a network)."""
    parts = getattr(source, "parts", None) or (source,)
    return any(not getattr(part.info.path, "local", True) for part in parts)


def _dali(it: Any) -> dict[str, Any]:
    return {
        "prefetch": it.prefetch,
        "num_threads": it.num_threads,
        "batch_size": it.batch_size,
        "device": str(it.device),
        "decodes": _is_instance(it, "loaders.dali.jpeg", "JpegLoader"),
    }


def _jax(it: Any) -> dict[str, Any]:
    return {**_storeloader(it.loader), "epochs": it.epochs, "sharded": it.sharding is not None}


def _is_instance(it: Any, module: str, name: str) -> bool:
    """``isinstance`` against a class that is only looked up if its module is imported already."""
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
    if _is_instance(it, "loaders.jax", "Batches"):
        return LoaderInfo(JAX, "loaders.jax.batches", _jax(it))
    if _is_instance(it, "tensorflow.python.data.ops.dataset_ops", "DatasetV2"):
        from loaders.diagnostics.frameworks import tf_pipeline

        made, stages = tf_pipeline(it)
        if made is not None:  # a loaders.tf dataset, maybe with the user's stages on top
            settings = {**_storeloader(made["loader"]), "epochs": made["epochs"]}
            settings.update(ahead=made["ahead"], tf_stages=stages["tf_stages"])
            return LoaderInfo(TF_STORE, "loaders.tf.dataset", settings)
        return LoaderInfo(TF_DATA, f"tf.data ({name})", stages)
    return LoaderInfo(OTHER, name)

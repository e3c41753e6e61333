"""One source item decoded as the build decodes it, and the classic per-item ``Dataset``.

:func:`decode_item` reads each file field of an item through its source (local files,
fsspec URLs, Parquet cells, WebDataset members, a scene's patches) and decodes it with its
kind's registered decoder (Pillow for images and masks, soundfile + soxr and the log-mel for
audio, numpy/scipy for arrays: ``precompute.fields.assemble.DECODE``); inline fields
(keypoints, boxes, labels) are checked by their kind. Nothing is placed in the stored frame:
that is the build's work, which the ``workers`` strategy does not have.

:class:`ItemDataset` is what a training script without a store has: indexed by ``(epoch,
index)``, it decodes the item and applies the workload's transform with a generator seeded by
``(seed, epoch, index)``, in DataLoader workers.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from benchmarks.errors import BenchmarkError
from precompute.errors import PrecomputeError

__all__ = ["EpochSampler", "ItemDataset", "decode_item", "decoded_values"]


def _file_value(source: Any, item: Any, field: Any, max_pixels: int) -> Any:
    from precompute.fields.assemble import FileInput, decoder_of

    key = item.file(field.name)
    decoder = decoder_of(field)
    if getattr(decoder, "takes_input", False):
        data: Any = FileInput(
            key,
            lambda: source.read_bytes(item, field.name),
            lambda: io.BytesIO(source.read_bytes(item, field.name)),
        )
    else:
        data = source.read_bytes(item, field.name)
    segment = dict(item.values).get(f"{field.name}.segment")
    return decoder(data, key, field, max_pixels, *(() if segment is None else (segment,)))


def decode_item(source: Any, item: Any, fields: Sequence[Any], max_pixels: int) -> dict[str, Any]:
    """Every field of ``item`` decoded and checked by its kind, with its kind's companions.

    Returns:
        ``{name: value}`` for each field (the value its kind's ``validate`` returns: an
        ``(H, W, C)`` uint8 image, ``(H, W)`` mask ids, ``(P, 3)`` points, a stored audio
        array, ...) and ``{name.what: value}`` for each companion (``audio.length``, ...).

    Raises:
        BenchmarkError: The item cannot be read or decoded, naming its key and the reason.
    """
    out: dict[str, Any] = {}
    for f in fields:
        kind = f.spec
        inline = kind.source == "inline"
        key = item.key if inline else item.file(f.name)
        try:
            raw = item.value(f.name) if inline else _file_value(source, item, f, max_pixels)
            out[f.name] = kind.validate(raw, f.name, f.options, key)
            extra = kind.companion_values(raw, f.options)
        except (OSError, ValueError, PrecomputeError) as exc:  # DecodeError, InputError, ...
            where = key if inline else source.locate(key)
            reason = getattr(exc, "reason", None) or str(exc)
            raise BenchmarkError(f"{where}: {reason} (field {f.name!r})") from exc
        out.update({f"{f.name}.{what}": v for what, v in extra.items()})
    return out


def decoded_values(plan: Any, index: int) -> dict[str, Any]:
    """:func:`decode_item` of ``plan``'s item ``index`` under its spec's pixel guard."""
    item = plan.source.items[index]
    return decode_item(plan.source, item, plan.fields, plan.spec.max_pixels)


class ItemDataset(Dataset[tuple[Any, Any]]):
    """The classic per-item dataset: decode, then the workload's transform, per ``__getitem__``.

    Args:
        plan: The listed source (:class:`benchmarks.harness.sources.SourcePlan`).
        transform: ``transform(values, rng) -> (x, y)`` (a workload's ``classic``).
        seed: Augmentation seed; each item's generator is seeded by ``(seed, epoch, index)``.
    """

    def __init__(self, plan: Any, transform: Callable[[Any, Any], Any], seed: int) -> None:
        self.plan, self.transform, self.seed = plan, transform, seed

    def __len__(self) -> int:
        return len(self.plan.source.items)

    def __getitem__(self, key: tuple[int, int]) -> tuple[Any, Any]:
        epoch, index = key
        values = decoded_values(self.plan, index)
        x, y = self.transform(values, np.random.default_rng([self.seed, epoch, index]))
        return x, y


class EpochSampler(Sampler[tuple[int, int]]):
    """Yields ``(epoch, index)`` in a seeded permutation; the epoch is set by the main process."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, int]]:
        perm = np.random.default_rng([self.seed, 0x5A, self.epoch]).permutation(self.n)
        return iter([(self.epoch, int(i)) for i in perm])


def as_tensor(value: Any) -> torch.Tensor:
    """A contiguous tensor of a numpy value (no copy when it is contiguous already)."""
    return torch.from_numpy(np.ascontiguousarray(value))

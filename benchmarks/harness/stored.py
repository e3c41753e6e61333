"""What one stored sample is, in the words of its kinds, and what it weighs in a store.

:func:`fields_text` names every field's stored form (``audio float16 [64, 101], label int64``)
from the fields' storage, never a pixel size for data that has none; :func:`store_sample`
reads an opened store: its fields as stored, each field's codec as its metadata names it and
its bytes per sample (what ``precompute inspect`` shows:
:func:`precompute.format.storecheck.array_bytes`), and its bytes per sample, every array's
shard files over its samples, the bytes a read of it fetches (coded fields at their coded size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["codecs_text", "fields_text", "read_weight", "store_files", "store_sample"]


def fields_text(fields: Sequence[Any], size: int | str) -> str:
    """``NAME DTYPE [SHAPE]`` of each field's storage at ``size`` (a side or ``"WxH"``)."""
    parts = []
    for f in fields:
        st = f.storage(size)
        shape = f" [{', '.join(str(n) for n in st.shape)}]" if st.shape else ""
        parts.append(f"{f.name} {st.dtype}{shape}")
    return ", ".join(parts)


def store_files(store: str) -> list[Path]:
    """The data files of every array of ``store`` (its metadata left out)."""
    return sorted(p for p in Path(store).rglob("*") if p.is_file() and p.suffix != ".json")


def _bytes(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n:.0f} B"


def codecs_text(arrays: Sequence[Mapping[str, Any]]) -> str:
    """``image jpeg:90:420 1.9 KiB, label raw 33 B``: each field's codec and bytes per sample."""
    return ", ".join(f"{a['field']} {a['codec']} {_bytes(a['bytes_per_sample'])}" for a in arrays)


def store_sample(store: str) -> dict[str, Any]:
    """The opened store's sample: its fields as stored, their codecs and its bytes per sample.

    Returns:
        ``fields`` (:func:`fields_text` of the store's fields at its stored size),
        ``arrays`` (per field: ``field``, ``codec`` as the store's metadata names it or
        ``raw``, ``bytes_per_sample`` of its files, ``raw_per_sample``: one sample decoded,
        shape x itemsize, inspect's raw), ``codecs`` (:func:`codecs_text`),
        ``bytes_per_sample`` (every array's files over the store's sample slots) and
        ``samples`` (those slots).
    """
    from precompute.format.layout import open_store_info
    from precompute.format.storecheck import array_bytes

    info = open_store_info(store)
    slots = max(1, int(info.layout.num_samples))
    total = sum(p.stat().st_size for p in store_files(store))
    arrays = [
        {
            "field": a.name,
            "codec": a.codec,
            "bytes_per_sample": a.stored,
            "raw_per_sample": a.raw,
        }
        for a in array_bytes(
            info.path, info.layout, [f.name for f in info.fields if f.name in info.layout.arrays]
        )
    ]
    return {
        "fields": fields_text(info.fields, info.layout.size),
        "arrays": arrays,
        "codecs": codecs_text(arrays),
        "bytes_per_sample": total / slots,
        "samples": slots,
    }


def read_weight(sample: Mapping[str, Any] | None, spec_bytes: int) -> dict[str, Any]:
    """The bytes a read of one sample fetches, and where the figure comes from.

    The store's own (``sample``: its :func:`store_sample`) when there is one, at its codecs
    and whatever size the spec gives (a store built at 128 is read at 128, a JPEG-coded one at
    its coded bytes); else ``spec_bytes``, every field's storage at the spec's size, raw.
    """
    if sample is None:
        return {"bytes": spec_bytes, "from": "every field's storage at the spec's size, raw"}
    return {
        "bytes": sample["bytes_per_sample"],
        "from": f"the store's files over its {sample['samples']} samples ({sample['codecs']})",
    }

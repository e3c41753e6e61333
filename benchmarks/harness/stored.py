"""What one stored sample is, in the words of its kinds, and what it weighs in a store.

:func:`fields_text` names every field's stored form (``audio float16 [64, 101], label int64``)
from the fields' storage, never a pixel size for data that has none; :func:`store_sample`
reads an opened store: its fields as stored and its bytes per sample, every array's shard
files over its samples, the bytes a read of it fetches (coded fields at their coded size).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["fields_text", "read_weight", "store_files", "store_sample"]


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


def store_sample(store: str) -> dict[str, Any]:
    """The opened store's sample: its fields as stored and its bytes per sample.

    Returns:
        ``fields`` (:func:`fields_text` of the store's fields at its stored side),
        ``bytes_per_sample`` (every array's files over the store's sample slots) and
        ``samples`` (those slots).
    """
    from precompute.format.layout import open_store_info

    info = open_store_info(store)
    slots = max(1, int(info.layout.num_samples))
    total = sum(p.stat().st_size for p in store_files(store))
    return {
        "fields": fields_text(info.fields, info.layout.size),
        "bytes_per_sample": total / slots,
        "samples": slots,
    }


def read_weight(store: str | None, spec_bytes: int) -> dict[str, Any]:
    """The bytes a read of one sample fetches, and where the figure comes from.

    The store's own (:func:`store_sample`) when there is one, whatever size the spec gives
    (a store built at 128 is read at 128); else ``spec_bytes``, every field's storage at the
    spec's size.
    """
    if store is None:
        return {"bytes": spec_bytes, "from": "every field's storage at the spec's size"}
    got = store_sample(store)
    return {
        "bytes": got["bytes_per_sample"],
        "from": f"the store's files over its {got['samples']} samples",
    }

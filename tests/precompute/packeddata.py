"""Real images written three ways: class folders, ``datasets`` Parquet, ``webdataset`` shards.

Every record is a real PNG or JPEG (sizes 12-47 px) with a class; the same records written as
class folders, as Parquet files by ``datasets``' own writer and as WebDataset shards by
``webdataset.ShardWriter`` let a test compare the stores built from each, key by key.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from precompute.job import build
from precompute.sample import make_image
from precompute.spec import BuildSpec
from tests.processes import kill_after_first_shard

CLASSES = ("cat", "dog", "eel")
SPEC = {"size": 16, "shard_samples": 8, "chunk_samples": 4, "seed": 3}  # the tests' builds


def packed_spec(**more: object) -> BuildSpec:
    """:data:`SPEC` with ``more``."""
    return BuildSpec.from_dict({**SPEC, **more})


def build_seq(src: Path, out: Path, **more: object) -> dict[str, Any]:
    """Build ``src`` into ``out`` with :func:`packed_spec` on the sequential runner."""
    return build(str(src), str(out), packed_spec(**more), progress=False, runner="sequential")


@dataclass(frozen=True)
class Rec:
    """One sample: its folder key (``CLASS/NNN.EXT``), encoded bytes and class index."""

    key: str
    data: bytes
    label: int

    @property
    def stem(self) -> str:
        """The key without its extension: the sample's WebDataset key."""
        return self.key.rsplit(".", 1)[0]

    @property
    def ext(self) -> str:
        return self.key.rsplit(".", 1)[1]


def records(n: int, seed: int = 0, side: tuple[int, int] = (12, 48)) -> list[Rec]:
    """``n`` records: even ones PNG, odd ones JPEG, sizes drawn from ``side``, 3 classes."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        w, h = (int(v) for v in rng.integers(side[0], side[1], 2))
        label = i % len(CLASSES)
        buf = io.BytesIO()
        fmt = "PNG" if i % 2 == 0 else "JPEG"
        make_image(seed, i, label, (w, h), len(CLASSES)).save(buf, fmt)
        ext = "png" if fmt == "PNG" else "jpg"
        out.append(Rec(f"{CLASSES[label]}/{i:03d}.{ext}", buf.getvalue(), label))
    return out


def write_folder(root: Path, recs: Sequence[Rec]) -> Path:
    for r in recs:
        (root / r.key).parent.mkdir(parents=True, exist_ok=True)
        (root / r.key).write_bytes(r.data)
    return root


def write_parquet(
    path: Path,
    recs: Sequence[Rec],
    *,
    ids: bool = True,
    image: str = "image",
    label: str = "label",
    rows_per_group: int = 4,
    extra: dict[str, list[Any]] | None = None,
    features: dict[str, Any] | None = None,
) -> Path:
    """``recs`` as one Parquet file written by ``datasets`` (an ``Image`` and a ``ClassLabel``).

    ``ids``: an ``id`` column holding the folder key; ``rows_per_group``: rows per row group.
    """
    import datasets
    from datasets import ClassLabel, Dataset, Image

    datasets.disable_progress_bars()
    cols: dict[str, list[Any]] = {
        image: [{"bytes": r.data, "path": r.key} for r in recs],
        label: [r.label for r in recs],
        **(extra or {}),
    }
    if ids:
        cols = {"id": [r.key for r in recs], **cols}
    ds = Dataset.from_dict(cols).cast_column(image, Image())
    ds = ds.cast_column(label, ClassLabel(names=list(CLASSES)))
    for name, feature in (features or {}).items():
        ds = ds.cast_column(name, feature)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.to_parquet(str(path), batch_size=rows_per_group)
    return path


def write_shards(
    folder: Path, recs: Sequence[Rec], per_shard: int = 5, extra: dict[str, list[Any]] | None = None
) -> Path:
    """``recs`` as WebDataset shards written by ``webdataset.ShardWriter`` (EXT + ``cls``)."""
    import webdataset as wds

    folder.mkdir(parents=True, exist_ok=True)
    pattern = str(folder / "shard-%06d.tar")
    with wds.ShardWriter(pattern, maxcount=per_shard, verbose=0) as sink:
        for i, r in enumerate(recs):
            more = {k: v[i] for k, v in (extra or {}).items()}
            sink.write({"__key__": r.stem, r.ext: r.data, "cls": r.label, **more})
    return folder


def store(out: Path, names: Sequence[str] = ("image", "label", "key")) -> dict[str, np.ndarray]:
    return {n: np.asarray(zarr.open_array(str(out / n), mode="r")[:]) for n in names}


def by_key(arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """Store key -> slot (holes left out)."""
    return {str(k): i for i, k in enumerate(arrays["key"]) if k}


def resumes_as_a_clean_build(src: Path, tmp: Path, count: int) -> None:
    """Kill a build of ``src`` (12 shards) after its first shard, resume it: a clean store.

    Asserts the resumed build resumed a shard, holds ``count`` samples and the very keys,
    images and labels of a clean build of ``src``.
    """
    more = {"shard_samples": 4, "chunk_samples": 4}
    kill_after_first_shard(src, tmp / "killed", {**SPEC, **more}, shards=12)
    resumed = build_seq(src, tmp / "killed", **more)
    clean = build_seq(src, tmp / "clean", **more)
    assert resumed["report"]["shards_resumed"] >= 1
    assert resumed["num_valid"] == clean["num_valid"] == count
    got, want = store(tmp / "killed"), store(tmp / "clean")
    for name in ("key", "image", "label"):
        np.testing.assert_array_equal(got[name], want[name])

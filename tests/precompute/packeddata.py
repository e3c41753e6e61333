"""Real images written three ways: class folders, ``datasets`` Parquet, ``webdataset`` shards.

Every record is a real PNG or JPEG (sizes 12-47 px) with a class; the same records written as
class folders, as Parquet files by ``datasets``' own writer and as WebDataset shards by
``webdataset.ShardWriter`` let a test compare the stores built from each, key by key.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from precompute.format.layout import MARKER_DIR
from precompute.sample import make_image

CLASSES = ("cat", "dog", "eel")


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


CHILD = """
import sys
from precompute import BuildSpec, build
build(sys.argv[1], sys.argv[2], BuildSpec.from_dict({spec!r}), progress=False,
      runner="sequential")
"""


def _markers(out: Path) -> int:
    folder = out / MARKER_DIR / "shards"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def kill_after_first_shard(src: Path, out: Path, spec: dict[str, Any], shards: int) -> int:
    """Start a sequential build of ``src`` in a child, SIGKILL it once a shard is written.

    Returns the shards written when it died (at least 1, fewer than ``shards``).
    """
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(spec=spec), str(src), str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    deadline = time.monotonic() + 120
    while _markers(out) < 1:
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline, "child build made no progress"
        time.sleep(0.002)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    if child.stderr is not None:
        child.stderr.close()
    done = _markers(out)
    assert 1 <= done < shards, f"the child wrote {done} of {shards} shards before it died"
    return done

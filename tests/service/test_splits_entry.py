"""The cache's answer names a store's recorded split, and a split column is part of the key."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from precompute.job import build
from service import BuildRequest, Cache
from tests.service.helpers import SPEC


def _sequential(request: BuildRequest) -> None:
    build(str(request.source), str(request.out), request.spec, runner="sequential", progress=False)


def _manifest(root: Path, parts: list[str], name: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(len(parts)):
        if not (root / f"{i}.png").exists():  # the same files, so only the split can differ
            Image.new("RGB", (8, 6), (i * 30, 0, 0)).save(root / f"{i}.png")
    rows = ["path,label,split", *(f"{i}.png,{i % 2},{p}" for i, p in enumerate(parts))]
    (root / name).write_text("\n".join(rows) + "\n")
    return root / name


def test_the_entry_names_the_split_and_another_split_is_another_key(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", builder=_sequential)
    first = _manifest(tmp_path / "src", ["train"] * 5 + ["val"] * 3, "a.csv")
    store = cache.get_or_build(first, SPEC)
    key = cache.key_for(first, SPEC)
    assert cache.info(key).splits == {"train": 5, "val": 3}
    assert cache.status(key)["splits"] == {"train": 5, "val": 3}  # the JSON answer
    other = _manifest(tmp_path / "src", ["val"] + ["train"] * 4 + ["val"] * 3, "a.csv")
    assert other == first and cache.key_for(other, SPEC) != key  # only the split column moved
    cache.get_or_build(other, SPEC)
    assert cache.info(cache.key_for(other, SPEC)).splits == {"train": 4, "val": 4}
    assert cache.get(key) == store

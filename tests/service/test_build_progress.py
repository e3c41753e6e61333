"""A running build's progress counts samples, so a build of one shard shows it (issue 42, 13).

A real build (the sequential runner, in a thread) of a one-shard source is held at its sixth
sample by a kind known only to this module; the cache's progress and its status page must say
5 of 12 samples, where they said nothing (``-``) until the build ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from precompute import BuildSpec, build
from precompute.fields import KINDS, FieldSpec, Kind, Storage, register_kind
from service.cache.maintenance import build_progress
from service.http.web import StatusView, render_status

GATE = threading.Event()
TAKEN: list[int] = []


class HeldKind(Kind):
    """An inline kind whose sixth sample waits for :data:`GATE`."""

    name = "heldsample"
    source = "inline"

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((), "int32", -1)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        TAKEN.append(value)
        if len(TAKEN) == 6:
            assert GATE.wait(60), "the test never opened the gate"
        return np.asarray(value, dtype=np.int32)

    def parse_inline(self, raw: Any) -> Any:
        return int(raw)


if "heldsample" not in KINDS:
    register_kind(HeldKind())


def _progress(out: Path, want: int) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = build_progress(out)
        if got is not None and got["samples_done"] == want:
            return got
        time.sleep(0.05)
    raise AssertionError(f"progress never said {want} samples: {build_progress(out)}")


def test_a_one_shard_build_shows_its_samples_done(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    rows = ["image,heldsample"]
    for i in range(12):
        Image.new("RGB", (20, 16), (i, 2, 3)).save(src / f"{i}.png")
        rows.append(f"{i}.png,{i}")
    (src / "m.csv").write_text("\n".join(rows) + "\n")
    fields = (FieldSpec("image", "image"), FieldSpec("heldsample", "heldsample"))
    spec = BuildSpec(size=8, shard_samples=32, chunk_samples=4, fields=fields)
    out = tmp_path / "s"
    GATE.clear()
    TAKEN.clear()
    done: list[Any] = []
    builder = threading.Thread(
        target=lambda: done.append(
            build(str(src / "m.csv"), str(out), spec, progress=False, runner="sequential")
        )
    )
    builder.start()
    try:
        progress = _progress(out, 5)
        assert (progress["shards_done"], progress["shards_total"]) == (0, 1)
        assert progress["samples_total"] == 12 and abs(progress["fraction"] - 5 / 12) < 1e-9
        job = {"status": "building", "key": "k" * 64, "progress": progress, "job": {}}
        view = StatusView("/cache", [], [job], {}, {"bytes": (0, ""), "budget_bytes": (0, "")},
                          0.0, 1.0)  # fmt: skip
        page = render_status(view)
        assert '<progress max="12" value="5"></progress>' in page
        assert '<span class="samples">5 / 12 samples</span>' in page
    finally:
        GATE.set()
        builder.join(60)
    assert done and done[0]["complete"]
    assert not (out / "_nostall" / "progress").exists() or not list(
        (out / "_nostall" / "progress").iterdir()
    )  # the counts go with the build
    assert build_progress(out) == {
        "shards_done": 1, "shards_total": 1, "samples_done": 12, "samples_total": 12,
        "fraction": 1.0,
    }  # fmt: skip

"""``precompute inspect`` of a build that stopped says what is known, not what is not.

It said ``5 slots, 5 valid``, ``0.0 KiB/sample`` and ``none stored (built before class counts
were)`` of a store whose first shard was never written: an incomplete store's report, valid
count and class counts are written when the build completes. It says the slots written so far,
that the store is incomplete and why (``stopped.json``), and how to resume. ``--json`` says
the same (``written``, ``stopped``, ``storage`` over the written slots; no ``num_valid``), and a
store whose every shard is written but which was never published says so (the vision review).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from precompute import job
from precompute.format.layout import StoreLayout
from precompute.format.summary import store_attributes, store_summary
from precompute.pipeline.plan import slot_permutation
from precompute.spec import BuildSpec
from tests.precompute.conftest import build_seg, jpeg_bytes, seg_folder


def test_a_store_stopped_before_any_shard_says_nothing_was_written(tmp_path: Path) -> None:
    src = seg_folder(tmp_path / "seg", ["a", "b", "d"], bad="c")
    out = tmp_path / "s.zarr"
    assert build_seg(src, out) == 1  # stops at c.jpg: its one shard is never written
    lines = store_summary(out).splitlines()
    assert lines[1].startswith("status     INCOMPLETE (0/1 shards written; the last build ")
    assert "stopped: DecodeError: images/c.jpg: not a readable image" in lines[1]
    assert lines[2].startswith("resume     fix the cause and re-run the same build")
    assert "samples    4 slots planned, 0 written" in lines
    assert "storage    image: nothing written yet" in lines
    assert "counts     mask: counted when the build completes" in lines
    text = "\n".join(lines)
    assert "valid" not in text and "KiB/sample" not in text and "built before" not in text
    assert "source     ?" not in text


def test_a_store_stopped_after_some_shards_counts_those(tmp_path: Path) -> None:
    last = int(slot_permutation(0, 12)[-1])  # the input of the last slot: in the last shard
    names = [f"n{i:02d}" for i in range(12) if i != last]
    src = seg_folder(tmp_path / "seg", names, bad=f"n{last:02d}")
    out = tmp_path / "s.zarr"
    assert build_seg(src, out, "--shard-samples", "3", "--chunk-samples", "3") == 1
    markers = sorted((out / "_nostall" / "shards").glob("*.json"))
    layout = StoreLayout.from_spec(BuildSpec(size=8, shard_samples=3, chunk_samples=3), 12)
    slots = sum(np.subtract(*layout.shard_range(int(m.stem))[::-1]) for m in markers)
    valid = sum(json.loads(m.read_text())["num_valid"] for m in markers)
    assert len(markers) == 3 and valid == slots == 9  # the shards before the bad one's
    text = store_summary(out)
    assert f"INCOMPLETE ({len(markers)}/4 shards written; the last build stopped" in text
    assert f"samples    12 slots planned, {slots} written, {valid} valid, 0 skipped so far" in text
    assert "storage    image: raw, " in text and "/sample" in text
    (out / "_nostall" / "stopped.json").unlink()  # a build killed: no reason recorded
    text = store_summary(out)
    assert "build running or interrupted" in text and "resume " not in text


def test_a_complete_store_says_as_before(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = seg_folder(tmp_path / "seg", ["a", "b", "c"], bad="z")
    out = tmp_path / "s.zarr"
    assert build_seg(src, out, "--on-error", "skip") == 0
    text = store_summary(out)
    assert "status     complete" in text and "samples    4 slots, 3 valid, 1 skipped" in text
    assert "counts     mask per class" in text and f"source     {src}" in text


def _known(out: Path) -> dict[str, object]:
    doc = store_attributes(out)
    assert "num_valid" not in doc and "report" not in doc  # written when the build completes
    return doc


def test_inspect_json_of_a_store_stopped_before_any_shard_knows_nothing_written(
    tmp_path: Path,
) -> None:
    src = seg_folder(tmp_path / "seg", ["a", "b", "d"], bad="c")
    out = tmp_path / "s.zarr"
    assert build_seg(src, out) == 1
    doc = _known(out)
    assert doc["written"] == {"shards": 0, "slots": 0, "valid": 0, "skipped": 0}
    assert str(doc["stopped"]).startswith("DecodeError: images/c.jpg: not a readable image")
    image = doc["storage"]["image"]  # type: ignore[index]
    assert image == {"codec": "raw", "stored_bytes_per_sample": None,
                     "raw_bytes_per_sample": 8 * 8 * 3, "ratio": None}  # fmt: skip


def test_inspect_json_of_a_store_stopped_after_some_shards_counts_those(tmp_path: Path) -> None:
    last = int(slot_permutation(0, 12)[-1])
    names = [f"n{i:02d}" for i in range(12) if i != last]
    src = seg_folder(tmp_path / "seg", names, bad=f"n{last:02d}")
    out = tmp_path / "s.zarr"
    assert build_seg(src, out, "--shard-samples", "3", "--chunk-samples", "3") == 1
    doc = _known(out)
    assert doc["written"] == {"shards": 3, "slots": 9, "valid": 9, "skipped": 0}
    files = sum(p.stat().st_size for p in (out / "mask" / "c").rglob("*") if p.is_file())
    assert doc["storage"]["mask"]["stored_bytes_per_sample"] == files / 9  # type: ignore[index]


def test_a_store_whose_every_shard_is_written_but_not_published_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = seg_folder(tmp_path / "seg", [f"n{i:02d}" for i in range(11)], bad="zz")
    (src / "images" / "zz.jpg").write_bytes(jpeg_bytes(seed=5))  # every input good
    out = tmp_path / "s.zarr"

    def killed(*args: object) -> None:  # the driver stopped between its last shard and publish
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "finalize", killed)
    assert build_seg(src, out, "--shard-samples", "3", "--chunk-samples", "3") == 130  # aborted
    text = store_summary(out)
    assert "status     INCOMPLETE (4/4 shards written, not published: " in text
    assert "re-run the same build to finish it" in text
    assert "samples    12 slots planned, 12 written, 12 valid, 0 skipped so far" in text
    doc = _known(out)
    assert doc["written"] == {"shards": 4, "slots": 12, "valid": 12, "skipped": 0}
    assert doc["stopped"] is None and doc["complete"] is False
    monkeypatch.undo()
    assert build_seg(src, out, "--shard-samples", "3", "--chunk-samples", "3") == 0
    assert "samples    12 slots, 12 valid, 0 skipped" in store_summary(out)
    assert "written" not in store_attributes(out)

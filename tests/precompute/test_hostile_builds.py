"""Real builds over hostile sources (issue 11, items 6-10): they finish, skip or name the file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import zarr

from precompute import BuildSpec, DecodeError, build
from precompute.cli import main
from precompute.format.summary import store_summary
from tests.precompute.conftest import bad_inputs, jpeg_bytes

pytestmark = pytest.mark.ray

SKIP = BuildSpec(size=16, shard_samples=4, chunk_samples=2, on_error="skip")


def _images(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"{i}.jpg").write_bytes(jpeg_bytes(seed=i))


@pytest.mark.timeout(240)
def test_folder_with_fifo_bad_name_and_loops_builds(ray_local: None, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _images(src / "a", 3)
    _images(src / "b", 3)
    os.mkfifo(src / "a" / "fifo.jpg")
    with open(os.fsencode(src / "b") + b"/caf\xe9.jpg", "wb") as f:
        f.write(jpeg_bytes())
    os.symlink("loop2", src / "b" / "loop1")
    os.symlink("loop1", src / "b" / "loop2")
    for spec in (SKIP, BuildSpec(size=16, shard_samples=4, chunk_samples=2)):
        out = tmp_path / f"s_{spec.on_error}"
        attrs = build(str(src), str(out), spec, progress=False, content_hash=True)
        skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
        assert skipped == {
            "a/fifo.jpg": "not a regular file (a FIFO)",
            "b/caf\\xe9.jpg": "file name is not valid UTF-8; rename it",
            "b/loop1": "cannot list: Too many levels of symbolic links",
            "b/loop2": "cannot list: Too many levels of symbolic links",
        }
        assert attrs["num_valid"] == 6


@pytest.mark.timeout(240)
def test_manifest_with_fifo_device_and_huge_input(ray_local: None, tmp_path: Path) -> None:
    _images(tmp_path / "img", 4)
    os.mkfifo(tmp_path / "fifo.jpg")
    (tmp_path / "big.jpg").write_bytes(jpeg_bytes(300, 300))
    lines = [f"img/{i}.jpg,cat" for i in range(4)]
    lines += ["fifo.jpg,cat", "/dev/zero,dog", "big.jpg,dog", "img/none.jpg,"]
    (tmp_path / "m.csv").write_text("path,label\n" + "\n".join(lines) + "\n")
    spec = BuildSpec(size=16, shard_samples=4, chunk_samples=2, on_error="skip", max_bytes=5000)
    attrs = build(str(tmp_path / "m.csv"), str(tmp_path / "s"), spec, progress=False)
    skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    assert skipped == {
        "fifo.jpg": "not a regular file (a FIFO)",
        "/dev/zero": "not a regular file (a character device)",
        "big.jpg": "larger than max_bytes = 5000 bytes",
        "img/none.jpg": "line 9: empty label",
    }
    assert attrs["num_valid"] == 4 and attrs["report"]["classes"] == ["cat", "dog"]
    (tmp_path / "m.csv").write_text("path,label\n" + "\n".join(lines[:6]) + "\n")
    with pytest.raises(DecodeError) as info:  # under raise: the build names the file
        build(str(tmp_path / "m.csv"), str(tmp_path / "r"), BuildSpec(size=16), progress=False)
    assert info.value.key in ("fifo.jpg", "/dev/zero")
    assert "not a regular file" in str(info.value)


def test_integer_labels_build_without_a_class_list(ray_local: None, tmp_path: Path) -> None:
    _images(tmp_path / "img", 2)
    (tmp_path / "m.csv").write_text("img/0.jpg,0\nimg/1.jpg,3000000\n")
    attrs = build(str(tmp_path / "m.csv"), str(tmp_path / "s"), SKIP, progress=False)
    assert (tmp_path / "s" / "zarr.json").stat().st_size < 64 * 1024
    assert attrs["report"]["classes"] == [] and attrs["report"]["num_classes"] == 3_000_001
    labels = zarr.open_array(str(tmp_path / "s" / "label"), mode="r")[:]
    assert sorted(labels[labels >= 0].tolist()) == [0, 3_000_000]
    assert "classes    integer labels as given, largest 3000000" in store_summary(tmp_path / "s")


def test_two_builds_of_one_source_record_identical_reasons(
    ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src"
    _images(src / "a", 4)
    for name, data in bad_inputs().items():
        (src / "a" / f"zz_{name}").write_bytes(data)
    out = tmp_path / "s"
    runs = []
    for _ in range(2):
        shutil.rmtree(out, ignore_errors=True)
        attrs = build(str(src), str(out), SKIP, progress=False)
        capsys.readouterr()
        main(["inspect", str(out)])  # returns on success (exits only on an error)
        shown = [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("build ")]
        runs.append((json.dumps(attrs["report"]["skipped"]), shown))
    assert runs[0] == runs[1]
    assert "0x" not in runs[0][0]
    assert (
        "skipped    a/zz_text.jpg: not a readable image (UnidentifiedImageError: cannot "
        "identify image file)" in runs[0][1]
    )


def test_label_holes_keep_their_slots_empty(ray_local: None, tmp_path: Path) -> None:
    """A line skipped for its label gets no slot: every stored label is a real one."""
    _images(tmp_path / "img", 3)
    (tmp_path / "m.jsonl").write_text(
        '{"path": "img/0.jpg", "label": 4}\n{"path": "img/1.jpg", "label": [4]}\n'
        '{"path": "img/2.jpg", "label": 2}\n'
    )
    attrs = build(str(tmp_path / "m.jsonl"), str(tmp_path / "s"), SKIP, progress=False)
    assert attrs["report"]["num_samples"] == 2 and attrs["num_valid"] == 2
    keys = zarr.open_array(str(tmp_path / "s" / "key"), mode="r")[:]
    labels = zarr.open_array(str(tmp_path / "s" / "label"), mode="r")[:]
    real = labels >= 0
    pairs = dict(zip(keys[real].tolist(), labels[real].tolist(), strict=True))
    assert pairs == {"img/0.jpg": 4, "img/2.jpg": 2}
    assert attrs["report"]["skipped"] == [
        {
            "key": "img/1.jpg",
            "reason": "line 2: label must be an integer or a class name, got a list",
        }
    ]


def test_manifest_with_symlink_loop_and_missing_file(ray_local: None, tmp_path: Path) -> None:
    """Neither the fingerprint nor the read aborts: the policy decides, naming the file."""
    _images(tmp_path / "img", 2)
    os.symlink("loop2", tmp_path / "loop1.jpg")
    os.symlink("loop1.jpg", tmp_path / "loop2")
    (tmp_path / "m.csv").write_text("img/0.jpg,0\nimg/1.jpg,1\nloop1.jpg,1\ngone.jpg,0\n")
    attrs = build(str(tmp_path / "m.csv"), str(tmp_path / "s"), SKIP, progress=False)
    skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    assert skipped.keys() == {"loop1.jpg", "gone.jpg"} and attrs["num_valid"] == 2
    assert "Too many levels of symbolic links" in skipped["loop1.jpg"]
    assert "No such file or directory" in skipped["gone.jpg"]
    with pytest.raises(DecodeError, match=r"(loop1|gone)\.jpg: cannot read: "):
        build(str(tmp_path / "m.csv"), str(tmp_path / "r"), BuildSpec(size=16), progress=False)

"""``precompute check`` and ``build --replace`` (issue 42, item 12).

Finding every bad input took one ``--on-error raise`` build per bad file, and the half-built
store of the first was then refused (``differs in source_fingerprint``) until deleted by hand.
``check`` lists every bad input at once, with the build's own reasons, and writes nothing;
``--replace`` replaces a store of another source or spec, and nothing that is not a store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from precompute.cli import main
from precompute.errors import StoreError
from precompute.format.layout import StoreLayout
from precompute.pipeline.replace import replace_other
from precompute.spec import BuildSpec
from tests.precompute.conftest import bad_inputs, jpeg_bytes

SMALL = ["--size", "8", "--shard-samples", "4", "--chunk-samples", "2"]


def _cli(command: str, *args: str) -> int:
    """``precompute COMMAND ARGS`` in process (no Ray); its exit code."""
    try:
        main([command, *SMALL, *args, "--runner", "sequential", "--quiet"])  # ARGS win
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _source(root: Path) -> Path:
    """Class folders of 6 good images, every bad input of ``bad_inputs`` and a link out."""
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            (root / cls / f"{i}.jpg").write_bytes(jpeg_bytes(seed=i))
    for name, data in bad_inputs().items():
        (root / "a" / f"zz_{name}").write_bytes(data)
    (root.parent / "elsewhere.jpg").write_bytes(jpeg_bytes())
    os.symlink(root.parent / "elsewhere.jpg", root / "b" / "out.jpg")
    return root


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_check_lists_every_bad_input_with_the_builds_reasons_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _source(tmp_path / "src")
    before = _tree(tmp_path)
    assert _cli("check", str(src)) == 1
    assert _tree(tmp_path) == before  # no store, no lock, nothing
    lines = capsys.readouterr().out.splitlines()
    bad = dict(line[4:].split(": ", 1) for line in lines if line.startswith("BAD "))
    assert len(bad) == len(bad_inputs()) + 1  # every bad input at once, and the link out
    summary = f"{6 + len(bad)} inputs, {len(bad)} bad (1 left out while listing)"
    assert lines[-1] == f"checked {src}: {summary}"
    assert _cli("build", str(src), "--out", str(tmp_path / "s"), "--on-error", "skip") == 0
    report = json.loads((tmp_path / "s" / "zarr.json").read_text())["attributes"]["nostall"]
    assert bad == {s["key"]: s["reason"] for s in report["report"]["skipped"]}  # the same
    for name in bad_inputs():
        (src / "a" / f"zz_{name}").unlink()
    (src / "b" / "out.jpg").unlink()
    assert _cli("check", str(src)) == 0
    assert capsys.readouterr().out.splitlines() == [f"checked {src}: 6 inputs, all good"]


def test_check_names_a_source_refused_as_a_whole_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.csv").write_text("path,label\na.jpg,cat\na.jpg,dog\n")
    assert _cli("check", str(tmp_path / "m.csv")) == 2
    assert "line 3: duplicate path 'a.jpg'" in capsys.readouterr().err


def test_replace_builds_over_the_half_built_store_once_the_inputs_are_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _source(tmp_path / "src")
    out = str(tmp_path / "s")
    assert _cli("build", str(src), "--out", out) == 1  # stops at a bad input: half-built
    for name in bad_inputs():
        (src / "a" / f"zz_{name}").unlink()
    capsys.readouterr()
    assert _cli("build", str(src), "--out", out) == 1
    err = capsys.readouterr().err
    assert "source: another source, or its files changed since" in err
    assert "build with --replace" in err
    assert _cli("build", str(src), "--out", out, "--replace") == 0
    assert _cli("build", str(src), "--out", str(tmp_path / "fresh")) == 0
    for name in ("image", "label", "key"):  # the store a fresh build writes, byte for byte
        got = np.asarray(zarr.open_array(f"{out}/{name}", mode="r")[:])
        want = np.asarray(zarr.open_array(str(tmp_path / "fresh" / name), mode="r")[:])
        np.testing.assert_array_equal(got, want)
    assert _tree(tmp_path / "s") == _tree(tmp_path / "fresh")  # no file of the old store left
    assert _cli("build", str(src), "--out", out, "--size", "6") == 1  # another spec: refused
    assert _cli("build", str(src), "--out", out, "--size", "6", "--replace") == 0
    assert zarr.open_array(f"{out}/image", mode="r").shape[1] == 6


def test_replace_never_deletes_what_is_not_a_store(tmp_path: Path) -> None:
    src = _source(tmp_path / "src")
    (src / "a" / "zz_empty.jpg").unlink()
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    assert _cli("build", str(src), "--out", str(folder), "--replace", "--on-error", "skip") == 2
    assert (folder / "notes.txt").read_text() == "keep me" and _tree(folder) == ["notes.txt"]
    out = tmp_path / "s"
    assert _cli("build", str(src), "--out", str(out), "--on-error", "skip") == 0
    (out / "thesis.tex").write_text("keep me too")  # someone's file inside a store folder
    before = _tree(out)
    spec = BuildSpec(size=6, shard_samples=4, chunk_samples=2)
    with pytest.raises(StoreError, match=r"thesis\.tex, which is not part of its store"):
        replace_other(out, spec, StoreLayout.from_spec(spec, 6), "fp")
    assert _tree(out) == before  # nothing deleted
    (out / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    with pytest.raises(StoreError, match="not a nostall store"):
        replace_other(out, spec, StoreLayout.from_spec(spec, 6), "fp")
    assert _tree(out) == before


@pytest.mark.ray
def test_check_on_ray_finds_what_the_sequential_runner_finds(
    ray_local: None, tmp_path: Path
) -> None:
    from precompute.job import check

    src = str(_source(tmp_path / "src"))
    spec = BuildSpec(size=8, shard_samples=4, chunk_samples=2)
    on_ray = check(src, spec, progress=False)
    assert on_ray == check(src, spec, progress=False, runner="sequential")
    assert len(on_ray.samples) == len(bad_inputs()) and len(on_ray.listing) == 1

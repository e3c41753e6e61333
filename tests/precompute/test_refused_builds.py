"""A refused build writes nothing into the store it refuses, and names the options that differ.

The vision review: a build into a half-built store of other options (``StoreMismatchError``)
overwrote the store's ``_nostall/stopped.json``, so ``inspect`` no longer said how the first
build had stopped; and the refusal showed two spec hashes, where a person needs the option:
``size: 8 (store) vs 16 (this command)``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.format.summary import store_summary
from tests.precompute.conftest import build_seg, jpeg_bytes, seg_folder


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the store: its bytes and its modification time."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--size", "16"], "size: 8 (store) vs 16 (this command)"),
        (["--mask-classes", "5"], "fields.mask.classes: 4 (store) vs 5 (this command)"),
        (["--codec", "image=zstd:3"], "codecs.image: raw (store) vs zstd:3 (this command)"),
    ],
)
def test_a_refused_build_leaves_a_half_built_store_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    src, out = seg_folder(tmp_path / "seg", ["a", "b", "d"], bad="c"), tmp_path / "s.zarr"
    assert build_seg(src, out) == 1  # stops at c.jpg: half-built, the reason recorded
    stopped = "the last build stopped: DecodeError: images/c.jpg: not a readable image"
    assert stopped in store_summary(out)
    before = _files(out)
    capsys.readouterr()
    assert build_seg(src, out, *args) == 1  # other options: refused
    err = capsys.readouterr().err
    assert f"holds a half-built store of another spec or source: {said}; choose another" in err
    assert "hash" not in err and "spec_hash" not in err
    assert _files(out) == before  # nothing written: stopped.json says how the first stopped
    assert stopped in store_summary(out)


def test_a_refused_build_leaves_a_complete_store_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = seg_folder(tmp_path / "seg", list("abcd")), tmp_path / "s.zarr"
    assert build_seg(src, out) == 0
    before = _files(out)
    capsys.readouterr()
    assert build_seg(src, out, "--seed", "3", "--mode", "squash") == 1
    err = capsys.readouterr().err
    assert (
        "holds a complete store of another spec or source: mode: center-crop (store) vs squash "
        "(this command); seed: 0 (store) vs 3 (this command); choose another --out" in err
    )
    assert _files(out) == before
    (src / "images" / "d.jpg").write_bytes(jpeg_bytes(seed=9))  # another file: another source
    assert build_seg(src, out) == 1
    err = capsys.readouterr().err
    assert "source: another source, or its files changed since (fingerprint " in err
    assert _files(out) == before

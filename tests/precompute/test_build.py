"""Real builds on local Ray: pixel-exact round trip, determinism, variants, bad inputs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from PIL import Image

from precompute import (
    BuildError,
    BuildSpec,
    DecodeError,
    StoreError,
    StoreIncompleteError,
    StoreMismatchError,
    build,
    fingerprint,
    list_source,
    open_store_info,
)
from precompute.format.layout import StoreLayout, stop_reason
from precompute.format.summary import store_summary
from precompute.format.verify import verify_store
from precompute.pipeline.writer import create_or_resume
from precompute.stages.augment import augment_variant
from tests.precompute.conftest import bad_inputs, copy_with_bad_inputs, reference_rgb

pytestmark = pytest.mark.ray

BILINEAR = Image.Resampling.BILINEAR


def _reference(img: Image.Image, s: int, mode: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Pillow decode+resize, written out independently of precompute.stages."""
    w, h = img.size
    if mode == "squash":
        return np.asarray(img.resize((s, s), BILINEAR)), (0, 0, s, s)
    if mode == "center-crop":
        side = min(w, h)
        box = ((w - side) / 2, (h - side) / 2, (w + side) / 2, (h + side) / 2)
        return np.asarray(img.resize((s, s), BILINEAR, box=box)), (0, 0, s, s)
    scale = s / max(w, h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = np.zeros((s, s, 3), np.uint8)
    top, left = (s - nh) // 2, (s - nw) // 2
    canvas[top : top + nh, left : left + nw] = np.asarray(img.resize((nw, nh), BILINEAR))
    return canvas, (top, left, nh, nw)


def _read(store: Path) -> dict[str, np.ndarray]:
    return {
        n: zarr.open_array(str(store / n), mode="r")[:] for n in ("image", "label", "extent", "key")
    }


def _array_files(store: Path) -> dict[str, bytes]:
    return {
        p.relative_to(store).as_posix(): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.parts[len(store.parts)] in ("image", "label", "extent", "key")
    }


@pytest.mark.parametrize("mode", ["letterbox", "center-crop", "squash"])
def test_round_trip_pixel_exact(
    ray_local: None, small_dataset: Path, tmp_path: Path, mode: str
) -> None:
    spec = BuildSpec(size=24, mode=mode, shard_samples=8, chunk_samples=4, seed=1)
    attrs = build(str(small_dataset), str(tmp_path / "s"), spec, progress=False)
    assert attrs["complete"] and attrs["num_valid"] == 40
    data = _read(tmp_path / "s")
    source = list_source(small_dataset)
    assert sorted(data["key"].tolist()) == [k for k, _ in source.items]
    labels = dict(source.items)
    for i, key in enumerate(data["key"]):
        assert data["label"][i] == labels[key]
        want, extent = _reference(reference_rgb(small_dataset / key), 24, mode)
        assert np.array_equal(data["image"][i], want), (mode, key)
        assert tuple(data["extent"][i]) == extent
    for shard in range(5):  # the seeded pre-shuffle spreads classes over shards
        assert len(set(data["label"][shard * 8 : (shard + 1) * 8])) > 1
    assert verify_store(tmp_path / "s") == []


def test_same_spec_and_seed_give_identical_store(
    ray_local: None, small_dataset: Path, tmp_path: Path
) -> None:
    spec = BuildSpec(size=16, shard_samples=8, chunk_samples=4, seed=3)
    a = build(str(small_dataset), str(tmp_path / "a"), spec, progress=False)
    b = build(str(small_dataset), str(tmp_path / "b"), spec, progress=False)
    assert _array_files(tmp_path / "a") == _array_files(tmp_path / "b")
    assert a["spec_hash"] == b["spec_hash"] and a["source_fingerprint"] == b["source_fingerprint"]
    c = build(
        str(small_dataset),
        str(tmp_path / "c"),
        BuildSpec(size=16, shard_samples=8, chunk_samples=4, seed=4),
        progress=False,
    )
    assert not np.array_equal(_read(tmp_path / "a")["key"], _read(tmp_path / "c")["key"])
    assert c["num_valid"] == 40
    again = build(str(small_dataset), str(tmp_path / "a"), spec, progress=False)
    assert again["report"] == a["report"]  # a complete identical store is not rebuilt


def test_variants_are_seeded_and_reproducible(
    ray_local: None, small_dataset: Path, tmp_path: Path
) -> None:
    spec = BuildSpec(size=16, variants=2, shard_samples=8, chunk_samples=4, seed=9)
    build(str(small_dataset), str(tmp_path / "a"), spec, progress=False)
    build(str(small_dataset), str(tmp_path / "b"), spec, progress=False)
    assert _array_files(tmp_path / "a") == _array_files(tmp_path / "b")
    info = open_store_info(tmp_path / "a")
    assert info.layout.variants == 2 and info.spec.augment is not None
    data = _read(tmp_path / "a")
    assert data["image"].shape == (40, 2, 16, 16, 3)
    for i in (0, 17, 39):
        img = reference_rgb(small_dataset / data["key"][i])
        for v in range(2):
            want = augment_variant(img, 16, info.spec.augment, 9, i, v)
            assert np.array_equal(data["image"][i, v], want)
    assert not np.array_equal(data["image"][:, 0], data["image"][:, 1])
    assert verify_store(tmp_path / "a") == []


@pytest.fixture()
def bad_dataset(small_dataset: Path, tmp_path: Path) -> Path:
    root = copy_with_bad_inputs(small_dataset, tmp_path / "bad_src")
    (tmp_path / "secret.jpg").write_bytes((small_dataset / "circles" / "0000.png").read_bytes())
    os.symlink(tmp_path / "secret.jpg", root / "dots" / "escape.jpg")
    return root


def test_skip_records_every_bad_input(ray_local: None, bad_dataset: Path, tmp_path: Path) -> None:
    spec = BuildSpec(size=16, shard_samples=8, chunk_samples=4, on_error="skip")
    attrs = build(str(bad_dataset), str(tmp_path / "s"), spec, progress=False)
    skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    expected = {f"circles/zz_{n}" for n in bad_inputs() if n != "bitflip_body.jpg"}
    assert expected <= set(skipped) <= expected | {"circles/zz_bitflip_body.jpg", "dots/escape.jpg"}
    assert "symlink" in skipped["dots/escape.jpg"]
    assert (
        "max_pixels" in skipped["circles/zz_bomb.png"] or "bomb" in skipped["circles/zz_bomb.png"]
    )
    data = _read(tmp_path / "s")
    holes = data["label"] == -1
    assert holes.sum() == len(skipped) - 1  # the escaping symlink never got a slot
    assert np.all(data["key"][holes] == "") and not data["image"][holes].any()
    assert attrs["num_valid"] == 40 + len(bad_inputs()) - (len(skipped) - 1)
    summary = store_summary(tmp_path / "s")
    assert "skipped    circles/zz_empty.jpg: empty file" in summary
    assert verify_store(tmp_path / "s") == []


def test_raise_names_the_file_and_leaves_store_resumable(
    ray_local: None, bad_dataset: Path, tmp_path: Path
) -> None:
    spec = BuildSpec(size=16, shard_samples=8, chunk_samples=4, on_error="raise")
    with pytest.raises(DecodeError) as info:
        build(str(bad_dataset), str(tmp_path / "s"), spec, progress=False)
    assert info.value.key.startswith("circles/zz_")
    said = f"DecodeError: {info.value}"  # why the store is partial, not "running or interrupted"
    with pytest.raises(StoreIncompleteError, match="its last build stopped on an error") as why:
        open_store_info(tmp_path / "s")
    assert said in str(why.value) and "--on-error skip" in str(why.value)
    assert "incomplete" in verify_store(tmp_path / "s")[0]
    assert f"the last build stopped: {said})" in store_summary(tmp_path / "s")
    (bad_dataset / info.value.key).unlink()  # fixing one bad file changes the fingerprint
    with pytest.raises(StoreMismatchError, match="source: another source, or its files changed"):
        build(str(bad_dataset), str(tmp_path / "s"), spec, progress=False)
    assert f"the last build stopped: {said})" in store_summary(tmp_path / "s")  # kept


def test_output_that_is_not_a_store_is_refused(
    ray_local: None, small_dataset: Path, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not a nostall store"):
        build(str(small_dataset), str(tmp_path / "other"), BuildSpec(size=16), progress=False)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["notes.txt"]  # no lock


def test_content_hash_fingerprint_survives_touch(
    ray_local: None, small_dataset: Path, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    shutil.copytree(small_dataset, src)
    spec = BuildSpec(size=16, shard_samples=8, chunk_samples=4)
    first = build(str(src), str(tmp_path / "s"), spec, progress=False, content_hash=True)
    os.utime(next(src.rglob("*.jpg")), ns=(1, 1))  # new mtime, same bytes
    again = build(str(src), str(tmp_path / "s"), spec, progress=False, content_hash=True)
    assert again["report"] == first["report"]  # same identity: nothing rebuilt
    with pytest.raises(StoreMismatchError):  # by size+mtime the source looks different
        build(str(src), str(tmp_path / "s"), spec, progress=False)


def test_failed_shard_write_is_a_build_error(
    ray_local: None, small_dataset: Path, tmp_path: Path
) -> None:
    spec = BuildSpec(size=16, shard_samples=8, chunk_samples=4)
    out = tmp_path / "s"
    source = list_source(small_dataset)
    create_or_resume(out, spec, StoreLayout.from_spec(spec, len(source)), fingerprint(source))
    (out / "image" / "c").write_text("a file where the shard folder goes")  # writes must fail
    with pytest.raises(BuildError, match=r"shard \d+ failed \(NotADirectoryError"):
        build(str(small_dataset), str(out), spec, progress=False)
    with pytest.raises(StoreIncompleteError):
        open_store_info(out)
    assert f"BuildError: {out}: shard " in (stop_reason(out) or "")
    (out / "image" / "c").unlink()  # fixed: the re-run completes, and forgets the stop
    assert build(str(small_dataset), str(out), spec, progress=False)["complete"]
    assert stop_reason(out) is None and not (out / "_nostall" / "stopped.json").exists()

"""Real builds of a scene and its ground truth (issue 14): one patch per labelled pixel."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import zarr

from benchmarks.spectral_data import make_scene
from precompute.arrays.scene import block_split, scene_patches
from precompute.arrays.scenesrc import list_scene
from precompute.cli import main
from precompute.fields import FieldSpec
from precompute.format.layout import open_store_info
from precompute.format.verify import verify_store

P = 9


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """A 30 x 26 x 7 float32 scene with 4 classes, as ``scene.npy`` + ``gt.npy``."""
    root = tmp_path_factory.mktemp("scene")
    cube, gt = make_scene(30, 26, 7, 4, seed=1)
    np.save(root / "scene.npy", cube)
    np.save(root / "gt.npy", gt)
    return root, cube, gt


def _read(store: Path) -> dict[str, np.ndarray]:
    names = [p.parent.name for p in store.glob("*/zarr.json")]
    return {name: np.asarray(zarr.open_array(str(store / name), mode="r")[:]) for name in names}


def _build(src: Path, out: Path, *extra: str) -> dict[str, np.ndarray]:
    main(["build", str(src), "--out", str(out), "--labels", "gt.npy", "--patch", str(P),
          "--shard-samples", "64", "--quiet", *extra])  # fmt: skip
    return _read(out)


@pytest.mark.ray
def test_one_patch_per_labelled_pixel_with_its_position(
    ray_local: None, scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    root, cube, gt = scene
    data = _build(root / "scene.npy", tmp_path / "s")
    want = {(p.row, p.col): p for p in scene_patches(cube, gt, P)}
    assert len(data["key"]) == len(want) == int((gt > 0).sum())
    for j, (r, c) in enumerate(data["position"].tolist()):
        assert data["key"][j] == f"scene.npy#patch={r},{c}"
        assert data["image"][j].tobytes() == want[(r, c)].values.tobytes()
        assert data["label"][j] == gt[r, c] - 1
    info = open_store_info(tmp_path / "s")
    assert [f.kind for f in info.fields] == ["array", "label", "position"]
    assert info.layout.size == P and info.fields[2].options["labels"] == "gt.npy"
    stats = info.report["band_stats"]["image"]
    np.testing.assert_allclose(
        stats["mean"], data["image"].reshape(-1, 7).astype(np.float64).mean(0), rtol=1e-9
    )
    assert verify_store(tmp_path / "s") == []


@pytest.mark.ray
def test_a_float_ground_truth_of_whole_numbers_builds_as_its_integers(
    ray_local: None, scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    """Many .mat files store the classes as float64 (0.0, 1.0, ...): the same store."""
    root, cube, gt = scene
    np.save(tmp_path / "scene.npy", cube)
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"gt": gt.astype(np.float64)})
    (tmp_path / "gt.mat").write_bytes(buf.getvalue())
    main(["build", str(tmp_path / "scene.npy"), "--out", str(tmp_path / "f"), "--labels",
          "gt.mat", "--patch", str(P), "--shard-samples", "64", "--quiet"])  # fmt: skip
    floats, ints = _read(tmp_path / "f"), _build(root / "scene.npy", tmp_path / "i")
    for name in ("image", "label", "position"):
        assert np.array_equal(floats[name], ints[name]), name


@pytest.mark.ray
def test_a_block_split_gives_disjoint_train_and_test_stores(
    ray_local: None, scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    root, _, gt = scene
    split = ["--split-block", "8", "--test-fraction", "0.3", "--split-seed", "4"]
    train = _build(root / "scene.npy", tmp_path / "train", *split, "--split-guard", "2",
                   "--split", "train")  # fmt: skip
    test = _build(root / "scene.npy", tmp_path / "test", *split, "--split", "test")
    side = block_split(gt, 8, 0.3, 4, 2)
    got_train = {tuple(p) for p in train["position"].tolist()}
    got_test = {tuple(p) for p in test["position"].tolist()}
    labelled = gt > 0
    assert got_train == {
        (r, c) for r, c in zip(*np.nonzero(labelled & (side == "train")), strict=True)
    }
    assert got_test == {
        (r, c) for r, c in zip(*np.nonzero(labelled & (side == "test")), strict=True)
    }
    assert not got_train & got_test and len(got_test) >= 0.3 * labelled.sum()
    assert min(max(abs(a - c), abs(b - d)) for a, b in got_train for c, d in got_test) > 2


def test_scene_errors_name_the_files(
    scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, cube, gt = scene
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"cube": cube, "other": gt})
    (tmp_path / "two.mat").write_bytes(buf.getvalue())
    np.save(tmp_path / "gt.npy", gt[:-1])
    args = ["build", str(tmp_path / "two.mat"), "--out", str(tmp_path / "s"), "--labels",
            "gt.npy", "--patch", str(P), "--quiet"]  # fmt: skip
    with pytest.raises(SystemExit):
        main(args)
    assert "holds 2 variables ['cube', 'other']; name one with --key" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--key", "cube"])
    err = capsys.readouterr().err
    assert "the ground truth is [29, 26] but the scene is [30, 26] (H, W)" in err
    assert "two.mat and " in err and "gt.npy" in err
    with pytest.raises(SystemExit):
        main([*args, "--key", "cube", "--split", "train"])
    assert "a block split needs both split_block" in capsys.readouterr().err


def test_a_ground_truth_given_from_the_working_folder_is_named_with_the_rule(
    scene: tuple[Path, np.ndarray, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--labels is taken from the scene's folder (a recipe that builds the same anywhere);
    written from the working folder instead, the error says so and what to give."""
    src, _, _ = scene  # src/scene.npy and src/gt.npy
    monkeypatch.chdir(src.parent)
    rel = f"{src.name}/gt.npy"
    with pytest.raises(SystemExit):
        main(["build", f"{src.name}/scene.npy", "--out", str(tmp_path / "s"), "--labels", rel,
              "--patch", str(P), "--quiet", "--runner", "sequential"])  # fmt: skip
    err = capsys.readouterr().err
    assert f"--labels {rel} is taken from the scene's folder ({src}), not the working" in err
    assert "give it as gt.npy or as an absolute path" in err


def test_the_scene_is_read_once_for_all_patches(scene: tuple[Path, np.ndarray, np.ndarray]) -> None:
    root, _, _ = scene
    fields = [
        FieldSpec("image", "array", {"shape": [P, P, 7], "dtype": "float32", "spatial": True}),
        FieldSpec("label", "label"),
        FieldSpec("position", "position", {"labels": "gt.npy", "patch": P}),
    ]
    src = list_scene(str(root / "scene.npy"), fields)
    first, last = src.items[0], src.items[-1]
    assert src.read_bytes(first, "image") is src.read_bytes(last, "image")


@pytest.mark.ray
def test_the_loader_serves_patches_and_positions(
    ray_local: None, scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    import torch

    from loaders.augment import AugmentError, Mixup, TrainAugment
    from loaders.torch_loader import StoreLoader

    root, _, _ = scene
    data = _build(root / "scene.npy", tmp_path / "s")
    for augment in (None, TrainAugment(size=P, rot90=True)):
        for b in StoreLoader(tmp_path / "s", 16, augment=augment):
            idx = b["index"].numpy()
            assert b["position"].dtype == torch.int32
            assert np.array_equal(b["position"].numpy(), data["position"][idx])
            assert np.array_equal(b["label"].numpy(), data["label"][idx])
    with pytest.raises(AugmentError, match=r"field 'image' \(kind array\) can be neither"):
        StoreLoader(tmp_path / "s", 16, augment=TrainAugment(size=P), mixup=Mixup(4))


def test_cli_mistakes_name_the_flags(
    scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = scene
    src, out = str(root / "scene.npy"), str(tmp_path / "s")
    with pytest.raises(SystemExit):
        main(["build", src, "--out", out, "--patch", "9"])
    assert "labels is required for kind 'position' (a scene build: --labels GT --patch P)" in (
        capsys.readouterr().err
    )


@pytest.mark.ray
def test_small_patches_are_stored_as_cut(
    ray_local: None, scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    root, cube, gt = scene
    out = tmp_path / "s5"
    main(["build", str(root / "scene.npy"), "--out", str(out), "--labels", "gt.npy",
          "--patch", "5", "--quiet"])  # fmt: skip
    data = zarr.open_group(str(out), mode="r")
    assert data["image"].shape[1:] == (5, 5, cube.shape[2])
    rows, cols = np.nonzero(gt)
    padded = np.pad(cube, ((2, 2), (2, 2), (0, 0)), mode="reflect")
    for k in (0, len(rows) // 2, len(rows) - 1):
        i = int(np.flatnonzero((data["position"][:] == (rows[k], cols[k])).all(1))[0])
        want = padded[rows[k] : rows[k] + 5, cols[k] : cols[k] + 5]
        assert np.array_equal(data["image"][i], want)


@pytest.mark.ray
def test_the_report_counts_the_scene_once_per_worker_read_not_once_per_patch(
    ray_local: None, scene: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    _, cube, gt = scene
    fresh = tmp_path / "src"  # a path no worker of the session's Ray has cached
    fresh.mkdir()
    np.save(fresh / "scene.npy", cube)
    np.save(fresh / "gt.npy", gt)
    _build(fresh / "scene.npy", tmp_path / "s")
    report = open_store_info(tmp_path / "s").report
    size = (fresh / "scene.npy").stat().st_size
    patches = int((gt > 0).sum())
    assert report["shards_built"] < patches
    # each worker process reads the scene once (its cache serves the later patches)
    assert report["bytes_read"] % size == 0
    assert size <= report["bytes_read"] <= report["shards_built"] * size

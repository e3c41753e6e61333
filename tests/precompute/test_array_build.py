"""Real builds of array files (issue 14): class folders and manifests of .npy/.npz/.mat cubes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import zarr

from precompute.arrays.resample import resample_bands
from precompute.cli import main
from precompute.errors import DecodeError
from precompute.format.layout import open_store_info
from precompute.format.verify import verify_store
from precompute.job import build
from precompute.spec import BuildSpec

H, C = 10, 5


def _spec(**kw: object) -> BuildSpec:
    base: dict[str, object] = {"size": H, "shard_samples": 4, "chunk_samples": 2, "seed": 3}
    return BuildSpec(**{**base, **kw})  # type: ignore[arg-type]


def _cube(i: int, dtype: str = "float32") -> np.ndarray:
    rng = np.random.default_rng(i)
    return (rng.normal(100.0, 7.0, size=(H, H, C)) * (1 + i % 3)).astype(dtype)


@pytest.fixture
def cubes(tmp_path: Path) -> Path:
    """Class folders ``a/``, ``b/`` of 5 ``.npy`` cubes each (float32, 10x10x5)."""
    root = tmp_path / "cubes"
    for c, name in enumerate("ab"):
        (root / name).mkdir(parents=True)
        for i in range(5):
            np.save(root / name / f"{i}.npy", _cube(10 * c + i))
    return root


def _read(store: Path) -> dict[str, np.ndarray]:
    names = [p.parent.name for p in store.glob("*/zarr.json")]
    return {name: np.asarray(zarr.open_array(str(store / name), mode="r")[:]) for name in names}


@pytest.mark.ray
def test_class_folders_of_npy_build_bit_exact_with_band_statistics(
    ray_local: None, cubes: Path, tmp_path: Path
) -> None:
    attrs = build(str(cubes), str(tmp_path / "s"), _spec(), progress=False)
    info = open_store_info(tmp_path / "s")
    image, label = info.fields
    assert (image.kind, dict(image.options)) == (
        "array",
        {"shape": (H, H, C), "dtype": "float32", "spatial": True, "key": None},
    )
    assert label.options["classes"] == 2
    data = _read(tmp_path / "s")
    assert data["image"].dtype == np.float32 and data["image"].shape[1:] == (H, H, C)
    cubes_by_key = {}
    for j, key in enumerate(data["key"]):
        if key:
            cubes_by_key[key] = np.load(cubes / key)
            assert data["image"][j].tobytes() == cubes_by_key[key].tobytes()
            assert data["label"][j] == "ab".index(key[0])
    assert len(cubes_by_key) == 10
    every = np.stack(list(cubes_by_key.values())).astype(np.float64).reshape(-1, C)
    stats = attrs["report"]["band_stats"]["image"]
    assert stats["count"] == [every.shape[0]] * C
    np.testing.assert_allclose(stats["mean"], every.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats["std"], every.std(0), rtol=1e-10)
    assert stats["min"] == every.min(0).tolist() and stats["max"] == every.max(0).tolist()
    assert open_store_info(tmp_path / "s").report["band_stats"]["image"] == stats
    assert verify_store(tmp_path / "s") == []


@pytest.mark.ray
def test_another_size_resamples_each_band(ray_local: None, cubes: Path, tmp_path: Path) -> None:
    build(str(cubes), str(tmp_path / "s"), _spec(size=8, mode="squash"), progress=False)
    data = _read(tmp_path / "s")
    j = next(j for j, k in enumerate(data["key"]) if k)
    want = resample_bands(np.load(cubes / data["key"][j]), 8)
    assert data["image"][j].shape == (8, 8, C) and np.array_equal(data["image"][j], want)


@pytest.mark.ray
def test_a_cube_of_another_shape_or_with_nan_is_a_per_input_error(
    ray_local: None, cubes: Path, tmp_path: Path
) -> None:
    np.save(cubes / "b" / "9_bands.npy", np.zeros((H, H, C - 1), np.float32))
    nan = _cube(7)
    nan[2, 3, 1] = np.nan
    np.save(cubes / "b" / "8_nan.npy", nan)
    np.save(cubes / "b" / "7_counts.npy", np.full((H, H, C), 200, np.uint8))  # another scale
    attrs = build(str(cubes), str(tmp_path / "s"), _spec(on_error="skip"), progress=False)
    reasons = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    assert reasons["b/9_bands.npy"] == (
        "field 'image' (array): expected shape [10, 10, 5], got [10, 10, 4]"
    )
    assert reasons["b/7_counts.npy"].startswith(
        "field 'image' (array): dtype uint8 does not fit the field's float32"
    )  # never cast into the float32 cubes: 0-255 counts beside other values
    assert reasons["b/8_nan.npy"].startswith(
        "field 'image': 1 NaN/inf value(s), the first at index [2, 3, 1]"
    )
    assert attrs["num_valid"] == 10
    assert attrs["report"]["band_stats"]["image"]["count"] == [10 * H * H] * C
    with pytest.raises(DecodeError, match=r"b/(9_bands|8_nan|7_counts)\.npy"):
        build(str(cubes), str(tmp_path / "r"), _spec(), progress=False)


def _mat(path: Path, **arrays: np.ndarray) -> None:
    buf = io.BytesIO()
    scipy.io.savemat(buf, arrays)
    path.write_bytes(buf.getvalue())


@pytest.mark.ray
def test_a_manifest_of_mat_files_needs_key_when_they_hold_several_variables(
    ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cubes = {f"m{i}.mat": _cube(i, "uint16") for i in range(4)}
    for name, cube in cubes.items():
        _mat(tmp_path / name, cube=cube, other=np.zeros(3))
    (tmp_path / "m.csv").write_text(
        "path,label\n" + "".join(f"{n},{'xy'[i % 2]}\n" for i, n in enumerate(cubes))
    )
    out = str(tmp_path / "s")
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(tmp_path / "m.csv"), "--out", out, "--size", str(H), "--quiet"])
    assert exit_info.value.code == 2
    assert "holds 2 variables ['cube', 'other']; name one with --key" in capsys.readouterr().err
    args = ["build", str(tmp_path / "m.csv"), "--out", out, "--size", str(H), "--quiet"]
    main([*args, "--key", "cube"])
    data = _read(tmp_path / out)
    assert data["image"].dtype == np.uint16
    for j, key in enumerate(data["key"]):
        assert np.array_equal(data["image"][j], cubes[key]) and data["label"][j] == int(key[1]) % 2
    main(["inspect", out])
    shown = capsys.readouterr().out
    assert "field      image: array, 10x10x5 uint16, shape [10, 10, 5], dtype uint16" in shown
    assert "bands      image: 5 bands, mean " in shown
    assert (
        json.loads(json.dumps(open_store_info(out).report["band_stats"]))["image"]["count"]
        == [4 * H * H] * C
    )

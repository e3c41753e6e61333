"""Array files read exactly: .npy, .npz, TIFF stacks, .mat v5 and v7.3, written for real."""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io
import tifffile

from precompute.arrays.readers import read_array
from precompute.errors import DecodeError

RNG = np.random.default_rng(7)
CUBE = RNG.normal(size=(6, 5, 4)).astype(np.float32)
U16 = RNG.integers(0, 65536, size=(6, 5, 3), dtype=np.uint16)


def _npy(value: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, value, allow_pickle=False)
    return buf.getvalue()


def _read(path: Path, array_key: str | None = None, **kw: object) -> np.ndarray:
    return read_array(path.read_bytes(), path.name, path.name, array_key, **kw)  # type: ignore[arg-type]


def _v73(path: Path, **variables: np.ndarray) -> Path:
    """A MATLAB v7.3 file as MATLAB writes it: 512-byte header, column-major datasets."""
    with h5py.File(path, "w", userblock_size=512) as f:
        for name, value in variables.items():
            ds = f.create_dataset(name, data=value.T)
            ds.attrs["MATLAB_class"] = np.bytes_({"f": "double", "u": "uint16"}[value.dtype.kind])
    with open(path, "r+b") as f:
        f.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Nov 23 2026 HDF5 schema")
    return path


@pytest.mark.parametrize("value", [CUBE, U16, np.arange(12, dtype=np.int64).reshape(3, 4)])
def test_npy_keeps_dtype_and_values_exactly(tmp_path: Path, value: np.ndarray) -> None:
    (tmp_path / "a.npy").write_bytes(_npy(value))
    out = _read(tmp_path / "a.npy")
    assert out.dtype == value.dtype and np.array_equal(out, value)


def test_npy_with_objects_is_refused_without_unpickling(tmp_path: Path) -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DecodeError, match=r"^x\.npy: .*Python objects"):
        read_array(buf.getvalue(), "x.npy", "x.npy", None)


def test_npz_reads_the_only_array_or_the_named_one(tmp_path: Path) -> None:
    np.savez(tmp_path / "one.npz", cube=CUBE)
    np.savez_compressed(tmp_path / "two.npz", cube=CUBE, gt=U16)
    assert np.array_equal(_read(tmp_path / "one.npz"), CUBE)
    assert np.array_equal(_read(tmp_path / "two.npz", "gt"), U16)
    with pytest.raises(DecodeError, match=r"two\.npz: holds 2 arrays \['cube', 'gt'\]; name one"):
        _read(tmp_path / "two.npz")
    with pytest.raises(DecodeError, match=r"has no array 'x'; it holds \['cube', 'gt'\]"):
        _read(tmp_path / "two.npz", "x")


def test_a_tiff_stack_of_pages_is_h_w_pages(tmp_path: Path) -> None:
    pages = np.moveaxis(U16, 2, 0)  # 3 pages of 6 x 5
    tifffile.imwrite(tmp_path / "s.tif", pages, photometric="minisblack")
    tifffile.imwrite(tmp_path / "planar.tif", pages, photometric="rgb", planarconfig="separate")
    with tifffile.TiffFile(tmp_path / "s.tif") as tif:
        assert len(tif.pages) == 3
    for name in ("s.tif", "planar.tif"):
        out = _read(tmp_path / name)
        assert out.shape == (6, 5, 3) and out.dtype == np.uint16 and np.array_equal(out, U16)


def test_a_tiff_page_of_samples_is_kept_and_a_single_page_gets_one_band(tmp_path: Path) -> None:
    rgb = RNG.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tiff", rgb, photometric="rgb")
    tifffile.imwrite(tmp_path / "one.tif", CUBE[..., 0])
    assert np.array_equal(_read(tmp_path / "rgb.tiff"), rgb)
    assert np.array_equal(_read(tmp_path / "one.tif"), CUBE[..., :1])


def test_mat_v5_one_variable_needs_no_name_several_are_listed(tmp_path: Path) -> None:
    scipy.io.savemat(tmp_path / "one.mat", {"indian_pines": CUBE})
    scipy.io.savemat(tmp_path / "two.mat", {"cube": CUBE, "gt": U16[..., 0]})
    out = _read(tmp_path / "one.mat")
    assert out.dtype == np.float32 and np.array_equal(out, CUBE)
    assert np.array_equal(_read(tmp_path / "two.mat", "gt"), U16[..., 0])
    with pytest.raises(DecodeError, match=r"two\.mat: holds 2 variables \['cube', 'gt'\]"):
        _read(tmp_path / "two.mat")


def test_mat_v5_struct_is_refused_by_name(tmp_path: Path) -> None:
    scipy.io.savemat(tmp_path / "s.mat", {"meta": {"a": 1.0}})
    with pytest.raises(DecodeError, match=r"variable 'meta' is a MATLAB struct"):
        _read(tmp_path / "s.mat")


def test_mat_v73_is_transposed_back_to_the_shape_matlab_shows(tmp_path: Path) -> None:
    known = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    path = _v73(tmp_path / "v73.mat", cube=known, gt=U16[..., 0])
    assert path.read_bytes()[:6] == b"MATLAB"
    out = _read(path, "cube")
    assert out.shape == (2, 3, 4) and np.array_equal(out, known) and out.flags.c_contiguous
    with pytest.raises(DecodeError, match=r"holds 2 variables \['cube', 'gt'\]"):
        _read(path)


def test_an_hdf5_dataset_matlab_did_not_write_is_refused_not_guessed(tmp_path: Path) -> None:
    """No MATLAB_class: h5py's row-major (H, W, C) would come out transposed; never guess."""
    path = tmp_path / "h5.mat"
    with h5py.File(path, "w") as f:
        f.create_dataset("cube", data=np.zeros((4, 3, 2), np.float32))
    with pytest.raises(DecodeError, match=r"^h5.mat: variable 'cube' has no MATLAB_class .* \.npy"):
        _read(path)


@pytest.mark.parametrize("name", ["big.npy", "big.npz", "big.tif", "big.mat", "big73.mat"])
def test_a_declared_size_over_max_bytes_is_refused_before_reading(
    tmp_path: Path, name: str
) -> None:
    value = np.zeros((40, 40, 10), dtype=np.float64)  # 128000 bytes
    path = tmp_path / name
    if name.endswith(".npy"):
        path.write_bytes(_npy(value))
    elif name.endswith(".npz"):
        np.savez(path, a=value)
    elif name.endswith(".tif"):
        tifffile.imwrite(path, np.moveaxis(value, 2, 0), photometric="minisblack")
    elif name == "big.mat":
        scipy.io.savemat(path, {"a": value})
    else:
        _v73(path, a=value)
    with pytest.raises(DecodeError, match=rf"^{name}: .*128000 bytes, over the limit of 1000"):
        _read(path, max_bytes=1000)
    assert _read(path, max_bytes=128000).shape == (40, 40, 10)


def test_nan_and_inf_are_refused_with_count_and_first_index_unless_allowed(
    tmp_path: Path,
) -> None:
    value = CUBE.copy()
    value[2, 3, 1] = np.nan
    value[4, 0, 0] = np.inf
    (tmp_path / "n.npy").write_bytes(_npy(value))
    with pytest.raises(
        DecodeError, match=r"^n\.npy: 2 NaN/inf value\(s\), the first at index \[2, 3, 1\]"
    ):
        _read(tmp_path / "n.npy")
    kept = _read(tmp_path / "n.npy", allow_nonfinite=True)
    assert np.isnan(kept[2, 3, 1]) and np.isinf(kept[4, 0, 0])


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        ("a.png", b"x", r"\.png: array files are"),
        ("a.npy", b"not numpy", r"is not a \.npy array"),
        ("a.npz", b"PK not a zip", r"not a readable \.npz"),
        ("a.tif", b"II*\x00garbage", r"not a readable TIFF"),
        ("a.mat", b"garbage" * 30, r"not a readable \.mat"),
    ],
)
def test_malformed_files_name_the_file(name: str, data: bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=rf"^{name.replace('.', '[.]')}: .*{why}"):
        read_array(data, name, name, None)


def test_complex_values_are_refused(tmp_path: Path) -> None:
    (tmp_path / "c.npy").write_bytes(_npy(np.ones((2, 2), dtype=np.complex64)))
    with pytest.raises(DecodeError, match=r"dtype complex64 is not a real number type"):
        _read(tmp_path / "c.npy")

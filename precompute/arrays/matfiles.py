"""Read one numeric variable of a MATLAB ``.mat`` file: v4/v5/v7 (scipy) or v7.3 (HDF5, h5py).

A v7.3 file is an HDF5 file behind a 512-byte MATLAB header; anything else is read by
:func:`scipy.io.loadmat`. One variable needs no name; several need ``array_key`` (``--key``),
and the error lists them. Sizes are checked from the file's directory (``whosmat`` / the HDF5
dataset's shape) before the variable is read.

MATLAB stores arrays column-major, and a v7.3 file's HDF5 dataset has the reversed shape
(MATLAB's ``145 x 145 x 200`` is an HDF5 ``200 x 145 x 145``): the value is transposed back,
so both versions give the shape MATLAB shows. scipy already does this for v5.
"""

from __future__ import annotations

import io

import numpy as np

from precompute.arrays.checks import guard_size, pick_one
from precompute.errors import DecodeError

__all__ = ["HDF5_SIGNATURE", "read_mat"]

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# Bytes per element of MATLAB classes as scipy.io.whosmat names them.
_CLASS_BYTES = {
    "double": 8, "single": 4, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "logical": 1,
}  # fmt: skip


def _is_hdf5(data: bytes) -> bool:
    return data[512:520] == HDF5_SIGNATURE or data[:8] == HDF5_SIGNATURE


def _v5(data: bytes, key: str, array_key: str | None, max_bytes: int) -> np.ndarray:
    import scipy.io

    try:
        found = {n: (tuple(s), c) for n, s, c in scipy.io.whosmat(io.BytesIO(data))}
        name = pick_one(key, sorted(found), array_key, "variable")
        shape, cls = found[name]
        if cls not in _CLASS_BYTES:
            raise DecodeError(key, f"variable {name!r} is a MATLAB {cls}, not a numeric array")
        guard_size(key, f"variable {name!r}", shape, f"u{_CLASS_BYTES[cls]}", max_bytes)
        value = scipy.io.loadmat(io.BytesIO(data), variable_names=[name])[name]
    except (ValueError, TypeError, OSError, EOFError, NotImplementedError) as exc:
        raise DecodeError(key, f"not a readable .mat file ({exc})") from None
    return np.asarray(value)


def _v73(data: bytes, key: str, array_key: str | None, max_bytes: int) -> np.ndarray:
    import h5py

    try:
        with h5py.File(io.BytesIO(data), "r") as f:
            found = {n: f[n] for n in f if not n.startswith("#")}
            name = pick_one(key, sorted(found), array_key, "variable")
            node = found[name]
            cls = node.attrs.get("MATLAB_class")
            if cls is None and isinstance(node, h5py.Dataset):
                raise DecodeError(
                    key,
                    f"variable {name!r} has no MATLAB_class attribute: an HDF5 dataset MATLAB "
                    "did not write, whose axis order (MATLAB's column-major or numpy's "
                    "row-major) is unknown; save it with MATLAB (-v7.3) or as .npy",
                )
            cls = cls.decode() if isinstance(cls, bytes) else str(cls)
            if not isinstance(node, h5py.Dataset) or node.dtype.fields or cls not in _CLASS_BYTES:
                raise DecodeError(key, f"variable {name!r} is a MATLAB {cls}, not a numeric array")
            guard_size(key, f"variable {name!r}", node.shape, node.dtype, max_bytes)
            value = node[()]
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise DecodeError(key, f"not a readable v7.3 .mat file ({exc})") from None
    return np.ascontiguousarray(np.asarray(value).T)


def read_mat(data: bytes, key: str, array_key: str | None, max_bytes: int) -> np.ndarray:
    """Return the numeric variable ``array_key`` (or the only one) of a ``.mat`` file.

    Raises:
        DecodeError: Naming the file: unreadable, no variable, several without a name (they
            are listed), a missing name, a struct/cell/char/complex variable, or too large.
    """
    if _is_hdf5(data):
        return _v73(data, key, array_key, max_bytes)
    return _v5(data, key, array_key, max_bytes)

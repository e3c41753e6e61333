"""A wheel cut down to what the check runs, so the kit fits in what a command may carry.

nvImageCodec's wheel holds its Python module built for every CPython (3.9 to 3.14, free-threaded
too) and a decoder extension per format (JPEG, JPEG 2000, TIFF, BMP, PNM, OpenCV's): 25 MB, of
which the check uses one Python's module and the JPEG extensions (about 5 MB). :func:`slim_wheel`
rewrites a wheel without the files :func:`dropped` names, its ``RECORD`` rewritten to match, so
``pip install`` installs it as usual.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

__all__ = ["dropped", "slim_wheel"]

_ABI_MODULE = re.compile(r"\.cpython-(\d+t?)-[^/]*\.so$")  # an extension module of one CPython
_OTHER_CODECS = ("nvjpeg2k", "nvtiff", "libtiff", "opencv", "nvbmp", "nvpnm")  # not JPEG
_INCLUDE = "/include/"


def dropped(name: str, python: str) -> bool:
    """Whether the wheel member ``name`` is left out for CPython ``python`` (``3.12``)."""
    found = _ABI_MODULE.search(name)
    if found and found.group(1) != python.replace(".", ""):
        return True
    base = name.rsplit("/", 1)[-1]
    in_extensions = "/extensions/" in name
    return _INCLUDE in name or (in_extensions and any(c in base for c in _OTHER_CODECS))


def slim_wheel(path: str | Path, python: str) -> tuple[int, int]:
    """Rewrite the wheel at ``path`` in place without what :func:`dropped` names.

    Returns:
        The wheel's size before and after, in bytes.

    Raises:
        ValueError: ``path`` is not a wheel (no ``RECORD``).
    """
    path = Path(path)
    before = path.stat().st_size
    tmp = path.with_suffix(".slim")
    with zipfile.ZipFile(path) as src:
        names = src.namelist()
        record = next((n for n in names if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise ValueError(f"{path}: not a wheel (no .dist-info/RECORD)")
        keep = [n for n in names if not dropped(n, python)]
        lines = src.read(record).decode().splitlines()
        kept = "\n".join(ln for ln in lines if ln.split(",", 1)[0] in set(keep)) + "\n"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for name in keep:
                info = src.getinfo(name)
                out.writestr(info, kept if name == record else src.read(name))
    tmp.replace(path)
    return before, path.stat().st_size

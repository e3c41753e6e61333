"""A user's own package of transforms, written into a test's folder and put on ``sys.path``.

Each call makes a package of a fresh name (modules are cached by name in ``sys.modules``), with
``ops.py`` (the transforms), ``helpers.py`` (imported by ``ops``: part of the fingerprint) and
``unused.py`` (imported by nothing: not part of it).
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

_names = itertools.count()

OPS = '''
import numpy as np

from {pkg} import helpers


def invert(sample, key, *, top=None):
    img = sample["image"]
    sample["image"] = helpers.inverted(img, top)
    return sample


def fails_on(sample, key, *, suffix):
    if key.endswith(suffix):
        raise ValueError("refused " + key)
    return sample


def as_float(sample, key):
    sample["image"] = sample["image"].astype(np.float32)
    return sample


def squash_half(sample, key):
    img = sample["image"]
    sample["image"] = img[: img.shape[0] // 2]
    return sample


def drops_label(sample, key):
    del sample["label"]
    return sample


def label_out_of_range(sample, key):
    sample["label"] = np.asarray(-5, np.int64)
    return sample


def crop_top_left(sample, key):
    """At 'decoded': the top-left quarter of every spatial file field (a region of interest)."""
    for name in ("image", "mask"):
        if name in sample:
            a = sample[name]
            sample[name] = a[: a.shape[0] // 2, : a.shape[1] // 2]
    return sample


def window(sample, key, *, low, high):
    """At 'decoded': a 16-bit window [low, high] to 8 bits, three windows as channels."""
    img = sample["image"].astype(np.float64)[..., 0]
    out = np.clip((img - low) / (high - low), 0, 1) * 255
    sample["image"] = np.stack([np.rint(out).astype(np.uint8)] * 3, axis=2)
    return sample


def stretch(sample, key):
    """Any point: the image's values stretched to the full 8 bits (as uint8)."""
    img = sample["image"].astype(np.float64)
    sample["image"] = np.rint(img / max(img.max(), 1) * 255).astype(np.uint8)
    return sample


def tint(sample, key):
    """At 'stored': a red tint (the channels no longer equal)."""
    img = sample["image"].copy()
    img[..., 0] = img[..., 0] // 2 + 128
    sample["image"] = img
    return sample


def reads_table(sample, key):
    """A transform reading a data file next to its module (not part of the fingerprint)."""
    import json
    import os

    with open(os.path.join(os.path.dirname(__file__), "gain.json")) as f:
        gain = json.load(f)["gain"]
    sample["image"] = np.clip(sample["image"].astype(np.int32) * gain, 0, 255).astype(np.uint8)
    return sample


def dtypes(sample, key, *, seen):
    """Writes the dtype of every field it is handed to the file ``seen`` (JSON)."""
    import json

    with open(seen, "w") as f:
        json.dump({{k: str(v.dtype) for k, v in sample.items()}}, f)
    return sample


def boxes_as_float32(sample, key):
    sample["boxes"] = sample["boxes"].astype(np.float32)
    return sample


def boxes_shifted(sample, key, *, dx):
    """At 'decoded': every box moved right by ``dx`` pixels, in place (padding rows kept)."""
    b = sample["boxes"]
    b[b[:, 4] >= 0, 0] += dx
    b[b[:, 4] >= 0, 2] += dx
    return sample


def valid_region(sample, key, *, extent, value=255):
    """At 'stored': the valid region (handed as ``extent``) painted ``value``."""
    top, left, h, w = extent
    img = sample["image"].copy()
    img[top : top + h, left : left + w] = value
    sample["image"] = img
    return sample


def takes_any(sample, key, **kw):
    return sample


def versioned(sample, key):
    return sample


versioned.version = "1"
'''

HELPERS = """
import numpy as np


def inverted(img, top=None):
    top = np.iinfo(img.dtype).max if top is None else top
    return (top - img).astype(img.dtype)
"""


def make_package(root: Path) -> str:
    """Write a fresh package under ``root``; return its name (``root`` goes on ``sys.path``)."""
    name = f"usertf{next(_names)}_{abs(hash(str(root))) % 10**8}"
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(textwrap.dedent(OPS.format(pkg=name)))
    (pkg / "helpers.py").write_text(textwrap.dedent(HELPERS))
    (pkg / "unused.py").write_text("X = 1\n")
    return name


def edit(root: Path, name: str, module: str, text: str) -> None:
    """Append ``text`` to ``module`` of package ``name`` (a new mtime, a new source)."""
    path = root / name / f"{module}.py"
    path.write_text(path.read_text() + text)


def importable_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """:func:`make_package` under ``tmp_path/code``, on ``sys.path`` for the test."""
    root = tmp_path / "code"
    name = make_package(root)
    monkeypatch.syspath_prepend(str(root))
    return root, name

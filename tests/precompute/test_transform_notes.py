"""A build's notes describe what is stored once the user's transform ran, not only the source.

Real 12-bit grey PNGs (every value below 4096: the ``gray_low_bits`` note) stored as three
channels (``grey_as_rgb``), built in process with a transform of a real user package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from precompute import BuildSpec, build
from tests.precompute.userpkg import make_package


@pytest.fixture()
def name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return make_package(tmp_path / "code")


@pytest.fixture()
def xrays(tmp_path: Path) -> Path:
    """Two class folders of 12-bit data in 16-bit grey PNGs (a ramp up to 4000)."""
    for c in ("a", "b"):
        (tmp_path / "src" / c).mkdir(parents=True)
        for i in range(2):
            ramp = np.linspace(10 * i, 4000, 30 * 40).reshape(30, 40).astype(np.uint16)
            Image.fromarray(ramp).save(tmp_path / "src" / c / f"{i}.png")
    return tmp_path / "src"


def _notes(src: Path, out: Path, **kw: Any) -> dict[str, Any]:
    spec = BuildSpec(size=16, mode="letterbox")
    attrs = build(str(src), str(out), spec, runner="sequential", progress=False, **kw)
    return dict(attrs["report"].get("notes", {}))


def test_without_a_transform_the_source_notes_are_made(xrays: Path, tmp_path: Path) -> None:
    notes = _notes(xrays, tmp_path / "plain")
    assert notes["gray_low_bits"]["count"] == 4 and notes["grey_as_rgb"]["count"] == 4


@pytest.mark.parametrize("at", ["decoded", "stored"])
def test_a_transform_that_brightens_withdraws_the_dark_note(
    xrays: Path, tmp_path: Path, name: str, at: str
) -> None:
    notes = _notes(xrays, tmp_path / at, transform=f"{name}.ops:stretch", transform_at=at)
    assert "gray_low_bits" not in notes  # what is stored uses the whole 8 bits
    assert notes["grey_as_rgb"]["count"] == 4  # still grey in three equal channels


def test_a_transform_that_keeps_the_values_keeps_the_notes(
    xrays: Path, tmp_path: Path, name: str
) -> None:
    for at in ("decoded", "stored"):
        notes = _notes(xrays, tmp_path / at, transform=f"{name}.ops:versioned", transform_at=at)
        assert notes["gray_low_bits"]["count"] == 4 and notes["grey_as_rgb"]["count"] == 4


def test_a_transform_that_colours_withdraws_the_grey_note(
    xrays: Path, tmp_path: Path, name: str
) -> None:
    notes = _notes(xrays, tmp_path / "t", transform=f"{name}.ops:tint")
    assert "grey_as_rgb" not in notes and "gray_low_bits" not in notes

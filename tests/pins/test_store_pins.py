"""Stores built from committed inputs keep their bytes, spec hashes, fingerprints and cache keys.

The pins were recorded before the build was restructured (``tests/pins/stores.py``); every
later build of the same inputs and flags must write the same store, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from precompute.format.layout import open_store_info
from tests.pins.stores import PINS, STORES, build_pin, copy_inputs, store_pin

PINNED = json.loads(PINS.read_text())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_inputs(tmp_path_factory.mktemp("pins") / "src")


def test_every_pinned_store_is_listed() -> None:
    assert sorted(PINNED) == sorted(STORES)


@pytest.mark.ray
@pytest.mark.parametrize("name", sorted(STORES))
def test_a_pinned_store_is_rebuilt_byte_for_byte(
    ray_local: None, inputs: Path, tmp_path: Path, name: str
) -> None:
    root = build_pin(inputs, name, tmp_path / "s.zarr")
    content = build_pin(inputs, name, tmp_path / "c.zarr", "--content-hash")
    got = store_pin(root, open_store_info(content).source_fingerprint)
    want = PINNED[name]
    changed = sorted(
        f
        for f in set(got["files"]) | set(want["files"])
        if got["files"].get(f) != want["files"].get(f)
    )
    assert changed == [], f"{name}: files whose bytes changed"
    for key in ("attrs", "spec_hash", "source_fingerprint", "content_fingerprint", "cache_key"):
        assert got[key] == want[key], f"{name}: {key}"
    assert got == want

"""The shared loader contract, run unchanged against both DALI loaders.

``JpegLoader`` reads a raw source, not a store, so its factory exports the contract's store as
lossless PNG files plus a manifest in index order (a hole becomes a file that is not an image,
which ``prescan`` + ``on_error="skip"`` leaves out of the order just as a store's hole). The three
store-only checks (variants, a corrupted shard, a damaged store) are replaced for ``JpegLoader``
by their source equivalents.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from PIL import Image

from loaders.errors import LoaderError
from precompute.errors import DecodeError, SourceError
from tests.contracts.loader_contract import (
    LoaderContract,
    collect,
    decode_index,
    make_index_store,
)

pytestmark = pytest.mark.dali


def store_to_manifest(store: Path) -> Path:
    """Export ``store`` (variant 0) as PNGs + ``manifest.csv`` next to it; return the manifest."""
    out = store.parent / f"{store.name}_png"
    manifest = out / "manifest.csv"
    if manifest.exists():
        return manifest
    group = zarr.open_group(str(store), mode="r")
    images, labels = group["image"][:], group["label"][:]
    if images.ndim == 5:
        images = images[:, 0]
    out.mkdir()
    rows = []
    for i, (img, label) in enumerate(zip(images, labels, strict=True)):
        name = f"{i:05d}.png"
        if label < 0:
            (out / name).write_bytes(b"a hole: not an image")
        else:
            Image.fromarray(img).save(out / name)
        rows.append((name, max(int(label), 0)))
    with open(manifest, "w", newline="") as f:
        csv.writer(f).writerows([("path", "label"), *rows])
    return manifest


class TestDaliStoreLoaderContract(LoaderContract):
    @staticmethod
    def make_loader(store_path: Path, **kw: Any) -> Any:
        from loaders.dali import DaliStoreLoader

        return DaliStoreLoader(store_path, device="cpu", **kw)


class TestJpegLoaderContract(LoaderContract):
    @staticmethod
    def make_loader(store_path: Path, **kw: Any) -> Any:
        from loaders.dali import JpegLoader
        from precompute.format.layout import open_store_info

        layout = open_store_info(store_path).layout
        return JpegLoader(
            store_to_manifest(Path(store_path)),
            size=layout.size,
            chunk_samples=layout.chunk_samples,
            on_error="skip",
            prescan=True,
            device="cpu",
            **kw,
        )

    def test_variant_follows_the_epoch(self, tmp_path: Path) -> None:
        # A raw source has one version of each image: every epoch serves variant 0's pixels.
        path = make_index_store(tmp_path / "v", 40, variants=3)
        for epoch in range(3):
            batches = self._epoch(path, epoch, seed=5)
            assert {int(v) for b in batches for v in b["image"][:, 0, 0, 2]} == {0}
            for b in batches:
                np.testing.assert_array_equal(decode_index(b["image"]), b["index"])

    def test_corrupted_chunk_raises_naming_the_shard(self, tmp_path: Path) -> None:
        # The source equivalent: a file that is not an image raises naming the file.
        manifest = store_to_manifest(make_index_store(tmp_path / "c", 64))
        (manifest.parent / "00010.png").write_bytes(b"\x89PNG broken")
        from loaders.dali import JpegLoader

        loader = JpegLoader(manifest, 8, size=16, chunk_samples=4, device="cpu")
        with pytest.raises(DecodeError, match=r"00010\.png"):
            collect(loader)

    @pytest.mark.parametrize("damage", ["missing", "empty", "bad_row"])
    def test_bad_store_raises_before_the_first_batch(self, tmp_path: Path, damage: str) -> None:
        from loaders.dali import JpegLoader

        manifest = tmp_path / "m.csv"
        if damage == "empty":
            manifest.write_text("path,label\n")
        elif damage == "bad_row":
            manifest.write_text("path,label\nonly-a-path\n")
        with pytest.raises(SourceError, match=re.escape(str(manifest))):
            JpegLoader(manifest, 8, size=16, device="cpu")


@pytest.mark.gpu
class TestDaliStoreLoaderContractGpu(LoaderContract):
    """The same suite with a GPU pipeline (``device_id`` set, GPU operators)."""

    @staticmethod
    def make_loader(store_path: Path, **kw: Any) -> Any:
        from loaders.dali import DaliStoreLoader

        return DaliStoreLoader(store_path, device="cuda", **kw)


@pytest.mark.gpu
class TestJpegLoaderContractGpu(TestJpegLoaderContract):
    """The same suite with ``fn.decoders.image(device="mixed")``."""

    @staticmethod
    def make_loader(store_path: Path, **kw: Any) -> Any:
        from loaders.dali import JpegLoader
        from precompute.format.layout import open_store_info

        layout = open_store_info(store_path).layout
        return JpegLoader(
            store_to_manifest(Path(store_path)),
            size=layout.size,
            chunk_samples=layout.chunk_samples,
            on_error="skip",
            prescan=True,
            device="cuda",
            **kw,
        )


def test_a_store_loaders_state_resumes_the_other_store_loader(tmp_path: Path) -> None:
    # both state the store's identity the same way (loaders.contract.store_identity)
    from loaders import StoreLoader
    from loaders.dali import DaliStoreLoader

    path = make_index_store(tmp_path / "s", 64)
    kw = {"batch_size": 4, "seed": 2, "rank": 1, "world_size": 2, "device": "cpu"}
    for first_cls, then_cls in ((StoreLoader, DaliStoreLoader), (DaliStoreLoader, StoreLoader)):
        first = first_cls(path, **kw)
        first.set_epoch(1)
        head = collect(first, limit=3)
        resumed = then_cls(path, **kw)
        resumed.load_state_dict(first.state_dict())
        whole = then_cls(path, **kw)
        whole.set_epoch(1)
        want, tail = collect(whole), collect(resumed)
        assert len(head + tail) == len(want)
        for got, w in zip(head + tail, want, strict=True):
            np.testing.assert_array_equal(got["index"], w["index"])
            np.testing.assert_array_equal(got["image"], w["image"])


def test_a_raw_source_loaders_state_and_a_store_loaders_are_told_apart(tmp_path: Path) -> None:
    from loaders import StoreLoader
    from loaders.dali import JpegLoader

    path = make_index_store(tmp_path / "s", 64)
    kw = {"batch_size": 4, "seed": 2, "device": "cpu"}
    raw = JpegLoader(store_to_manifest(path), size=16, chunk_samples=8, **kw)  # type: ignore[arg-type]
    store = StoreLoader(path, **kw)  # type: ignore[arg-type]
    with pytest.raises(LoaderError, match=r"saved by a loader of a raw source \(JpegLoader\)"):
        store.load_state_dict(raw.state_dict())
    with pytest.raises(LoaderError, match=r"saved by a loader of a store, not of this raw"):
        raw.load_state_dict(store.state_dict())


@pytest.mark.parametrize("world_size", [3, 7])
def test_is_pad_is_the_plan_position_for_both_store_loaders(
    tmp_path: Path, world_size: int
) -> None:
    # one definition (EpochPlan.is_pad): the repeats are the plan's last positions
    from loaders import StoreLoader
    from loaders.dali import DaliStoreLoader

    path = make_index_store(tmp_path / "s", 50)
    kw = {"batch_size": 4, "drop_last": False, "world_size": world_size, "device": "cpu"}
    for rank in range(world_size):
        torch_side, dali_side = (
            StoreLoader(path, rank=rank, **kw),
            DaliStoreLoader(path, rank=rank, **kw),
        )
        plan = dali_side.plan(0)
        flags = plan.is_pad(0, len(plan.order))
        np.testing.assert_array_equal(plan.order[flags], plan.repeats)
        got, want = collect(dali_side), collect(torch_side)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g["index"], w["index"])
            np.testing.assert_array_equal(g["is_pad"], w["is_pad"])

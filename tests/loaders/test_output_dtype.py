"""A loader's ``dtype=``: images, audio and arrays handed out as floats, each scaled by its kind.

Without augmentation a batch holds what the store holds (uint8 pixels, int16 waveforms, float16
log-mels); ``dtype=`` hands the signal fields out as floats (pixels in [0, 1], waveforms in
[-1, 1) exactly as ``AudioAugment`` makes them, log-mels and arrays cast) and leaves every other
entry as it is. An augment that sets its own float dtype must agree with it. The DALI loaders
take it too; ``loaders.tf`` and ``loaders.jax`` pass it to their loader
(``test_tf_loader.py``, ``test_jax_loader.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from benchmarks.audio_data import make_audio_dataset
from loaders import StoreLoader
from loaders.augment import AudioAugment, EvalAugment, TrainAugment
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.spec import BuildSpec
from tests.contracts.index_store import make_index_store
from tests.loaders.v2stores import make_v2_index_store, write_v2_store

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
RTOL = {"float32": 2e-7, "bfloat16": 2**-8, "float16": 2**-11}  # one rounding of each


@pytest.fixture(scope="module")
def v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """image (uint8), mask (uint8), keypoints (float32), label (int64)."""
    return make_v2_index_store(tmp_path_factory.mktemp("dtype") / "v2", 24)


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A waveform (int16) and a log-mel (float16) store of the same 12 real clips."""
    root = tmp_path_factory.mktemp("dtype_audio")
    make_audio_dataset(root / "clips", 12, 3, 0, (0.2, 0.8))
    stores = {}
    for kind in ("waveform", "logmel"):
        opts = {"clip_seconds": 0.5, "representation": kind, "n_mels": 16}
        fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
        spec = BuildSpec(size=8, shard_samples=8, chunk_samples=4, fields=fields)
        stores[kind] = root / kind
        build(str(root / "clips"), str(stores[kind]), spec, progress=False, runner="sequential")
    return stores


def _epoch(store: Path, **kw: Any) -> list[dict[str, Any]]:
    return list(StoreLoader(store, 4, shuffle=False, drop_last=False, **kw))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_images_become_floats_in_0_1_and_every_other_entry_is_kept(v2: Path, dtype: str) -> None:
    raw, got = _epoch(v2), _epoch(v2, dtype=dtype)
    assert raw[0]["image"].dtype == torch.uint8 and len(got) == len(raw) == 6
    for g, r in zip(got, raw, strict=True):
        assert g.keys() == r.keys() == {"image", "mask", "keypoints", "label", "index", "is_pad"}
        assert g["image"].dtype == DTYPES[dtype] and g["image"].shape == r["image"].shape
        want = r["image"].double() / 255
        torch.testing.assert_close(g["image"].double(), want, rtol=RTOL[dtype], atol=0)
        assert float(g["image"].min()) >= 0 and float(g["image"].max()) <= 1
        for key in ("mask", "keypoints", "label", "index", "is_pad"):
            assert g[key].dtype == r[key].dtype and torch.equal(g[key], r[key]), key


def test_int16_waveforms_become_what_audio_augment_makes_and_log_mels_are_cast(
    audio: dict[str, Path],
) -> None:
    raw = _epoch(audio["waveform"])
    got = _epoch(audio["waveform"], dtype="float32")
    augmented = _epoch(audio["waveform"], augment=AudioAugment())  # float32, k / 32768
    assert raw[0]["audio"].dtype == torch.int16
    for g, r, a in zip(got, raw, augmented, strict=True):
        assert torch.equal(g["audio"], a["audio"])  # bit for bit
        assert float(g["audio"].abs().max()) <= 1 and bool(g["audio"].abs().max() > 0)
        for key in ("audio.length", "audio.start", "audio.truncated", "label", "index"):
            assert g[key].dtype == r[key].dtype and torch.equal(g[key], r[key]), key
    mels = _epoch(audio["logmel"])
    for g, r in zip(_epoch(audio["logmel"], dtype="float32"), mels, strict=True):
        assert r["audio"].dtype == torch.float16 and torch.equal(g["audio"], r["audio"].float())
    # AudioAugment hands out float32: the loader's dtype casts it
    half = _epoch(audio["waveform"], augment=AudioAugment(), dtype="bfloat16")
    for h, a in zip(half, augmented, strict=True):
        assert torch.equal(h["audio"], a["audio"].to(torch.bfloat16))


def test_arrays_are_cast_unscaled(tmp_path: Path) -> None:
    fields = (
        FieldSpec("feat", "array", {"shape": [5], "dtype": "int16"}),
        FieldSpec("label", "label"),
    )
    n = 8
    feat = (np.arange(n * 5, dtype=np.int16).reshape(n, 5) - 20) * 1000
    data = {"feat": feat, "label": np.arange(n, dtype=np.int64) % 3}
    store = write_v2_store(tmp_path / "a", fields, data, BuildSpec(size=8), valid=np.ones(n))
    for batch in _epoch(store, dtype="float16"):
        rows = feat[batch["index"].numpy()]
        assert batch["feat"].dtype == torch.float16
        assert torch.equal(batch["feat"], torch.from_numpy(rows).to(torch.float16))


def test_an_augments_own_dtype_is_kept_and_another_is_refused(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 32)
    aug = TrainAugment(size=8, dtype="bfloat16")
    same = _epoch(store, augment=aug, dtype="bfloat16")
    for a, b in zip(_epoch(store, augment=aug), same, strict=True):
        assert b["image"].dtype == torch.bfloat16 and torch.equal(a["image"], b["image"])
    with pytest.raises(ValueError, match=r"dtype='float16' and the augment's dtype='float32' "):
        StoreLoader(store, 4, augment=EvalAugment(size=8), dtype="float16")


@pytest.mark.parametrize("bad", ["float64", "int16", "uint8", torch.float32, 32])
def test_a_dtype_that_is_not_a_float_name_is_refused(tmp_path: Path, bad: Any) -> None:
    store = make_index_store(tmp_path / "s", 8)
    with pytest.raises(ValueError, match=r"dtype must be None or one of \['bfloat16', 'float16'"):
        StoreLoader(store, 4, dtype=bad)


@pytest.mark.dali
def test_dali_loaders_hand_out_the_same_floats(tmp_path: Path) -> None:
    from loaders.dali import DaliAugment, DaliStoreLoader

    store = make_index_store(tmp_path / "s", 32)
    dali = DaliStoreLoader(store, 8, device="cpu", shuffle=False, dtype="float32")
    for d, s in zip(dali, StoreLoader(store, 8, shuffle=False, dtype="float32"), strict=True):
        assert d["image"].dtype == torch.float32 and torch.equal(d["image"], s["image"])
        assert torch.equal(d["label"], s["label"])
    with pytest.raises(ValueError, match="DaliAugment hands out its own dtype"):
        DaliStoreLoader(
            store, 8, device="cpu", augment=DaliAugment(dtype="float16"), dtype="float32"
        )

"""JpegLoader: decoded pixels match the build's decoder + Pillow resize; bad files; epochs."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.errors import DecodeError
from precompute.sample import make_image, make_sample_dataset
from precompute.stages.decode import decode_bytes
from tests.contracts.loader_contract import collect

pytestmark = pytest.mark.dali


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 40 images cover every odd mode of the sample set (L, RGBA, P, CMYK, I;16, EXIF, LA).
    return make_sample_dataset(tmp_path_factory.mktemp("raw") / "ds", 40, 4, (16, 64))


def _loader(src: Path, **kw: object):
    from loaders.dali import JpegLoader

    return JpegLoader(
        src, **{"batch_size": 8, "size": 32, "chunk_samples": 4, "device": "cpu", **kw}
    )


@pytest.mark.parametrize("size", [16, 32])
def test_pixels_match_the_build_decoder_and_pillow_resize(folder: Path, size: int) -> None:
    loader = _loader(folder, size=size, shuffle=False, drop_last=False)
    served = 0
    for batch in collect(loader):
        for img, i in zip(batch["image"], batch["index"], strict=True):
            key = loader.source.items[i][0]
            ref = decode_bytes(loader.source.read_bytes(key), key, 10**8)
            ref = np.asarray(ref.resize((size, size), Image.BILINEAR), dtype=np.int64)
            diff = np.abs(img.astype(np.int64) - ref)
            assert img.shape == (size, size, 3) and img.dtype == np.uint8
            assert diff.mean() < 1.0, (key, diff.mean())  # resampling kernels differ slightly
            assert diff.max() <= 16, (key, diff.max())
            served += 1
    assert served == 40


def test_random_crops_match_their_reference(folder: Path) -> None:
    from loaders.dali import DaliAugment
    from loaders.dali.jpeg import header_info
    from loaders.dali.params import draw_batch_params

    aug = DaliAugment(
        size=16,
        scale=(0.3, 0.8),
        flip=0.5,
        dtype="uint8",
        layout="HWC",
        mean=(0, 0, 0),
        std=(1, 1, 1),
    )
    loader = _loader(folder, augment=aug, size=16, seed=2, drop_last=False)
    for b, batch in enumerate(collect(loader)):
        raws = [loader.source.read_bytes(loader.source.items[i][0]) for i in batch["index"]]
        hw = np.array([header_info(r, 10**8)[:2] for r in raws])
        p = draw_batch_params(aug, hw, seed=2, epoch=0, rank=0, batch=b)
        for k, raw in enumerate(raws):
            (y0, x0), (y1, x1) = p.roi_start[k], p.roi_end[k]
            ref = (
                decode_bytes(raw, "x", 10**8)
                .crop((x0, y0, x1, y1))
                .resize((16, 16), Image.BILINEAR)
            )
            ref = np.asarray(ref, np.int64)[:, ::-1] if p.mirror[k] else np.asarray(ref, np.int64)
            assert np.abs(batch["image"][k].astype(np.int64) - ref).mean() < 2.0


def test_gif_and_alpha_follow_the_build_decoder(tmp_path: Path) -> None:
    root = tmp_path / "odd" / "a"
    root.mkdir(parents=True)
    rgba = np.zeros((20, 30, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, np.arange(30, dtype=np.uint8)[None, :] * 8
    Image.fromarray(rgba, "RGBA").save(root / "0.png")
    make_image(0, 1, 0, (30, 20)).save(root / "1.gif")
    loader = _loader(root.parent, size=20, shuffle=False, drop_last=False)
    (batch,) = collect(loader)
    assert batch["index"].tolist() == [0, 1]
    for img, (key, _) in zip(batch["image"], loader.source.items, strict=True):
        ref = decode_bytes(loader.source.read_bytes(key), key, 10**8)
        ref = np.asarray(ref.resize((20, 20), Image.BILINEAR), dtype=np.int64)
        assert np.abs(img.astype(np.int64) - ref).mean() < 1.0, key


def test_labels_are_the_class_folders(folder: Path) -> None:
    loader = _loader(folder, drop_last=False)
    for batch in collect(loader):
        for label, i in zip(batch["label"], batch["index"], strict=True):
            key = loader.source.items[i][0]
            assert loader.source.classes[label] == key.split("/")[0]


def test_files_are_chosen_by_label_and_key_and_balanced(folder: Path) -> None:
    loader = _loader(folder, drop_last=False, subset=lambda s: s["label"] == 1)
    labels = np.concatenate([b["label"] for b in collect(loader)])
    assert len(labels) == 10 and set(labels.tolist()) == {1}
    first = loader.source.classes[0]
    keyed = _loader(folder, drop_last=False, subset=lambda s: np.char.startswith(s["key"], first))
    assert set(np.concatenate([b["label"] for b in collect(keyed)]).tolist()) == {0}
    weights = np.where(np.arange(40) < 10, 1.0, 0.0)  # the first class's files only
    drawn = _loader(folder, weights=weights, samples_per_epoch=32)
    assert set(np.concatenate([b["label"] for b in collect(drawn)]).tolist()) == {0}


def _broken(tmp_path: Path) -> tuple[Path, str, str]:
    """A dataset with a non-image (caught by the header check) and a truncated JPEG whose header
    is fine (caught only when DALI fails to decode it)."""
    root = make_sample_dataset(tmp_path / "ds", 24, 3, (16, 32))
    files = sorted(root.rglob("*.jpg"))
    files[1].write_bytes(b"this is not an image")
    buf = io.BytesIO()
    make_image(0, 0, 1, (64, 64)).save(buf, "JPEG")
    files[4].write_bytes(buf.getvalue()[: int(len(buf.getvalue()) * 0.6)])
    rel = [f.relative_to(root).as_posix() for f in (files[1], files[4])]
    return root, rel[0], rel[1]


@pytest.mark.parametrize("prescan", [False, True])
def test_skip_drops_and_records_bad_files(tmp_path: Path, prescan: bool) -> None:
    root, garbage, truncated = _broken(tmp_path)
    loader = _loader(root, on_error="skip", prescan=prescan, drop_last=False, shuffle=False)
    loader.set_epoch(0)
    got = np.concatenate([b["index"] for b in collect(loader)])
    keys = [loader.source.items[i][0] for i in got]
    assert garbage not in keys
    assert garbage in loader.skipped and "not an image" in loader.skipped[garbage]
    # prescan leaves the non-image out of the order; the truncation only DALI can find
    assert len(loader.epoch_indices(0)) == (23 if prescan else 24)
    assert truncated not in keys and truncated in loader.skipped
    assert len(got) == 22 and len(set(got.tolist())) == 22


def test_skip_never_loses_good_files_of_a_failed_batch(tmp_path: Path) -> None:
    root, _, truncated = _broken(tmp_path)
    loader = _loader(root, on_error="skip", drop_last=False, batch_size=24, chunk_samples=24)
    (batch,) = collect(loader)
    assert len(batch["index"]) == 22  # one batch, rebuilt without the two bad files
    assert truncated in loader.skipped


@pytest.mark.parametrize("world_size", [5, 7])
def test_skipped_files_leave_is_pad_on_the_repeats(tmp_path: Path, world_size: int) -> None:
    # a row's is_pad is its plan position's (repeats come last), also when files of its batch
    # were dropped: every good file once across ranks, only the plan's repeats marked
    root, garbage, truncated = _broken(tmp_path)
    real, pads = [], []
    for rank in range(world_size):
        loader = _loader(
            root, on_error="skip", drop_last=False, rank=rank, world_size=world_size, batch_size=3
        )
        plan = loader.plan(0)
        position = {int(i): p for p, i in enumerate(plan.order)}
        for b in collect(loader):
            want = [position[int(i)] >= plan.real for i in b["index"]]
            assert b["is_pad"].tolist() == want
            real += b["index"][~b["is_pad"]].tolist()
            pads += b["index"][b["is_pad"]].tolist()
    keys = [k for k, _ in loader.source.items]
    good = sorted(set(range(24)) - {keys.index(garbage), keys.index(truncated)})
    assert sorted(real) == good
    assert 0 < len(pads) < world_size and set(pads) <= set(good)


def test_raise_names_the_bad_file(tmp_path: Path) -> None:
    root, garbage, truncated = _broken(tmp_path)
    with pytest.raises(DecodeError, match=re.escape(garbage)):
        collect(_loader(root, on_error="raise", shuffle=False))
    with pytest.raises(DecodeError, match=re.escape(garbage)):
        _loader(root, on_error="raise", prescan=True)
    (root / garbage).unlink()
    with pytest.raises(DecodeError, match=re.escape(truncated)):
        collect(_loader(root, on_error="raise", shuffle=False))


def test_raise_comes_at_the_bad_batch_not_before(tmp_path: Path) -> None:
    root, garbage, _ = _broken(tmp_path)
    loader = _loader(root, on_error="raise", shuffle=False, batch_size=4, chunk_samples=4)
    bad_batch = [k for k, _ in loader.source.items].index(garbage) // 4
    served = []
    with pytest.raises(DecodeError):
        for batch in loader:
            served.append(batch)
    assert len(served) == bad_batch


def test_every_epoch_yields(folder: Path) -> None:
    loader = _loader(folder, batch_size=5)
    epochs = [np.concatenate([b["index"] for b in collect(loader)]) for _ in range(3)]
    assert [len(e) for e in epochs] == [40, 40, 40]
    assert loader.epoch == 3
    assert not np.array_equal(epochs[0], epochs[1])


def test_bad_arguments_are_named(folder: Path) -> None:
    with pytest.raises(ValueError, match="on_error"):
        _loader(folder, on_error="ignore")
    with pytest.raises(ValueError, match="chunk_samples"):
        _loader(folder, chunk_samples=0)


def test_augmented_resume_is_exact_with_skipped_files(tmp_path: Path) -> None:
    from loaders.dali import DaliAugment

    root, _, _ = _broken(tmp_path)
    kw = {
        "augment": DaliAugment(size=16, brightness=0.2, saturation=0.2),
        "size": 16,
        "on_error": "skip",
        "seed": 7,
        "batch_size": 4,
    }
    want = collect(_loader(root, **kw))
    head_loader = _loader(root, **kw)
    head = collect(head_loader, limit=2)
    resumed = _loader(root, **kw)
    resumed.load_state_dict(head_loader.state_dict())
    got = head + collect(resumed)
    assert len(got) == len(want) == 6
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g["index"], w["index"])
        np.testing.assert_array_equal(g["image"], w["image"])
    assert sum(len(b["index"]) for b in got) == 22

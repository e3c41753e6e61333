"""loaders.augment: crop statistics, flips, extents, path equivalence, dtypes, op counts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import zarr

from benchmarks.common import aten_op_counts
from loaders.augment import (
    AugmentError,
    ColorJitter,
    EvalAugment,
    HorizontalFlip,
    Normalize,
    RandomResizedCrop,
    TrainAugment,
    augment_from_dict,
    op_from_dict,
)
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec

S = 32
# letterboxed (top, left, h, w) extents of various shapes, and the full image
EXTENTS = [(0, 0, S, S), (6, 0, 20, S), (0, 9, S, 14), (3, 5, 25, 21)]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _extents(n: int) -> torch.Tensor:
    return torch.tensor([EXTENTS[i % len(EXTENTS)] for i in range(n)], dtype=torch.int32)


def _images(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n, S, S, 3), dtype=torch.uint8, generator=_gen(seed))


def _crops(aug: TrainAugment, n: int, seed: int = 0):
    crops, _ = aug.params(_extents(n), _gen(seed))
    return [c.numpy() for c in crops], _extents(n).numpy()


def test_crops_stay_inside_extents_and_ranges():
    aug = TrainAugment(size=16)  # default scale (0.08, 1), ratio (3/4, 4/3)
    (top, left, h, w, _), ext = _crops(aug, 4000)
    assert (top >= ext[:, 0]).all() and (left >= ext[:, 1]).all()
    assert (top + h <= ext[:, 0] + ext[:, 2]).all() and (left + w <= ext[:, 1] + ext[:, 3]).all()
    assert (h >= 1).all() and (w >= 1).all()
    frac = h * w / (ext[:, 2] * ext[:, 3])
    # rounding each side to whole pixels moves the area by < one row + one column
    slack = (h + w + 1) / (ext[:, 2] * ext[:, 3])
    assert (frac >= 0.08 - slack).all() and (frac <= 1.0 + 1e-9).all()


def test_crop_statistics_match_requested_ranges():
    # on a square 64 px extent every candidate fits, so no rejection skews the distribution
    aug = TrainAugment(size=16, crop=RandomResizedCrop(scale=(0.25, 0.5), ratio=(0.5, 2.0)))
    ext = torch.tensor([[0, 0, 64, 64]] * 5000, dtype=torch.int32)
    crops, _ = aug.params(ext, _gen(1))
    h, w = crops.height.double().numpy(), crops.width.double().numpy()
    frac, log_ratio = h * w / 64**2, np.log(w / h)
    assert frac.min() >= 0.25 - 0.04 and frac.max() <= 0.5 + 0.04
    assert abs(frac.mean() - 0.375) < 0.005
    assert np.quantile(frac, [0.25, 0.75]) == pytest.approx([0.3125, 0.4375], abs=0.01)
    lo, hi = math.log(0.5), math.log(2.0)
    assert log_ratio.min() >= lo - 0.1 and log_ratio.max() <= hi + 0.1
    assert abs(log_ratio.mean()) < 0.02
    assert log_ratio.std() == pytest.approx((hi - lo) / math.sqrt(12), rel=0.05)
    tops = crops.top.numpy()
    assert tops.min() == 0 and (tops + h.astype(int)).max() == 64  # positions cover the extent


def test_impossible_candidates_fall_back_to_the_clamped_extent():
    aug = TrainAugment(size=8, crop=RandomResizedCrop(scale=(1.0, 1.0), ratio=(2.0, 2.0)))
    crops, _ = aug.params(torch.tensor([[2, 3, 20, 30]], dtype=torch.int32), _gen())
    assert [int(c) for c in crops[:4]] == [2 + 2, 3, 15, 30]  # 30 x 15 centred, ratio 2


def test_flip_rate_and_direction():
    flips = TrainAugment(size=8).params(_extents(4000), _gen(2))[0].flip.numpy()
    assert abs(flips.mean() - 0.5) < 0.03
    assert TrainAugment(flip=None).params(_extents(64), _gen())[0].flip.sum() == 0
    assert TrainAugment(flip=HorizontalFlip(p=1.0)).params(_extents(64), _gen())[0].flip.all()
    cols = torch.arange(S, dtype=torch.uint8).mul(7).view(1, 1, S, 1).expand(16, S, S, 3)
    for path in ("fast", "grid"):
        aug = TrainAugment(size=16, normalize=None, path=path)
        crops, _ = aug.params(_extents(16), _gen(3))
        out = aug(cols.contiguous(), _extents(16), _gen(3))
        slope = out[:, 0, 8, -1] - out[:, 0, 8, 0]
        assert torch.equal(slope < 0, crops.flip.bool()), path


@pytest.fixture(scope="module")
def letterbox_store(tmp_path_factory):
    """A real store whose valid pixels encode the sample index and whose fill is 0."""
    n = 24
    images = np.zeros((n, S, S, 3), np.uint8)
    extents = _extents(n).numpy()
    for i, (t, left, h, w) in enumerate(extents):
        images[i, t : t + h, left : left + w] = 10 * i + 5
    root = tmp_path_factory.mktemp("aug") / "store"
    spec = BuildSpec(size=S, mode="letterbox", shard_samples=8, chunk_samples=4)
    write_store_from_arrays(root, images, np.arange(n) % 3, spec, extents=extents)
    return root


@pytest.mark.parametrize("path", ["fast", "grid"])
@pytest.mark.parametrize("kind", ["train", "eval"])
def test_letterbox_fill_is_never_sampled(letterbox_store, path, kind):
    images = torch.from_numpy(zarr.open_array(str(letterbox_store / "image"))[:])
    extents = torch.from_numpy(zarr.open_array(str(letterbox_store / "extent"))[:])
    cls = TrainAugment if kind == "train" else EvalAugment
    out = cls(size=(12, 20), normalize=None, path=path)(images, extents, _gen(4)) * 255
    want = (10 * torch.arange(len(images)) + 5).float().view(-1, 1, 1, 1).expand_as(out)
    torch.testing.assert_close(out, want, atol=1e-3, rtol=0)


@pytest.mark.parametrize("size", [16, 48, (12, 40)])
@pytest.mark.parametrize("jitter", [None, ColorJitter(0.4, 0.4, 0.4)])
def test_fast_path_equals_grid_path(size, jitter):
    images, extents = _images(32, seed=5), _extents(32)
    g_fast, g_grid = _gen(7), _gen(7)
    fast = TrainAugment(size=size, jitter=jitter, path="fast")
    grid = TrainAugment(size=size, jitter=jitter, path="grid")
    a, b = fast(images, extents, g_fast), grid(images, extents, g_grid)
    assert torch.equal(g_fast.get_state(), g_grid.get_state())  # same draws consumed
    one_level = 1.0 / (255 * min(Normalize().std))  # uint8 rounding of the fast path
    if jitter is not None:  # the jitter factors scale that rounding error
        one_level *= (1 + jitter.brightness) * (1 + jitter.contrast) * (1 + jitter.saturation)
    assert (a - b).abs().max() <= 1.01 * one_level + 1e-4
    assert (a - b).abs().mean() < 0.3 * one_level


def test_auto_path_on_cpu_is_the_fast_path():
    images, extents = _images(8), _extents(8)
    auto = TrainAugment(size=16)(images, extents, _gen(9))
    assert torch.equal(auto, TrainAugment(size=16, path="fast")(images, extents, _gen(9)))
    threaded = TrainAugment(size=16, path="fast", threads=3)(images, extents, _gen(9))
    assert torch.equal(auto, threaded)


def test_same_seed_same_output_other_seed_differs():
    images, extents = _images(16), _extents(16)
    aug = TrainAugment(size=16, jitter=ColorJitter())
    a, b = aug(images, extents, _gen(1)), aug(images, extents, _gen(1))
    assert torch.equal(a, b)
    assert not torch.equal(a, aug(images, extents, _gen(2)))


def test_jitter_factors_follow_their_ranges():
    aug = TrainAugment(jitter=ColorJitter(brightness=0.2, contrast=0.5, saturation=0.0))
    _, f = aug.params(_extents(4000), _gen(3))
    assert f[:, 0].min() >= 0.8 and f[:, 0].max() <= 1.2 and abs(f[:, 0].mean() - 1) < 0.01
    assert f[:, 1].min() >= 0.5 and f[:, 1].max() <= 1.5
    assert torch.all(f[:, 2] == 1.0)


def test_jitter_changes_colours_per_sample():
    images = torch.full((2, S, S, 3), 100, dtype=torch.uint8)
    images[..., 0] = 200
    plain = TrainAugment(size=8, normalize=None, flip=None)
    jit = TrainAugment(size=8, normalize=None, flip=None, jitter=ColorJitter(0.5, 0.0, 0.0))
    x, y = plain(images, _extents(2), _gen(5)), jit(images, _extents(2), _gen(5))
    _, f = jit.params(_extents(2), _gen(5))
    want = (x * f[:, 0].view(-1, 1, 1, 1)).clamp(0, 1)
    torch.testing.assert_close(y, want, atol=1e-5, rtol=0)


def test_eval_path_is_deterministic_and_centred():
    images, extents = _images(8), torch.tensor([[8, 4, 20, 28]] * 8, dtype=torch.int32)
    aug = EvalAugment(size=16)
    g = _gen(1)
    state = g.get_state()
    a, b = aug(images, extents, g), aug(images, extents)
    assert torch.equal(a, b) and torch.equal(g.get_state(), state)
    # short side 20 * 0.875 = 17.5 -> 18 px box, centred in the extent
    from loaders.augment import center_crops

    box = center_crops(extents[:1], (16, 16), aug.crop)
    assert [int(v) for v in box[:4]] == [8 + 1, 4 + 5, 18, 18]
    crop = images[:, 9:27, 9:27].permute(0, 3, 1, 2).float()
    want = torch.nn.functional.interpolate(crop, size=(16, 16), mode="bilinear", align_corners=True)
    mean = torch.tensor(Normalize().mean).view(1, 3, 1, 1)
    std = torch.tensor(Normalize().std).view(1, 3, 1, 1)
    torch.testing.assert_close(a, (want / 255 - mean) / std, atol=0.02, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("path", ["fast", "grid"])
def test_output_dtype_and_memory_format(dtype, channels_last, path):
    images, extents = _images(8), _extents(8)
    ref = TrainAugment(size=(12, 16), path=path)(images, extents, _gen(2))
    aug = TrainAugment(size=(12, 16), dtype=dtype, channels_last=channels_last, path=path)
    out = aug(images, extents, _gen(2))
    assert out.shape == (8, 3, 12, 16) and out.dtype == getattr(torch, dtype)
    assert out.is_contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format
    )
    torch.testing.assert_close(out.float(), ref, atol=0.02, rtol=0.01)


@pytest.mark.parametrize(
    "aug",
    [
        TrainAugment(size=16, path="grid", jitter=ColorJitter(), dtype="bfloat16"),
        TrainAugment(size=16, path="grid", channels_last=True),
        EvalAugment(size=16, path="grid"),
    ],
    ids=["train-jitter-bf16", "train-cl", "eval"],
)
def test_device_path_op_count_is_independent_of_batch_size(aug):
    counts = {}
    for b in (32, 256):
        images, extents = _images(b), _extents(b)
        aug(images, extents, _gen())  # warm-up
        counts[b] = aten_op_counts(
            lambda images=images, extents=extents: aug(images, extents, _gen())
        )
    assert counts[32] == counts[256]
    assert "aten::grid_sample" in str(counts[32])
    assert "aten::_local_scalar_dense" not in counts[32]  # no .item(): no host sync


def test_policy_round_trips_as_data():
    aug = TrainAugment(
        size=(96, 128),
        crop=RandomResizedCrop(scale=(0.3, 0.9)),
        flip=None,
        jitter=ColorJitter(0.1, 0.2, 0.3),
        dtype="bfloat16",
        channels_last=True,
    )
    data = json.loads(json.dumps(aug.to_dict()))
    assert augment_from_dict(data) == aug
    ev = EvalAugment(size=64, normalize=None)
    assert augment_from_dict(json.loads(json.dumps(ev.to_dict()))) == ev
    assert op_from_dict({"op": "horizontal_flip", "p": 0.25}) == HorizontalFlip(0.25)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"op": "random_resized_crop", "scale": [0.9, 0.1]}, "random_resized_crop.scale"),
        ({"op": "random_resized_crop", "ratio": [0, 1]}, "ratio"),
        ({"op": "horizontal_flip", "p": 1.5}, "horizontal_flip.p"),
        ({"op": "color_jitter", "brightness": "lots"}, "color_jitter.brightness"),
        ({"op": "normalize", "std": [1, 0, 1]}, r"normalize.std\[1\]"),
        ({"op": "normalize", "mean": [0.5, 0.5]}, "3 values"),
        ({"op": "rotate", "angle": 3}, "unknown op 'rotate'"),
        ({"op": "horizontal_flip", "prob": 0.5}, r"unknown field\(s\) \['prob'\]"),
    ],
)
def test_bad_op_specs_raise_naming_the_value(bad, match):
    with pytest.raises(AugmentError, match=match):
        op_from_dict(bad)


def test_bad_policies_and_inputs_raise():
    with pytest.raises(AugmentError, match="dtype"):
        TrainAugment(dtype="float64")
    with pytest.raises(AugmentError, match="path"):
        TrainAugment(path="gpu")
    with pytest.raises(AugmentError, match="size"):
        TrainAugment(size=(0, 4))
    for size in (24.5, None, True):  # not an int, nor a pair: the same error, naming it
        with pytest.raises(AugmentError, match=rf"size must be an int .*, got {size}$"):
            TrainAugment(size=size)  # type: ignore[arg-type]
    with pytest.raises(AugmentError, match=r"threads must be an integer in \[1, 64\], got 0"):
        TrainAugment(threads=0)
    with pytest.raises(AugmentError, match=r"threads .*, got <an integer of 16610 bits>$"):
        TrainAugment(threads=10**5000)
    with pytest.raises(AugmentError, match="kind"):
        augment_from_dict({"kind": "test"})
    from loaders.augment import CenterCrop

    with pytest.raises(AugmentError, match="crop must be RandomResizedCrop, got CenterCrop"):
        TrainAugment(crop=CenterCrop())
    with pytest.raises(AugmentError, match="crop must be CenterCrop, got None"):
        EvalAugment(crop=None)
    aug = TrainAugment(size=8)
    with pytest.raises(AugmentError, match="uint8"):
        aug(_images(2).float(), _extents(2), _gen())
    with pytest.raises(AugmentError, match="extents"):
        aug(_images(2), _extents(3), _gen())
    with pytest.raises(AugmentError, match="extents"):
        aug(_images(2), _extents(2).float(), _gen())
    assert isinstance(AugmentError("x"), ValueError)


def test_fast_path_workers_use_one_omp_thread_without_touching_the_caller():
    import threading

    from loaders.augment.image.threads import omp_runtime, pool

    before = torch.get_num_threads()
    assert omp_runtime() is not None  # Linux + torch's bundled OpenMP runtime
    assert pool(2).submit(torch.get_num_threads).result() == 1
    seen: list[int] = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert torch.get_num_threads() == before and seen == [before]


def _grey(t: torch.Tensor) -> torch.Tensor:
    return 0.299 * t[:, 0:1] + 0.587 * t[:, 1:2] + 0.114 * t[:, 2:3]


def test_colour_matrix_matches_the_step_by_step_definition():
    from loaders.augment.image.color import apply_color

    g = _gen(4)
    x = 60 + 120 * torch.rand(6, 3, 8, 8, generator=g)  # mid-range: no step saturates
    f = 1 + 0.3 * (2 * torch.rand(6, 3, generator=g) - 1)
    b, c, s = (f[:, k].view(-1, 1, 1, 1) for k in range(3))
    x1 = b * x
    x2 = c * x1 + (1 - c) * _grey(x1).mean((2, 3), keepdim=True)
    x3 = s * x2 + (1 - s) * _grey(x2)
    mean = torch.tensor(Normalize().mean).view(1, 3, 1, 1)
    std = torch.tensor(Normalize().std).view(1, 3, 1, 1)
    torch.testing.assert_close(
        apply_color(x, f, Normalize()), (x3 / 255 - mean) / std, atol=1e-4, rtol=1e-4
    )
    grey_only = apply_color(x, torch.tensor([[1.0, 1.0, 0.0]] * 6), None)  # saturation 0
    assert torch.allclose(grey_only[:, 0], grey_only[:, 1], atol=1e-5)
    bright = apply_color(x, torch.tensor([[2.0, 1.0, 1.0]] * 6), None)
    assert bright.max() == 1.0  # clamped once, to [0, 255] / 255
    contrast = apply_color(x, torch.tensor([[1.0, 3.0, 1.0]] * 6), None)  # darks pushed < 0
    assert contrast.min() == 0.0 and contrast.max() == 1.0


def test_from_dict_classmethods_check_the_kind():
    assert TrainAugment.from_dict(TrainAugment().to_dict()) == TrainAugment()
    assert RandomResizedCrop.from_dict({"op": "random_resized_crop"}) == RandomResizedCrop()
    with pytest.raises(AugmentError, match=r"TrainAugment\.from_dict"):
        TrainAugment.from_dict(EvalAugment().to_dict())
    with pytest.raises(AugmentError, match=r"HorizontalFlip\.from_dict"):
        HorizontalFlip.from_dict({"op": "center_crop"})


@pytest.mark.parametrize("bad", [(-1, 0, 10, 10), (0, 0, 0, 10), (30, 0, 10, 10), (0, 5, 8, S)])
def test_extents_outside_the_image_raise_naming_the_sample(bad):
    extents = _extents(4)
    extents[2] = torch.tensor(bad)
    # the CPU path holds the values on the host anyway; the device path never reads them
    for aug in (TrainAugment(size=8), EvalAugment(size=8), TrainAugment(size=8, path="fast")):
        with pytest.raises(AugmentError, match=r"sample 2: extent .* not inside the 32x32"):
            aug(_images(4), extents, _gen())


def test_fast_path_works_in_a_forked_child():
    import multiprocessing as mp

    TrainAugment(size=8)(_images(4), _extents(4), _gen())  # the parent's pool exists
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as child:
        shape = child.apply(_augment_shape, ())
    assert shape == (4, 3, 8, 8)


def _augment_shape() -> tuple[int, ...]:
    return tuple(TrainAugment(size=8)(_images(4), _extents(4), _gen()).shape)

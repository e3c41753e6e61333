"""loaders.augment.mix: Beta lambdas, shared lambda, cutmix area, soft targets, smoothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmarks.common import aten_op_counts
from loaders.augment import AugmentError, Mixup, smooth_targets

CPU = torch.device("cpu")


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _const_images(b: int, h: int = 8, w: int = 10) -> torch.Tensor:
    """Sample i is the constant image i + 1 (so every output pixel says whose it is)."""
    return (torch.arange(b, dtype=torch.float32) + 1).view(b, 1, 1, 1).expand(b, 3, h, w).clone()


def _ks_two_sample(a: np.ndarray, b: np.ndarray) -> float:
    grid = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    cdf_b = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.abs(cdf_a - cdf_b).max())


@pytest.mark.parametrize("alpha", [0.4, 1.0, 2.0])
def test_mixup_lambdas_follow_the_beta(alpha):
    mix = Mixup(num_classes=4, mixup_alpha=alpha, cutmix_alpha=0.0)
    g = _gen(11)
    lams = np.array([float(mix.params(8, 8, g, CPU).lam) for _ in range(4000)])
    assert lams.mean() == pytest.approx(0.5, abs=0.015)
    assert lams.var() == pytest.approx(1 / (4 * (2 * alpha + 1)), rel=0.08)
    reference = np.random.default_rng(0).beta(alpha, alpha, 4000)
    assert _ks_two_sample(lams, reference) < 1.95 * np.sqrt(2 / 4000)  # KS at p = 0.001


def test_one_lambda_shared_by_images_and_targets_for_mixup():
    mix = Mixup(num_classes=8, mixup_alpha=1.0, cutmix_alpha=0.0, label_smoothing=0.0)
    b = 8
    images, labels = _const_images(b), torch.arange(b)
    for seed in range(5):
        p = mix.params(8, 10, _gen(seed), CPU)
        out, target = mix(images, labels, _gen(seed))
        lam = float(p.lam)
        own, other = torch.arange(b) + 1.0, torch.arange(b).flip(0) + 1.0
        torch.testing.assert_close(out[:, 0, 0, 0], lam * own + (1 - lam) * other)
        assert torch.all(out == out[:, :, :1, :1])  # one lambda for all pixels
        rows = torch.arange(b)
        torch.testing.assert_close(target[rows, labels], torch.full((b,), lam))
        torch.testing.assert_close(target[rows, labels.flip(0)], torch.full((b,), 1 - lam))


def test_cutmix_lambda_is_the_pasted_area():
    mix = Mixup(num_classes=6, mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.0)
    b, h, w = 6, 16, 20
    images, labels = _const_images(b, h, w), torch.arange(b)
    seen_box = False
    for seed in range(20):
        out, target = mix(images, labels, _gen(seed))
        own = (out == images).all(1).float().mean((1, 2))  # fraction of own pixels
        torch.testing.assert_close(target[torch.arange(b), labels], own)
        assert torch.all((out == images) | (out == images.flip(0)))  # pasted, not blended
        y0, y1, x0, x1 = mix.params(h, w, _gen(seed), CPU).box.tolist()
        assert 0 <= y0 <= y1 <= h and 0 <= x0 <= x1 <= w
        seen_box |= (y1 - y0) * (x1 - x0) > 0
    assert seen_box


def test_switch_probability_and_prob():
    g = _gen(5)
    mix = Mixup(num_classes=2, switch_prob=0.3)
    cut = [bool(mix.params(8, 8, g, CPU).cutmix) for _ in range(3000)]
    assert np.mean(cut) == pytest.approx(0.3, abs=0.03)
    half = Mixup(num_classes=2, prob=0.5)
    applied = [bool(half.params(8, 8, g, CPU).apply) for _ in range(3000)]
    assert np.mean(applied) == pytest.approx(0.5, abs=0.03)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_soft_targets_sum_to_one_and_smoothing_values(smoothing):
    c, b = 10, 16
    labels = torch.arange(b) % c
    t = smooth_targets(labels, c, smoothing)
    assert torch.allclose(t.sum(1), torch.ones(b))
    on = torch.full((b,), 1 - smoothing + smoothing / c)
    assert torch.allclose(t[torch.arange(b), labels], on)
    assert torch.allclose(t.sum(1) - t.max(1).values, torch.full((b,), smoothing * (c - 1) / c))
    mix = Mixup(num_classes=c, label_smoothing=smoothing)
    for seed in range(10):
        _, soft = mix(torch.randn(b, 3, 8, 8), labels, _gen(seed))
        assert soft.shape == (b, c) and soft.dtype == torch.float32
        assert torch.allclose(soft.sum(1), torch.ones(b), atol=1e-6)
        assert soft.min() >= smoothing / c - 1e-7


def test_no_mixing_keeps_images_and_gives_smoothed_targets():
    mix = Mixup(num_classes=5, prob=0.0, label_smoothing=0.2)
    images, labels = torch.randn(4, 3, 8, 8), torch.tensor([0, 4, 2, 2])
    out, soft = mix(images, labels, _gen())
    assert torch.equal(out, images)
    assert torch.equal(soft, smooth_targets(labels, 5, 0.2))


def test_same_seed_same_result_and_dtypes():
    mix = Mixup(num_classes=3)
    images, labels = torch.randn(8, 3, 8, 8), torch.arange(8) % 3
    a, b = mix(images, labels, _gen(3)), mix(images, labels, _gen(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    mixup_only = Mixup(num_classes=8, cutmix_alpha=0.0, label_smoothing=0.0)
    for dtype in (torch.bfloat16, torch.float16):
        x = _const_images(8).to(dtype).contiguous(memory_format=torch.channels_last)
        out, soft = mixup_only(x, torch.arange(8), _gen(4))
        assert out.dtype == dtype and out.is_contiguous(memory_format=torch.channels_last)
        lam = soft[0, 0]  # the lambda the targets use is the one applied to the images
        want = (lam * 1 + (1 - lam) * 8).to(dtype)
        assert abs(float(out[0, 0, 0, 0]) - float(want)) <= abs(float(want)) * 2**-7


def test_op_count_is_independent_of_batch_size_and_no_sync():
    mix = Mixup(num_classes=10)
    counts = []
    for b in (32, 256):
        x, y = torch.randn(b, 3, 16, 16), torch.arange(b) % 10
        # apply: the device work, without the host-side label check of __call__
        counts.append(aten_op_counts(lambda x=x, y=y: mix.apply(x, y, _gen())))
    assert counts[0] == counts[1]
    assert "aten::_standard_gamma" in counts[0]
    assert "aten::_local_scalar_dense" not in counts[0]


def test_policy_round_trip_and_bad_values():
    mix = Mixup(num_classes=100, mixup_alpha=0.2, switch_prob=0.25, label_smoothing=0.05)
    assert Mixup.from_dict(json.loads(json.dumps(mix.to_dict()))) == mix
    with pytest.raises(AugmentError, match="num_classes"):
        Mixup(num_classes=0)
    with pytest.raises(AugmentError, match=r"mixup\.prob"):
        Mixup(num_classes=2, prob=2.0)
    with pytest.raises(AugmentError, match=r"mixup\.prob .*, got <an integer of 16610 bits>$"):
        Mixup(num_classes=2, prob=10**5000)
    with pytest.raises(
        AugmentError, match=r"mixup\.num_classes must be an integer in \[1, 16777216\], got 2\.0"
    ):
        Mixup(num_classes=2.0)
    with pytest.raises(
        AugmentError, match=r"mixup\.num_classes must be an integer in \[1, 16777216\]"
    ):
        Mixup(num_classes=2**31)  # at construction, not a 34 GB allocation at the first batch
    with pytest.raises(AugmentError, match="both 0"):
        Mixup(num_classes=2, mixup_alpha=0, cutmix_alpha=0)
    with pytest.raises(AugmentError, match="unknown"):
        Mixup.from_dict({"num_classes": 2, "alpha": 1.0})
    with pytest.raises(AugmentError, match="int64 labels"):
        Mixup(num_classes=2)(torch.randn(4, 3, 8, 8), torch.zeros(4, dtype=torch.int32), _gen())
    with pytest.raises(AugmentError, match=r"label 7 of sample 1 is not in \[0, 5\)"):
        Mixup(num_classes=5)(torch.randn(3, 3, 8, 8), torch.tensor([0, 7, 1]), _gen())
    with pytest.raises(AugmentError, match="float images"):
        Mixup(num_classes=2)(
            torch.zeros(4, 3, 8, 8, dtype=torch.uint8), torch.zeros(4).long(), _gen()
        )


def test_every_mixing_path_names_the_label_out_of_range():
    # one check (loaders.augment.checks.check_labels) behind Mixup, a v2 label field and audio
    from loaders.augment import AudioAugment
    from precompute.fields import FieldSpec

    labels = torch.tensor([0, 5, 1])
    with pytest.raises(AugmentError, match=r"^mixup: label 5 of sample 1 is not in \[0, 3\)$"):
        Mixup(3)(torch.rand(3, 3, 8, 8), labels, _gen())
    fields = (FieldSpec("image", "image", {}), FieldSpec("label", "label", {}))
    values = {"image": torch.rand(3, 3, 8, 8), "label": labels}
    with pytest.raises(AugmentError, match=r"^field 'label': label 5 of sample 1 is not in \["):
        Mixup(3).apply_fields(values, fields, _gen())
    audio = {"audio": torch.zeros(3, 64), "label": labels, "length": torch.full((3,), 64)}
    with pytest.raises(AugmentError, match=r"^audio mixing: label 5 of sample 1 is not in \["):
        AudioAugment(num_classes=3, mixup_alpha=1.0)(audio, _gen())

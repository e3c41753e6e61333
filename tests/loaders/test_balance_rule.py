"""What ``balance=`` achieves, as ``docs/loaders.md`` says it: a class, then a sample.

The docs promised "each class drawn equally often (by pixel share for masks)"; measured on a
segmentation set, background stayed at 67% of the drawn pixels. The rule, exactly: a draw is a
class chosen uniformly among those held, then a sample with probability ``s_ic / M_c``. These
tests hold the weights to that rule and to the documented example's figures (a CT set whose
rare class is in a third of the slices).
"""

from __future__ import annotations

import numpy as np

from loaders.selection.weights import balanced_weights, repeat_factors
from precompute.fields import ClassCounts


def _ct_slices(n: int = 102, seed: int = 0) -> tuple[ClassCounts, np.ndarray]:
    """Masks of 128x128 with 67% background, 32% organ, a lesion; 9 rare pixels in a third."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((n, 4), np.int64)
    dense[:, 2] = rng.integers(100, 180, n)
    dense[:, 1] = rng.integers(5100, 5400, n)
    dense[np.arange(n) % 3 == 0, 3] = 9  # a third of the slices
    dense[:, 0] = 128 * 128 - dense[:, 1:].sum(1)
    samples, classes = np.nonzero(dense)
    counts = ClassCounts(samples, classes, dense[samples, classes], 4)
    return counts, dense


def test_a_draw_is_a_class_chosen_uniformly_then_a_sample_by_its_share() -> None:
    counts, dense = _ct_slices()
    weights = balanced_weights(counts, np.arange(len(dense)))
    share = dense / dense.sum(1, keepdims=True)
    two_stage = (share / share.sum(0)).mean(1)  # class 1/C, then sample s_ic / M_c
    np.testing.assert_allclose(weights / weights.sum(), two_stage, rtol=1e-12)


def test_the_documented_example_rare_slices_double_and_pixels_stay_background() -> None:
    counts, dense = _ct_slices()
    p = balanced_weights(counts, np.arange(len(dense)))
    p = p / p.sum()
    rare = dense[:, 3] > 0
    assert abs(rare.mean() - 1 / 3) < 1e-9  # without balance: a third of the draws
    assert abs(p[rare].sum() - (1 / 4 + 3 / 4 * 1 / 3)) < 0.01  # with it: half
    pixels = (p[:, None] * dense).sum(0)
    plain = dense.sum(0) / dense.sum()
    assert abs(pixels[0] / pixels.sum() - plain[0]) < 0.001  # background: 67% either way
    assert abs(plain[0] - 0.67) < 0.01


def test_repeat_factors_repeat_only_classes_rarer_than_the_threshold() -> None:
    counts, dense = _ct_slices()
    rare = dense[:, 3] > 0
    members = np.arange(len(dense))
    assert np.all(repeat_factors(counts, members, 0.3) == 1.0)  # held by a third: > 0.3
    factors = repeat_factors(counts, members, 0.9)
    np.testing.assert_allclose(factors[rare], np.sqrt(0.9 * 3))  # 1.64
    assert np.all(factors[~rare] == 1.0)

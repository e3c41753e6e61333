"""The random draws of mixing, shared by image and audio policies (no policy here).

:class:`MixParams` is one batch's mixing decision, :func:`beta_pair` draws Beta lambdas from
an explicit generator, :func:`smooth_targets` gives one-hot targets with label smoothing.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["MixParams", "beta_pair", "smooth_targets"]


class MixParams(NamedTuple):
    """One batch's mixing decision; all fields are 0-d tensors except ``box`` (4,)."""

    apply: torch.Tensor  # bool: mix this batch at all
    cutmix: torch.Tensor  # bool: cutmix rather than mixup
    lam: torch.Tensor  # float32: weight of the sample's own image/target (area-corrected)
    box: torch.Tensor  # int64 (y0, y1, x0, x1) of the pasted box (empty unless cutmix)


def beta_pair(
    alphas: tuple[float, float], generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """Draw one Beta(a, a) value per entry of ``alphas`` from two Gamma draws each.

    ``torch._standard_gamma`` accepts an explicit generator (``Beta.sample`` does not). A zero
    alpha gives 1.0 (that method is off).
    """
    conc = torch.ones((len(alphas), 2), dtype=torch.float32, device=device)
    for i, a in enumerate(alphas):
        if a > 0:
            conc[i].fill_(a)  # a fill kernel: no host-to-device copy
    g = torch._standard_gamma(conc, generator=generator)
    total = g.sum(1)
    lam = torch.where(total > 0, g[:, 0] / total.clamp_min(1e-30), torch.full_like(total, 0.5))
    for i, a in enumerate(alphas):
        if a <= 0:
            lam[i].fill_(1.0)
    return lam


def smooth_targets(labels: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """One-hot ``[B, C]`` float32 targets with ``smoothing`` spread over all classes."""
    off = smoothing / num_classes
    out = torch.full((labels.shape[0], num_classes), off, device=labels.device)
    return out.scatter_(1, labels.view(-1, 1), 1.0 - smoothing + off)

"""The tensor work of :class:`~loaders.augment.audio.policy.AudioAugment`: one function per op.

Every function takes a float32 batch ``x`` (``(B, T)`` waveforms or ``(B, M, T)`` features, time
last), the per-sample valid lengths ``length`` (``(B,)`` int64, on ``x``'s device) and the
batch's generator, and draws a fixed number of values from it, so a batch's result depends
only on the generator's seed. Plain torch ops: the same code runs on the CPU and on CUDA, with
no host sync.
"""

from __future__ import annotations

import torch

from loaders.augment.draws import beta_pair

__all__ = ["crop", "gain", "mask_spans", "mix", "noise", "valid_min"]


def _uniform(n: tuple[int, ...], gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return torch.rand(n, generator=gen, device=dev)


def _time_view(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A ``(B,)`` tensor shaped to broadcast over ``x`` (``(B, 1)`` or ``(B, 1, 1)``)."""
    return t.view(-1, *([1] * (x.dim() - 1)))


def crop(
    x: torch.Tensor, length: torch.Tensor, size: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random window of ``size`` steps per sample, inside its valid length when it fits.

    The start is uniform in ``[0, max(length - size, 0)]`` (a random time shift of the clip);
    the new length is ``min(length - start, size)``.
    """
    room = (length - size).clamp_min(0)
    start = torch.floor(_uniform((x.shape[0],), gen, x.device) * (room + 1)).long()
    start = torch.minimum(start, room)
    idx = start[:, None] + torch.arange(size, device=x.device)[None, :]  # (B, size)
    if x.dim() == 3:
        idx = idx[:, None, :].expand(-1, x.shape[1], -1)
    return torch.gather(x, -1, idx), (length - start).clamp(0, size)


def gain(
    x: torch.Tensor, lo: float, hi: float, features: bool, gen: torch.Generator
) -> torch.Tensor:
    """Gain uniform in ``[lo, hi]`` dB per sample: ``x * 10^(g/20)``; ``x + g`` on dB features."""
    g = lo + (hi - lo) * _uniform((x.shape[0],), gen, x.device)
    if features:
        return x + _time_view(g, x)
    return x * _time_view(torch.pow(10.0, g / 20.0), x)


def _valid(x: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """``(B, 1?, T)`` bool: the time steps inside each sample's valid length."""
    steps = torch.arange(x.shape[-1], device=x.device)
    mask = steps[None, :] < length[:, None]
    return mask if x.dim() == 2 else mask[:, None, :]


def noise(
    x: torch.Tensor, length: torch.Tensor, lo: float, hi: float, gen: torch.Generator
) -> torch.Tensor:
    """Gaussian noise at an SNR uniform in ``[lo, hi]`` dB over each clip's valid length.

    The signal power is the mean square over the valid samples; the noise is zero outside
    them. A silent (or empty) clip gets no noise.
    """
    snr = lo + (hi - lo) * _uniform((x.shape[0],), gen, x.device)
    valid = _valid(x, length)
    power = (x.square() * valid).sum(-1) / length.clamp_min(1)
    scale = torch.sqrt(power / torch.pow(10.0, snr / 10.0))
    n = torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
    return x + n * scale[:, None] * valid


def valid_min(x: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """``(B,)``: each clip's minimum over its valid time steps (0 for an empty clip)."""
    inside = torch.where(_valid(x, length), x, torch.full_like(x, float("inf")))
    low = inside.flatten(1).amin(1)
    return torch.where(torch.isfinite(low), low, torch.zeros_like(low))


def mask_spans(
    x: torch.Tensor, extent: torch.Tensor, count: int, width: int, axis: int,
    value: torch.Tensor, gen: torch.Generator,
) -> torch.Tensor:  # fmt: skip
    """SpecAugment masks: ``count`` spans per sample along ``axis``, inside ``[0, extent)``.

    Each span's width is uniform in ``[0, min(width, extent)]`` and its start uniform among
    the positions that keep it inside ``extent``; masked values of sample ``i`` become
    ``value[i]``.
    """
    b, size = x.shape[0], x.shape[axis]
    u = _uniform((2, b, count), gen, x.device)
    top = torch.minimum(extent, torch.full_like(extent, width))[:, None]
    w = torch.floor(u[0] * (top + 1)).long().minimum(top)
    start = torch.floor(u[1] * (extent[:, None] - w + 1)).long()
    pos = torch.arange(size, device=x.device)[None, None, :]
    hit = ((pos >= start[..., None]) & (pos < (start + w)[..., None])).any(1)  # (B, size)
    shape = [b] + [1] * (x.dim() - 1)
    shape[axis] = size
    fill = value.to(x.dtype).view([b] + [1] * (x.dim() - 1))
    return torch.where(hit.view(shape), fill, x)


def mix(
    x: torch.Tensor, length: torch.Tensor, targets: torch.Tensor, alphas: tuple[float, float],
    prob: float, switch: float, gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Mixup or cutmix along time of sample ``i`` with ``B - 1 - i``, one draw per batch.

    Draws 3 uniforms and one Beta candidate per method (:func:`~loaders.augment.draws.beta_pair`).
    Mixup blends the clips and the ``targets`` with lambda; cutmix pastes the partner's time
    span ``[s, s + w)``, ``w = floor((1 - lambda) * T)``, and mixes the targets by the time
    fraction kept, ``1 - w / T``. The new length ends at the last valid step of either part.
    """
    t = x.shape[-1]
    u = _uniform((3,), gen, x.device)
    lam_mix, lam_cut = beta_pair(alphas, gen, x.device)
    apply, cut = u[0] < prob, (u[1] < switch) & (u[0] < prob)
    w = torch.where(cut, torch.floor((1.0 - lam_cut) * t), torch.zeros_like(lam_cut)).long()
    s = torch.floor(u[2] * (t - w + 1)).long().clamp_max(t - w)
    steps = torch.arange(t, device=x.device)
    inside = ((steps >= s) & (steps < s + w)).to(x.dtype)
    lam = torch.where(apply, torch.where(cut, 1.0 - w / t, lam_mix), torch.ones_like(lam_mix))
    weight = torch.where(cut, 1.0 - inside, lam.expand(t))
    partner = x.flip(0)
    out = torch.lerp(partner, x, weight)
    other = length.flip(0)
    pasted_end = torch.minimum(other, s + w)
    cut_len = torch.where(pasted_end > s, torch.maximum(length, pasted_end), length)
    mixed_len = torch.where(apply, torch.maximum(length, other), length)
    new_len = torch.where(cut, cut_len, mixed_len)
    return out, new_len, torch.lerp(targets.flip(0), targets, lam.to(targets.dtype))

"""Translate a :mod:`loaders.augment` policy into the DALI loaders' :class:`DaliAugment`.

So one policy object configures ``StoreLoader`` and the DALI loaders alike::

    policy = TrainAugment(size=224, jitter=ColorJitter(0.4, 0.4, 0.4))
    StoreLoader(store, 256, augment=policy)
    DaliStoreLoader(store, 256, augment=policy)   # translated by from_policy

Both loaders draw from the one crop sampler (:mod:`precompute.cropsampler`) keyed by
:func:`loaders.batching.order.batch_seed` of the batch's (seed, epoch, rank, batch), so the same
policy gives the same crop boxes, flips and jitter factors for the same batch. Only the pixel
kernels
are DALI's own, so pixels differ in two known ways: DALI antialiases when it downscales (the
torch path does not), and ``fn.brightness_contrast`` pivots contrast on mid-grey (128) where the
torch path pivots on each image's mean grey.
"""

from __future__ import annotations

from typing import Any

from loaders.augment.errors import AugmentError
from loaders.dali.params import DaliAugment

__all__ = ["as_dali_augment", "from_policy"]


def _square(size: Any) -> int:
    h, w = (size, size) if isinstance(size, int) else size
    if h != w:
        raise AugmentError(f"the DALI loaders produce square outputs; got size {size!r}")
    return int(h)


def _common(policy: Any) -> dict[str, Any]:
    norm = policy.normalize
    return {
        "size": _square(policy.size),
        "mean": tuple(norm.mean) if norm is not None else (0.0, 0.0, 0.0),
        "std": tuple(norm.std) if norm is not None else (1.0, 1.0, 1.0),
        "dtype": policy.dtype,
        "channels_last": bool(policy.channels_last),
    }


def from_policy(policy: Any) -> DaliAugment:
    """Return the :class:`DaliAugment` equivalent to a ``TrainAugment`` or ``EvalAugment``.

    Raises:
        AugmentError: A non-square size.
        TypeError: Not a ``loaders.augment`` policy.
    """
    kind = getattr(policy, "kind", None)
    if kind == "train":
        jitter = policy.jitter
        return DaliAugment(
            **_common(policy),
            scale=tuple(policy.crop.scale),
            ratio=tuple(policy.crop.ratio),
            attempts=policy.crop.attempts,
            flip=policy.flip.p if policy.flip else 0.0,
            brightness=jitter.brightness if jitter else 0.0,
            contrast=jitter.contrast if jitter else 0.0,
            saturation=jitter.saturation if jitter else 0.0,
        )
    if kind == "eval":
        return DaliAugment(**_common(policy), scale=None, center=policy.crop.fraction, flip=0.0)
    raise TypeError(
        f"expected a DaliAugment, TrainAugment or EvalAugment, got {type(policy).__name__}"
    )


def as_dali_augment(augment: Any) -> DaliAugment:
    """Return ``augment`` as a :class:`DaliAugment` (None: the raw policy)."""
    if augment is None:
        return DaliAugment.identity()
    if isinstance(augment, DaliAugment):
        return augment
    return from_policy(augment)

"""Mixup and cutmix on a batch, with soft targets and label smoothing.

One call draws, from the caller's generator and on the batch's device: whether to mix at all
(``prob``), mixup or cutmix (``switch_prob``), the box centre, and one Beta(alpha, alpha)
candidate for each method (a fixed draw sequence, so no choice needs the host). The chosen
lambda is used for both images and targets; for cutmix it is corrected
to the box area actually pasted. Sample ``i`` is mixed with sample ``B - 1 - i`` (the batch
flipped), as timm does. Every decision stays a tensor, so there is no host sync and the same
kernels run for every batch size: images are blended with one per-pixel weight map that is
the constant lambda (mixup), the box mask (cutmix) or one (no mixing).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from loaders.augment.checks import check_integer, check_labels, check_number
from loaders.augment.draws import MixParams, beta_pair, smooth_targets
from loaders.augment.errors import AugmentError, refuse_unknown
from loaders.augment.fields import moved_companions
from precompute.errors import SpecError
from precompute.fields import FieldSpec
from precompute.kinds.hooks import (
    MIX_RULES,
    REFUSE,
    MixDraw,
    MixRule,
    mix_rule,
    register_mix_rule,
)

__all__ = [
    "MixParams",
    "Mixup",
    "beta_pair",
    "check_mixable",
    "draw_of",
    "mix_by_draw",
    "mix_fields",
    "smooth_targets",
    "targets",
]


@dataclass(frozen=True)
class Mixup:
    """Mixup / cutmix policy (as data) and its batched application.

    Attributes:
        num_classes: Number of classes C of the soft targets.
        mixup_alpha: Beta concentration of mixup's lambda; 0 disables mixup.
        cutmix_alpha: Beta concentration of cutmix's lambda; 0 disables cutmix.
        prob: Probability that a batch is mixed at all.
        switch_prob: Probability of cutmix rather than mixup when both are enabled.
        label_smoothing: Smoothing of the one-hot targets before mixing.
    """

    num_classes: int
    mixup_alpha: float = 0.8
    cutmix_alpha: float = 1.0
    prob: float = 1.0
    switch_prob: float = 0.5
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        check_integer("mixup.num_classes", self.num_classes, 1, 1 << 24)
        for name, hi in (
            ("mixup_alpha", 100.0),
            ("cutmix_alpha", 100.0),
            ("prob", 1.0),
            ("switch_prob", 1.0),
            ("label_smoothing", 1.0),
        ):
            check_number(f"mixup.{name}", getattr(self, name), 0.0, hi)
        if self.mixup_alpha == 0 and self.cutmix_alpha == 0:
            raise AugmentError("mixup: mixup_alpha and cutmix_alpha are both 0; drop Mixup")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Mixup:
        """Parse a dict made by :meth:`to_dict` (unknown keys raise)."""
        refuse_unknown(cls, data, "mixup")
        return cls(**data)

    def _switch_prob(self) -> float:
        if self.mixup_alpha == 0:
            return 1.0
        return 0.0 if self.cutmix_alpha == 0 else self.switch_prob

    def params(
        self, height: int, width: int, generator: torch.Generator, device: torch.device
    ) -> MixParams:
        """Draw one batch's decision: two uniforms, two Beta draws, a box centre."""
        u = torch.rand(4, generator=generator, device=device)
        lam_mix, lam_cut = beta_pair((self.mixup_alpha, self.cutmix_alpha), generator, device)
        apply, cutmix = u[0] < self.prob, u[1] < self._switch_prob()
        cut = torch.sqrt(1.0 - lam_cut)
        half_h = torch.floor(height * cut).div(2, rounding_mode="floor")
        half_w = torch.floor(width * cut).div(2, rounding_mode="floor")
        cy, cx = torch.floor(u[2] * height), torch.floor(u[3] * width)
        box = torch.stack(
            [
                (cy - half_h).clamp(0, height),
                (cy + half_h).clamp(0, height),
                (cx - half_w).clamp(0, width),
                (cx + half_w).clamp(0, width),
            ]
        )
        box = torch.where(apply & cutmix, box, torch.zeros_like(box)).long()
        area = ((box[1] - box[0]) * (box[3] - box[2])).to(torch.float32)
        lam_box = 1.0 - area / (height * width)
        lam = torch.where(apply, torch.where(cutmix, lam_box, lam_mix), torch.ones_like(lam_mix))
        return MixParams(apply, cutmix & apply, lam, box)

    def _weights(self, p: MixParams, height: int, width: int, dtype: torch.dtype) -> torch.Tensor:
        """Per-pixel weight of the sample's own image: ``[H, W]`` in ``dtype``."""
        rows = torch.arange(height, device=p.box.device)
        cols = torch.arange(width, device=p.box.device)
        inside = ((rows >= p.box[0]) & (rows < p.box[1]))[:, None] & (
            (cols >= p.box[2]) & (cols < p.box[3])
        )[None, :]
        return torch.where(p.cutmix, (~inside).to(dtype), p.lam.to(dtype))

    def check(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """Check shapes and dtypes; label values too when they are on the host (no sync)."""
        if images.dim() != 4 or not images.is_floating_point():
            raise AugmentError(
                f"mixup needs [B, C, H, W] float images, got {tuple(images.shape)} {images.dtype}"
            )
        if labels.dtype != torch.int64 or tuple(labels.shape) != (images.shape[0],):
            raise AugmentError(
                f"mixup needs [{images.shape[0]}] int64 labels, got "
                f"{tuple(labels.shape)} {labels.dtype}"
            )
        check_labels(labels, self.num_classes, "mixup")

    def apply(
        self, images: torch.Tensor, labels: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The device work of :meth:`__call__`, without input checks."""
        height, width = images.shape[2], images.shape[3]
        p = self.params(height, width, generator, images.device)
        weight = self._weights(p, height, width, images.dtype)
        mixed = torch.lerp(images.flip(0), images, weight)
        # mixup's weight is rounded to the image dtype: the targets use that very value
        lam = torch.where(p.cutmix, p.lam, p.lam.to(images.dtype).to(torch.float32))
        onehot = smooth_targets(labels, self.num_classes, self.label_smoothing)
        return mixed, torch.lerp(onehot.flip(0), onehot, lam)

    def apply_fields(
        self,
        values: Mapping[str, torch.Tensor],
        fields: Sequence[FieldSpec],
        generator: torch.Generator,
    ) -> dict[str, torch.Tensor]:
        """Mix a batch of a v2 store's fields (see :func:`mix_fields`)."""
        return mix_fields(self, values, fields, generator)

    def check_fields(self, fields: Sequence[FieldSpec]) -> None:
        """Refuse, before the first batch, fields this policy would mix against their kind."""
        check_mixable(self, fields)

    def __call__(
        self, images: torch.Tensor, labels: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mix a batch: ``images`` ``[B, C, H, W]`` float, ``labels`` ``[B]`` int64.

        Returns:
            The mixed images (same dtype and memory format) and ``[B, num_classes]`` float32
            soft targets whose rows sum to 1.
        """
        self.check(images, labels)
        return self.apply(images, labels, generator)


def check_mixable(mix: Mixup, fields: Sequence[FieldSpec]) -> None:
    """Refuse a policy that could blend (mixup) or paste (CutMix) a field whose kind refuses it.

    A class-index field (``label``) with ``classes`` must have ``mix.num_classes`` of them.

    Raises:
        AugmentError: Naming the field, its kind and what to do.
    """
    for f in fields:
        _rules(f)  # a rule no module registered: refused before the first batch
        rules = (f.spec.mixup, f.spec.cutmix)
        if rules == (REFUSE, REFUSE):
            raise AugmentError(
                f"field {f.name!r} (kind {f.kind}) can be neither blended (mixup) nor pasted "
                "(CutMix): leave mixup out for this store"
            )
        if mix.mixup_alpha > 0 and rules[0] == REFUSE:
            raise AugmentError(
                f"mixup would blend field {f.name!r} (kind {f.kind}), whose values cannot be "
                "blended: use Mixup(mixup_alpha=0) for CutMix only"
            )
        if mix.cutmix_alpha > 0 and rules[1] == REFUSE:
            raise AugmentError(
                f"CutMix would paste into field {f.name!r} (kind {f.kind}), which cannot be "
                "pasted: use Mixup(cutmix_alpha=0) for mixup only"
            )
        classes = f.options.get("classes")
        if f.storage(1).shape == () and classes is not None and classes != mix.num_classes:
            raise AugmentError(
                f"field {f.name!r} has {classes} classes; Mixup(num_classes="
                f"{mix.num_classes}) would give targets of another width: use "
                f"Mixup({classes}, ...)"
            )


def _frame(values: Mapping[str, torch.Tensor], fields: Sequence[FieldSpec]) -> torch.Tensor:
    """The first image field: ``[B, C, H, W]`` float (mixing comes after augmentation)."""
    images = [values[f.name] for f in fields if f.spec.photometric]
    if not images:
        raise AugmentError("mixing needs an image field; the store has none")
    x = images[0]
    if x.dim() != 4 or not x.is_floating_point():
        raise AugmentError(
            f"mixing needs [B, C, H, W] float images (augment first), got "
            f"{tuple(x.shape)} {x.dtype}"
        )
    return x


def _rules(field: FieldSpec) -> tuple[MixRule | None, MixRule | None]:
    """The field's ``(mixup, cutmix)`` functions (None: refused).

    Raises:
        AugmentError: A rule its kind names that no module registered.
    """
    try:
        return mix_rule("mixup", field.spec.mixup), mix_rule("cutmix", field.spec.cutmix)
    except SpecError as exc:
        raise AugmentError(f"field {field.name!r} (kind {field.kind}): {exc}") from None


def draw_of(mix: Mixup, p: MixParams, frame: torch.Tensor) -> MixDraw:
    """The :class:`~precompute.kinds.hooks.MixDraw` the mix rules get for draw ``p``."""
    height, width = frame.shape[2], frame.shape[3]
    lam = torch.where(p.cutmix, p.lam, p.lam.to(frame.dtype).to(torch.float32))
    return MixDraw(
        cutmix=p.cutmix,
        lam=lam,
        box=p.box,
        height=height,
        width=width,
        num_classes=mix.num_classes,
        label_smoothing=mix.label_smoothing,
        weights=functools.partial(mix._weights, p, height, width),
    )


def mix_fields(
    mix: Mixup,
    values: Mapping[str, torch.Tensor],
    fields: Sequence[FieldSpec],
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """Mix a batch of fields with one draw of ``mix`` (sample ``i`` with ``B - 1 - i``).

    Each field is mixed by its kind's rules (``Kind.mixup``, ``Kind.cutmix``: functions of
    :data:`precompute.kinds.hooks.MIX_RULES`) with the batch's one
    :class:`~precompute.kinds.hooks.MixDraw`: by the one function when the two rules are the
    same function or one is refused (a refused method is never drawn:
    :func:`check_mixable`), else by both, the drawn method's result kept per batch.

    Returns:
        ``values`` with image fields blended or pasted, masks pasted (the same box), and
        each label field replaced by ``[B, classes]`` float32 soft targets (a ``label``
        field: one-hot over ``mix.num_classes`` with label smoothing; a multi-hot field:
        its vector); other entries as given.
    """
    check_mixable(mix, fields)
    frame = _frame(values, fields)
    draw = draw_of(mix, mix.params(frame.shape[2], frame.shape[3], generator, frame.device), frame)
    out = dict(values)
    for f in fields:
        blend, paste = _rules(f)
        x = values[f.name]
        if blend is None or paste is None or blend is paste:
            rule = paste or blend
            if rule is not None:
                out[f.name] = rule(x, f, draw)
        else:
            out[f.name] = torch.where(draw.cutmix, paste(x, f, draw), blend(x, f, draw))
    return moved_companions(out, fields)


def mix_by_draw(x: torch.Tensor, field: FieldSpec, draw: MixDraw) -> torch.Tensor:
    """The built-in rules ``blend``, ``paste`` and ``area``: one computation over the draw.

    A spatial float field (images) is ``lerp(partner, own, weights)``: mixup blends by
    lambda, CutMix pastes the box (weights 0 or 1, exact); a spatial integer field (masks)
    takes its own value where the weight is above 1/2 (CutMix's box; never blended: the kind
    refuses mixup); any other field is a target (:func:`targets`) mixed by ``draw.lam``.
    """
    if field.spatial and x.is_floating_point():
        return torch.lerp(x.flip(0), x, draw.weights(x.dtype))
    if field.spatial:
        return torch.where(draw.weights(torch.float32) > 0.5, x, x.flip(0))
    target = targets(field, x, draw)
    return torch.lerp(target.flip(0), target, draw.lam)


def targets(field: FieldSpec, x: torch.Tensor, draw: MixDraw) -> torch.Tensor:
    """Soft targets of a label field: one-hot (smoothed) for class ids, else the vector."""
    if x.dim() != 1:
        return x.to(torch.float32)
    if x.dtype != torch.int64:
        raise AugmentError(f"field {field.name!r}: mixing needs int64 labels, got {x.dtype}")
    check_labels(x, draw.num_classes, f"field {field.name!r}")
    return smooth_targets(x, draw.num_classes, draw.label_smoothing)


# The built-in mix rules (Kind.mixup, Kind.cutmix) into the kinds layer's table
for _method, _name in (("mixup", "blend"), ("cutmix", "paste"), ("cutmix", "area")):
    if _name not in MIX_RULES[_method]:
        register_mix_rule(_method, _name, mix_by_draw)

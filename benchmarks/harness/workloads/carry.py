"""Every field of the source followed: the workload's own, the labels it carries, none dropped.

A workload serves the fields of its kinds (image + keypoints, image + mask, ...). A source may
have more: a landmarks manifest with a ``label`` column (the view), masks with a per-image
class. :func:`split_fields` sorts a source's fields for a workload into

* its own: the first field of each of its kinds, and those it reads for its own work (a
  scene's ``position``);
* carried: the other fields whose kind holds one class index per sample (``label``): untouched
  by geometry, so every strategy serves them beside the targets, ``(targets, label, ...)``,
  as they are in the source and the store, and the ``model`` consumer trains a head for each;
* left out: the rest (a second spatial field no workload moves with the first), which the
  report names loudly, in the workload line and every strategy's line.

:func:`choose <benchmarks.harness.workloads.choose>` picks the workload that follows the most
fields (own and carried), so a landmarks manifest with a label is landmarks that carries the
label, never image classification that drops the points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["LabelHeads", "carried_loss", "label_classes", "split_fields", "with_labels"]

POOLED = 64  # input values each label head sees (the input averaged down to them)


def split_fields(
    kinds: Sequence[str], reads: Sequence[str], fields: Sequence[Any]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(own, carried, left out)`` field names of ``fields`` for a workload of ``kinds``."""
    own: list[str] = []
    for kind in kinds:
        first = next((f.name for f in fields if f.kind == kind), None)
        if first is not None:
            own.append(first)
    own += [f.name for f in fields if f.kind in reads and f.name not in own]
    rest = [f for f in fields if f.name not in own]
    carried = tuple(f.name for f in rest if f.spec.class_index)
    left = tuple(f.name for f in rest if f.name not in carried)
    return tuple(own), carried, left


def label_classes(plan: Any, name: str) -> int:
    """Classes of the label field ``name``: its option, else its largest value + 1."""
    field = plan.field_spec(name)
    classes = field.options.get("classes")
    if classes:
        return int(classes)
    top = max((int(item.value(name)) for item in plan.source.items), default=0)
    return max(1, top + 1)


def with_labels(
    transform: Callable[[Mapping[str, Any], np.random.Generator], tuple[Any, Any]],
    names: Sequence[str],
) -> Callable[[Mapping[str, Any], np.random.Generator], tuple[Any, Any]]:
    """``transform`` whose targets also carry the class index of each of ``names``."""

    def carrying(values: Mapping[str, Any], rng: np.random.Generator) -> tuple[Any, Any]:
        x, y = transform(values, rng)
        labels = tuple(torch.tensor(int(values[n]), dtype=torch.int64) for n in names)
        return x, (y, *labels)

    return carrying


class LabelHeads(nn.Module):
    """A workload's network plus one linear head per carried label, on the pooled input.

    Returns ``(net(x), logits of label 1, ...)``: the heads see the input averaged down to
    :data:`POOLED` values, whatever its shape (an image, a log-mel, a waveform).
    """

    def __init__(self, net: nn.Module, classes: Sequence[int]) -> None:
        super().__init__()
        self.net = net
        self.heads = nn.ModuleList(nn.Linear(POOLED, int(c)) for c in classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The network's output and each head's logits."""
        pooled = nn.functional.adaptive_avg_pool1d(x.flatten(1).unsqueeze(1), POOLED)[:, 0]
        return (self.net(x), *(head(pooled) for head in self.heads))


def carried_loss(
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Callable[[Any, Any], torch.Tensor]:
    """The workload's ``loss`` on the first output plus cross-entropy on each carried label."""

    def total(out: Sequence[torch.Tensor], targets: Sequence[torch.Tensor]) -> torch.Tensor:
        value = loss(out[0], targets[0])
        for logits, label in zip(out[1:], targets[1:], strict=True):
            value = value + nn.functional.cross_entropy(logits.float(), label.long())
        return value

    return total

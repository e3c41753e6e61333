"""What a benchmark run trains on, per kind of data: one workload module per task.

A :class:`Workload` is chosen by the kinds of the fields ``precompute build`` finds in the
source (:func:`choose`): each module declares the kinds it needs (``kinds``) and the registry
picks the workload that needs the most of them, so nothing generic names a kind. A workload
says, for its task, what every strategy must do per sample (the classic per-item transform of
the ``workers`` strategy, the augmentation the store loaders apply, how a store batch becomes
``(inputs, targets)``), the consumer's model, and the raw-file pipelines (DALI, ``tf.data``)
it has, or why it has none (:class:`~benchmarks.errors.NotApplicable`).

| module | task | kinds |
| --- | --- | --- |
| ``classify.py`` | image classification | image + label |
| ``segment.py`` | segmentation | image + mask |
| ``landmarks.py`` | landmarks | image + keypoints |
| ``detect.py`` | detection | image + boxes |
| ``audio.py`` | audio classification | audio + label |
| ``spectral.py`` | spectral patches | array + label |

A source's fields beyond the workload's kinds are followed too (:mod:`.carry`): class labels
are carried beside the targets by every strategy, anything else is named as left out.

``items.py`` decodes a source item with the kinds' own decoders (what the build decodes);
``crops.py`` is the classic per-sample geometry (crop, resize, flip) of pixels, masks, points
and boxes; ``pixels.py`` the image workloads' base (the input's stored channels and bit depth);
``nets.py`` holds the consumers' small models.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from benchmarks.errors import BenchConfigError, NotApplicable
from benchmarks.harness.workloads.carry import (
    LabelHeads,
    carried_loss,
    label_classes,
    split_fields,
    with_labels,
)
from precompute.checks import size_hw

if TYPE_CHECKING:
    import torch

    from benchmarks.harness.sources import SourcePlan

__all__ = [
    "WORKLOADS",
    "Batch",
    "Transform",
    "Workload",
    "choose",
    "register_workload",
]

Batch = tuple["torch.Tensor", "torch.Tensor"]
# a classic per-item transform: (decoded values by field name, numpy Generator) -> (x, y)
Transform = Callable[[Mapping[str, Any], Any], tuple[Any, Any]]


class Workload(ABC):
    """One task on one kind of data, as every strategy of a run serves it.

    Attributes:
        name: Registry name (shown in reports).
        kinds: The kinds of field a source must have (the first is the input's).
        task: One line for the report (what is trained, on what).
        classic_text: What the ``workers`` strategy does per item, for the report.
        engines: The raw-file strategies it has a pipeline for (``gpu-decode``, ...).
        reads: Kinds of fields it reads for its own work and does not serve (a scene's
            ``position``).
        plan: The listed source and its resolved build spec.
        own: Its fields: the first of each of its kinds, and those it reads.
        carried: The source's other class-label fields, served beside the targets.
        left_out: The source's fields it neither serves nor carries (named in the report).
    """

    name: ClassVar[str]
    kinds: ClassVar[tuple[str, ...]]
    task: ClassVar[str] = ""
    classic_text: ClassVar[str] = ""
    engines: ClassVar[tuple[str, ...]] = ()  # the raw-file strategies it has a pipeline for
    mixes: ClassVar[str | None] = None  # why it cannot take --mixup; None: it can
    reads: ClassVar[tuple[str, ...]] = ()  # kinds it reads for its own work, never serves

    def __init__(self, plan: SourcePlan, mixup: float = 0.0) -> None:
        self.plan, self.mixup = plan, mixup
        self.own, self.carried, self.left_out = split_fields(self.kinds, self.reads, plan.fields)
        if mixup and self.mixes is not None:
            raise BenchConfigError(f"--mixup {mixup:g}: {self.task}: {self.mixes}")
        if mixup and self.carried:
            raise BenchConfigError(
                f"--mixup {mixup:g}: {self.task}: mixup blends one class label per sample, and "
                f"this source has more: {', '.join(self.carried)} besides {self.target}"
            )

    @classmethod
    def follows(cls, plan: SourcePlan) -> int:
        """How many of ``plan``'s fields it serves, reads or carries (0: it lacks a kind)."""
        have = {f.kind for f in plan.fields}
        if not set(cls.kinds) <= have:
            return 0
        own, carried, _ = split_fields(cls.kinds, cls.reads, plan.fields)
        return len(own) + len(carried)

    def field(self, kind: str) -> str:
        """The name of the source's (first) field of ``kind``."""
        for f in self.plan.fields:
            if f.kind == kind:
                return str(f.name)
        raise BenchConfigError(f"{self.plan.data}: no field of kind {kind!r} ({self.name})")

    @property
    def input(self) -> str:
        """The batch key of the model input (the field of the first kind)."""
        return self.field(self.kinds[0])

    @property
    def target(self) -> str:
        """The batch key of the targets (the field of the last kind)."""
        return self.field(self.kinds[-1])

    @property
    def size(self) -> int | str:
        """The stored and output frame: the build spec's ``size``, a side or ``"WxH"`` text."""
        return self.plan.spec.size  # type: ignore[no-any-return]

    @property
    def hw(self) -> tuple[int, int]:
        """``(height, width)`` of the stored and output frame (:attr:`size`)."""
        return size_hw(self.size)

    @property
    def stored(self) -> str:
        """What one stored sample of the input is, for the reports (default: ``W x H px``)."""
        h, w = self.hw
        return f"{self.input} {w} x {h} px"

    @property
    @abstractmethod
    def store_text(self) -> str:
        """What the store loaders' augmentation does, for the report."""

    @abstractmethod
    def classic(self, seed: int) -> Transform:
        """The ``workers`` strategy's per-item transform (decoded values -> ``(x, y)``)."""

    @abstractmethod
    def store_augment(self, threads: int) -> Any:
        """The augmentation the store loaders apply (``StoreLoader(augment=...)``)."""

    def store_options(self, store: str) -> dict[str, Any]:
        """More ``StoreLoader`` options the docs advise for this kind (default: none)."""
        return {}

    def store_mixup(self) -> dict[str, Any]:
        """The store loaders' ``mixup=`` of ``--mixup`` (default: none)."""
        return {}

    @property
    def store_target(self) -> str:
        """The store batches' key of the targets (``target`` where the loader mixes)."""
        return self.target

    def from_store(self, batch: Mapping[str, Any]) -> Batch:
        """``(inputs, targets)`` of a store loader's batch dict (with the carried labels)."""
        y = batch[self.store_target]
        if self.carried:
            y = (y, *(batch[name] for name in self.carried))
        return batch[self.input], y

    def item_transform(self, seed: int) -> Transform:
        """:meth:`classic`, its targets with the carried labels (what ``workers`` serves)."""
        transform = self.classic(seed)
        return with_labels(transform, self.carried) if self.carried else transform

    def consumer_model(
        self,
    ) -> tuple[torch.nn.Module, Callable[[Any, Any], Any]]:
        """:meth:`model`, with a head and a cross-entropy term for each carried label."""
        net, loss = self.model()
        if not self.carried:
            return net, loss
        classes = [label_classes(self.plan, name) for name in self.carried]
        return LabelHeads(net, classes), carried_loss(loss)

    @property
    def title(self) -> str:
        """:attr:`task`, and the labels it carries."""
        return self.task + (f", carrying {', '.join(self.carried)}" if self.carried else "")

    def batch_text(self) -> str:
        """:meth:`served`, and the carried labels."""
        labels = "".join(f", {name} int64 [B]" for name in self.carried)
        return self.served() + labels

    def left_out_names(self) -> str:
        """The fields no strategy serves, with their kinds (empty: every field is followed)."""
        kinds = {f.name: f.kind for f in self.plan.fields}
        return ", ".join(f"{n} ({kinds[n]})" for n in self.left_out)

    def left_out_text(self) -> str | None:
        """The fields no strategy serves, loudly (None: every field is followed)."""
        if not self.left_out:
            return None
        return (
            f"LEFT OUT: {self.left_out_names()}: no workload here serves it with {self.task}, "
            "so no strategy's batches hold it and none of its cost is measured"
        )

    def has_engine(self, name: str) -> bool:
        """Whether it has a raw-file pipeline ``name`` (``gpu-decode``, ...) for this source."""
        return name in self.engines

    def one_label(self, engine: str) -> None:
        """Refuse a raw-file pipeline that serves the target alone while labels are carried.

        Raises:
            NotApplicable: ``engine`` would leave the carried labels out.
        """
        if self.carried:
            raise NotApplicable(
                f"{engine} here serves {self.input} and {self.target} only; this source also "
                f"has {', '.join(self.carried)}, which every other strategy carries"
            )

    @abstractmethod
    def model(self) -> tuple[torch.nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """The ``model`` consumer's network and loss ``loss(output, targets)``."""

    @abstractmethod
    def served(self) -> str:
        """What one batch holds, for the report (shapes and value ranges)."""

    def gpu_decode(self, cfg: Any) -> Any:
        """The ``gpu-decode`` epoch source: the raw files decoded by DALI.

        Raises:
            NotApplicable: DALI has no decoder or graph for this task.
        """
        raise NotApplicable(f"no DALI decoding graph for {self.task}")

    def tf_native(self, cfg: Any) -> Any:
        """The ``tf-native`` epoch source: the raw files through ``tf.data`` ops.

        Raises:
            NotApplicable: TensorFlow has no native pipeline for this task.
        """
        raise NotApplicable(f"no native tf.data pipeline for {self.task}")

    def memmap(self, cfg: Any) -> Any:
        """The ``memmap`` epoch source: the samples read from a numpy memmap of the source.

        Raises:
            NotApplicable: The source's samples are not arrays a memmap can hold.
        """
        raise NotApplicable(
            f"{self.task}: the files are encoded (decoded per read), not arrays a numpy "
            "memmap can hold"
        )


WORKLOADS: dict[str, type[Workload]] = {}
BUILTIN = ("segment", "landmarks", "detect", "audio", "spectral", "classify")  # ties: first


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator: add a workload to :data:`WORKLOADS` under ``cls.name``."""
    if cls.name in WORKLOADS:
        raise ValueError(f"workload {cls.name!r} registered twice")
    WORKLOADS[cls.name] = cls
    return cls


def _load() -> None:
    for name in BUILTIN:
        importlib.import_module(f"benchmarks.harness.workloads.{name}")


def choose(plan: SourcePlan, mixup: float = 0.0) -> Workload:
    """The workload of ``plan``'s fields: the one that serves, reads or carries most of them.

    Raises:
        BenchConfigError: No workload takes these fields, naming them and the workloads, or
            it cannot mix (``mixup``) its targets.
    """
    _load()
    fits = [cls for cls in WORKLOADS.values() if cls.follows(plan)]
    if not fits:
        known = "; ".join(f"{c.name}: {' + '.join(c.kinds)}" for c in WORKLOADS.values())
        kinds = ", ".join(f"{f.name} ({f.kind})" for f in plan.fields)
        raise BenchConfigError(
            f"--data {plan.data}: no benchmark workload takes the fields {kinds} (known: {known})"
        )

    # the one that follows the most fields; then the most specific; then BUILTIN's order
    def rank(cls: type[Workload]) -> tuple[int, int, int]:
        module = cls.__module__.rsplit(".", 1)[-1]
        order = BUILTIN.index(module) if module in BUILTIN else len(BUILTIN)
        return cls.follows(plan), len(cls.kinds), -order

    best = max(fits, key=rank)
    return best(plan, mixup)

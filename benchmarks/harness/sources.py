"""The benchmark's view of the raw dataset: listed as ``precompute build`` lists it.

:func:`plan_source` takes a source and a build spec exactly as ``precompute build`` does
(:func:`precompute.sources.resolve.list_build_source`: class folders, manifests, segmentation
folders, COCO files, audio, array files, scenes, Parquet, WebDataset) and returns the listed
source with the spec its build would store, so every strategy reads the items the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.errors import BenchConfigError

__all__ = ["SourcePlan", "list_items", "num_classes", "plan_source"]


@dataclass(frozen=True)
class SourcePlan:
    """A listed source and the spec a build of it stores.

    Attributes:
        data: The source as given (``--data``).
        spec: The build spec, its fields resolved (empty for class folders: a v1 store).
        source: The listed items (``precompute.sources.fields.FieldSource``).
        fields: The fields of every item: the spec's, or the v1 profile's (image + label).
        given: The spec as given (what a build of the source takes), when known.
    """

    data: str
    spec: Any
    source: Any
    fields: tuple[Any, ...]
    given: Any = None

    def field_spec(self, name: str) -> Any:
        """The :class:`~precompute.fields.FieldSpec` of field ``name``."""
        return next(f for f in self.fields if f.name == name)

    def __len__(self) -> int:
        return len(self.source.items)


def plan_source(data: str, spec: Any = None) -> SourcePlan:
    """List ``data`` for ``spec`` (default: ``BuildSpec()``) as a build of it would.

    Raises:
        precompute.SpecError: The source needs an option the spec does not give (the mask's
            class count, an audio clip length), naming the flag that gives it.
        precompute.SourceError: The source is missing, empty or malformed.
    """
    from precompute.fields.spec import v1_fields
    from precompute.sources.resolve import list_build_source
    from precompute.spec import BuildSpec

    source, resolved = list_build_source(data, spec if spec is not None else BuildSpec())
    fields = resolved.fields or v1_fields(_v1_classes(source), resolved.fill)
    return SourcePlan(data, resolved, source, tuple(fields), spec)


def _v1_classes(source: Any) -> int | None:
    names = dict(source.classes).get("label", ())
    labels = [int(item.value("label")) for item in source.items]
    return len(names) or (max(labels) + 1 if labels else None)


def num_classes(data: str | SourcePlan) -> int:
    """The number of classes of the source's label field (1 when it has none)."""
    plan = data if isinstance(data, SourcePlan) else plan_source(data)
    for f in plan.fields:
        if f.spec.class_index:  # one class index per sample: its class count
            classes = f.options.get("classes")
            if classes:
                return int(classes)
            return max(1, 1 + max((int(i.value(f.name)) for i in plan.source.items), default=0))
    return 1


def list_items(data: str) -> tuple[list[Path], list[int]]:
    """The local file paths and labels of class folders or a ``path,label`` manifest.

    Raises:
        BenchConfigError: ``data`` is not a local dataset.
        precompute.SourceError: ``data`` is missing, empty or malformed.
    """
    from precompute.sources.classes import list_source  # lazy: keeps `import benchmarks` light

    source = list_source(data)
    if not source.is_local:
        raise BenchConfigError(f"--data {data!r}: the benchmarks read local datasets only")
    paths = [Path(source.locate(key)) for key, _ in source.items]
    return paths, [label for _, label in source.items]

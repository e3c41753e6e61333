"""What a build checks without writing a store: every bad input, and a class list that shifts.

**``precompute check SRC``**: every bad input of a source at once.

A build under ``--on-error raise`` stops at the first bad input, so finding them all took one
build per bad file. A check runs the build's own steps and stops short of the store:

1. the source is listed as the build lists it (:func:`precompute.sources.resolve.resolve_build`,
   the same options) under ``on_error: skip``, so every entry the listing leaves out is
   recorded (a symlink out of the source, a loop, a manifest line with a bad label) instead of
   the first one raised;
2. every listed sample is read, decoded, checked and placed by the build's shard tasks
   (:func:`precompute.pipeline.shardwork.build_shard` with ``ShardJob.check``: the same
   decoders, the kinds' checks and the reasons a build records), which write nothing.

:class:`CheckReport` lists every bad input with the reason the build would give it, and the
notes the build's summary would print about the inputs it keeps (:mod:`precompute.notes`:
16-bit grey of 12-bit values, clips padded, clipped or cut short, one class only): not bad
inputs, but what a user checking the data first wants to know.
:func:`precompute.job.check` runs the tasks where a build would (Ray, or in process).
A source the build refuses as a whole (no such folder, a duplicate manifest path, a spec
option missing) raises the build's own error.

**A class list that would shift labels.** Without a fixed class list (``--classes``), a
manifest's classes are the names its lines give, sorted: a validation manifest that lacks one
class builds one class fewer, and every later name gets another index than in the training
store (``chirp`` 1 there, ``frog`` 1 here), silently. Before its shards run, a build whose
classes it learned from the source compares them with those of the complete stores at
``--out`` and beside it that were built from the same source root (the folder of the
manifests, or the class folder itself) or a sibling of it (``data/train/<class>/...`` and
``data/val/<class>/...``: :func:`kinship`), where the two class lists plausibly name the same
labels (one holds the other, or they share most names: :func:`alike`; an unrelated dataset
in the same folder is not compared), and warns (:func:`warn_class_shifts`:
:class:`~precompute.errors.ClassListWarning`) naming the store, a name whose index differs,
and ``--classes-from`` to fix it. The cache compares a store it built with the stores it
holds for the same or a sibling source root (``service``). Reading the stores beside
``--out`` is best effort: one that cannot be read is not compared.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from precompute.errors import ClassListWarning, PrecomputeError
from precompute.fields import FieldSpec
from precompute.format.layout import StoreLayout
from precompute.notes import fold, report_notes, summary_lines
from precompute.pipeline.fieldwork import backends_of
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.shardwork import ShardJob
from precompute.sources.classes import MANIFEST_EXTENSIONS
from precompute.sources.fields import FieldSource
from precompute.sources.resolve import plan_tasks
from precompute.spec import BuildSpec
from precompute.storage.location import Location, is_url

log = logging.getLogger("precompute.pipeline.check")

__all__ = [
    "CheckReport",
    "alike",
    "check_report",
    "check_tasks",
    "class_shift",
    "classes_of",
    "kinship",
    "lenient",
    "source_root",
    "warn_class_shifts",
]


@dataclass(frozen=True)
class CheckReport:
    """What a check found: every input a build of the same source and spec would not store.

    Attributes:
        source: The source as given.
        num_inputs: Inputs seen: the samples listed and the entries left out while listing.
        listing: ``(key, reason)`` of entries left out while listing (no slot in a store).
        samples: ``(key, reason)`` of listed samples that cannot be read, decoded or checked
            (a build under ``--on-error raise`` stops at the first; ``skip`` leaves holes),
            sorted by key.
        notes: What the build's report and summary would note of the inputs it keeps
            (:mod:`precompute.notes`: 12-bit grey, clips padded or clipped, files cut short,
            one class only), ``{name: {"count", "examples", "says"}}`` as a report's.
    """

    source: str
    num_inputs: int
    listing: tuple[tuple[str, str], ...] = ()
    samples: tuple[tuple[str, str], ...] = ()
    notes: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    @property
    def bad(self) -> tuple[tuple[str, str], ...]:
        """Every bad input, ``(key, reason)``, sorted by key."""
        return tuple(sorted(self.listing + self.samples))

    def lines(self) -> list[str]:
        """``BAD key: reason`` per bad input, ``note: ...`` per note, then one summary line."""
        bad = [f"BAD {key}: {reason}" for key, reason in self.bad]
        return bad + summary_lines(self.notes) + [self.summary()]

    def summary(self) -> str:
        """``checked SRC: N inputs, B bad (L left out while listing)[, K notes]``.

        ``..., all good`` where nothing is bad and nothing noted; ``..., none bad, 2 notes``
        where the inputs would build but something about them is worth knowing.
        """
        notes = len(self.notes)
        noted = f", {notes} note{'s' if notes > 1 else ''} (above)" if notes else ""
        if not self.bad:
            good = "none bad" if notes else "all good"
            return f"checked {self.source}: {self.num_inputs} inputs, {good}{noted}"
        listed = f" ({len(self.listing)} left out while listing)" if self.listing else ""
        return (
            f"checked {self.source}: {self.num_inputs} inputs, {len(self.bad)} bad{listed}{noted}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``bad`` as ``{key, reason}`` objects, ``notes`` as a report's)."""
        return {
            "source": self.source,
            "num_inputs": self.num_inputs,
            "bad": [{"key": k, "reason": r} for k, r in self.bad],
            "skipped_listing": len(self.listing),
            "notes": {name: dict(entry) for name, entry in self.notes.items()},
        }


def lenient(spec: BuildSpec) -> BuildSpec:
    """``spec`` under ``on_error: skip``: every bad input is recorded, none raised."""
    return dataclasses.replace(spec, on_error="skip")


def check_tasks(src: str, source: FieldSource, spec: BuildSpec) -> tuple[ShardJob, list[ShardTask]]:
    """The shard tasks of a check of ``source`` (listed for ``spec``): every shard, no output.

    ``spec`` is the resolved spec (its fields learned from the source), under ``skip``.
    """
    layout = StoreLayout.from_spec(spec, len(source.items))
    reader = dataclasses.replace(source, items=(), skipped=())
    job = ShardJob(f"check of {src}", layout, spec, reader, backends_of(spec.fields), check=True)
    return job, plan_tasks(source, layout, spec.seed, list(range(layout.num_shards)))


def check_report(
    src: str,
    source: FieldSource,
    results: Sequence[dict[str, Any]],
    fields: Sequence[FieldSpec] = (),
) -> CheckReport:
    """The report of a check: what the listing left out, each shard's bad samples, the notes.

    The notes are those the build's report would hold (:func:`precompute.notes.report_notes`):
    about the source as a whole (``fields``: the resolved spec's), and the shards' notes and
    inputs kept cut short.
    """
    from precompute.pipeline.outputs import source_notes

    samples = tuple(sorted((s["key"], s["reason"]) for r in results for s in r["skipped"]))
    truncated = sorted(k for r in results for k in r.get("truncated", ()))
    notes = {**source_notes(source, fields), **fold(r.get("notes", {}) for r in results)}
    return CheckReport(
        src,
        len(source.items) + len(source.skipped),
        tuple(source.skipped),
        tuple(samples),
        report_notes({"notes": notes, "truncated": truncated}),
    )


# -- class lists that shift labels ------------------------------------------------------------


# Sources that are one file: their root is the file's folder.
_FILES = (*MANIFEST_EXTENSIONS, ".json", ".parquet", ".tar", ".npy", ".npz", ".mat", ".tif")
_SIBLINGS = 64  # stores beside --out compared at most (a folder of many stores: the first)


def source_root(src: str) -> str:
    """The folder ``src``'s paths start from: a file's folder, a folder itself."""
    path = src.removeprefix("file://").rstrip("/")
    if is_url(path):
        return path.rsplit("/", 1)[0] if path.lower().endswith(_FILES) else path
    path = os.path.abspath(path)
    return path if os.path.isdir(path) else os.path.dirname(path)


def classes_of(report: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Class names by field of a build report (v1: ``label``); fields without names left out."""
    found = report.get("classes")
    by_field = found if isinstance(found, Mapping) else {"label": found or ()}
    return {str(f): tuple(map(str, n)) for f, n in by_field.items() if n}


def _parent(root: str) -> str:
    """The folder above a source root (a URL's too)."""
    return root.rsplit("/", 1)[0] if is_url(root) else os.path.dirname(root)


def kinship(src: str, other: str) -> str | None:
    """How the sources ``src`` and ``other`` may be splits of one dataset; None if not.

    ``the same folder``: one source root (two manifests of one folder, a class folder twice);
    ``a sibling folder``: roots in one parent folder (``data/train/<class>/...`` and
    ``data/val/<class>/...``, the usual layout of class-folder splits).
    """
    mine, theirs = source_root(src), source_root(other)
    if mine == theirs:
        return "the same folder"
    return "a sibling folder" if _parent(mine) == _parent(theirs) else None


def alike(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    """Whether two class lists plausibly name the same labels (one dataset's splits).

    One set holds the other (a split that lacks a class), or they share more than half of
    the names of both together (each split lacks another class). Unrelated datasets that
    happen to sit in one folder (3 sound events beside 6 keywords) share few or none.
    """
    a, b = set(mine), set(theirs)
    return a <= b or b <= a or 2 * len(a & b) > len(a | b)


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:5])}, ..."


def _how(mine: Sequence[str], theirs: Sequence[str]) -> str:
    """How the two lists index names differently (the first name that moves, or the count)."""
    at = {name: i for i, name in enumerate(theirs)}
    moved = next((n for i, n in enumerate(mine) if n in at and at[n] != i), None)
    if moved is not None:
        return f"{moved!r} is {mine.index(moved)} here and {at[moved]} there"
    lost = [n for n in theirs if n not in set(mine)]
    if lost:
        return f"{lost[0]!r} is not a class here"
    return f"{next(n for n in mine if n not in at)!r} is not a class there"


def class_shift(
    src: str,
    mine: Mapping[str, Sequence[str]],
    store: str,
    report: Mapping[str, Any],
    fix: str | None = None,
) -> str | None:
    """The warning for a build of ``src`` with classes ``mine`` beside ``store``; None if none.

    Only stores built from ``src``'s source root or a sibling of it are compared
    (:func:`kinship`), only fields both name, and only class lists that plausibly name the
    same labels (:func:`alike`). ``fix``: how to give both builds one class list (default: the
    command-line flags).
    """
    theirs_src = str(report.get("source", ""))
    kin = kinship(src, theirs_src) if theirs_src else None
    if kin is None:
        return None
    theirs = classes_of(report)
    for field, names in mine.items():
        other = theirs.get(field)
        if other is None or tuple(other) == tuple(names) or not alike(names, other):
            continue
        where = "" if field == "label" else f"{field} "
        return (
            f"{src} builds {where}{len(names)} classes ({_names(names)}) but {store}, built "
            f"from {kin} ({theirs_src}), has {len(other)} ({_names(other)}): "
            f"{_how(names, other)}, so one label means two classes; give both builds one list "
            f"({fix or f'--classes-from {store}, or --classes'})"
        )
    return None


def _stores(out: Location) -> Iterator[tuple[Location, Mapping[str, Any]]]:
    """``out`` and the stores beside it, each with its report (complete stores only)."""
    from precompute.pipeline.outputs import complete_attrs

    parent = out.parent
    try:
        names = [n for n in parent.store.list_dir(parent.key) if n != out.name][:_SIBLINGS]
    except OSError:
        names = []
    for where in (out, *(parent / n for n in names)):
        try:
            attrs = complete_attrs(where)
        except (PrecomputeError, OSError, ValueError):  # not a store, or unreadable: none
            continue
        if attrs is not None and isinstance(attrs.get("report"), Mapping):
            yield where, attrs["report"]


def _cached_stores(src: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The stores a cache holds for ``src``'s root or a sibling: ``nostall.cached_stores``.

    ``service`` registers its default cache (``precompute`` imports nothing of it).

    A finder that fails is left out with a debug line: the warning is advice, never a stop.
    """
    from importlib.metadata import entry_points

    found: list[tuple[str, Mapping[str, Any]]] = []
    for point in entry_points(group="nostall.cached_stores"):
        try:
            found += [(str(w), r) for w, r in point.load()(src)]
        except Exception as exc:  # a broken or missing plugin: no comparison, no stop
            log.debug("cached stores of %s (%s): %s", src, point.value, exc)
    return found


def warn_class_shifts(
    src: str, classes: Mapping[str, Sequence[str]], fixed: bool, out: Location
) -> list[str]:
    """Warn for each store whose classes a build of ``src`` would shift.

    The stores compared: ``out`` and those beside it, and those a cache holds for the same
    or a sibling source root (:func:`_cached_stores`: the default cache, ``$NOSTALL_CACHE``),
    each where :func:`class_shift` finds the lists related and shifted.

    ``classes``: the build's class names by field; ``fixed``: they come from the spec
    (``--classes``), which nothing is compared against. Returns the warnings given.
    """
    if fixed or not any(classes.values()):
        return []
    said = []
    beside = list(_stores(out))
    seen = {str(where) for where, _ in beside}
    cached = [(w, r) for w, r in _cached_stores(src) if w not in seen]
    for where, report in [*beside, *cached]:
        text = class_shift(src, classes, str(where), report)
        if text is not None:
            warnings.warn(text, ClassListWarning, stacklevel=2)
            said.append(text)
    return said

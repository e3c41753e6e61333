"""``precompute check SRC``: every bad input of a source at once, and no store written.

A build under ``--on-error raise`` stops at the first bad input, so finding them all took one
build per bad file. A check runs the build's own steps and stops short of the store:

1. the source is listed as the build lists it (:func:`precompute.sources.resolve.resolve_build`,
   the same options) under ``on_error: skip``, so every entry the listing leaves out is
   recorded (a symlink out of the source, a loop, a manifest line with a bad label) instead of
   the first one raised;
2. every listed sample is read, decoded, checked and placed by the build's shard tasks
   (:func:`precompute.pipeline.shardwork.build_shard` with ``ShardJob.check``: the same
   decoders, the kinds' checks and the reasons a build records), which write nothing.

:class:`CheckReport` lists every bad input with the reason the build would give it.
:func:`precompute.job.check` runs the tasks where a build would (Ray, or in process).
A source the build refuses as a whole (no such folder, a duplicate manifest path, a spec
option missing) raises the build's own error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from precompute.format.layout import StoreLayout
from precompute.pipeline.fieldwork import backends_of
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.shardwork import ShardJob
from precompute.sources.fields import FieldSource
from precompute.sources.resolve import plan_tasks
from precompute.spec import BuildSpec

__all__ = ["CheckReport", "check_report", "check_tasks", "lenient"]


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
    """

    source: str
    num_inputs: int
    listing: tuple[tuple[str, str], ...] = ()
    samples: tuple[tuple[str, str], ...] = ()

    @property
    def bad(self) -> tuple[tuple[str, str], ...]:
        """Every bad input, ``(key, reason)``, sorted by key."""
        return tuple(sorted(self.listing + self.samples))

    def lines(self) -> list[str]:
        """``BAD key: reason`` per bad input, then one summary line."""
        return [f"BAD {key}: {reason}" for key, reason in self.bad] + [self.summary()]

    def summary(self) -> str:
        """``checked SRC: N inputs, B bad (L left out while listing)``, or ``..., all good``."""
        if not self.bad:
            return f"checked {self.source}: {self.num_inputs} inputs, all good"
        listed = f" ({len(self.listing)} left out while listing)" if self.listing else ""
        return f"checked {self.source}: {self.num_inputs} inputs, {len(self.bad)} bad{listed}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``bad`` as ``{key, reason}`` objects, as a build report's)."""
        return {
            "source": self.source,
            "num_inputs": self.num_inputs,
            "bad": [{"key": k, "reason": r} for k, r in self.bad],
            "skipped_listing": len(self.listing),
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


def check_report(src: str, source: FieldSource, results: Sequence[dict[str, Any]]) -> CheckReport:
    """The report of a check: what the listing left out, and each shard's bad samples."""
    samples = tuple(sorted((s["key"], s["reason"]) for r in results for s in r["skipped"]))
    return CheckReport(
        src, len(source.items) + len(source.skipped), tuple(source.skipped), tuple(samples)
    )

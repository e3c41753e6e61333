"""Which runner builds a store: ``--runner auto`` (the default), ``ray`` or ``sequential``.

``auto`` builds on Ray where a Ray is named or running: ``--ray-address``, ``RAY_ADDRESS``, or a
Ray initialised in this process (the cache service keeps one). Otherwise it weighs the source's
work against starting a Ray: a few samples of the first shard are decoded here and timed
(:func:`~precompute.pipeline.fieldwork.time_samples`: CPU time, at most :data:`PROBE_SAMPLES`
and about :data:`PROBE_S`), and their median times the sample count, over the usable CPUs, is
the work's estimate. Below :func:`ray_start_seconds` the build runs in this process on those CPUs
(:mod:`precompute.pipeline.inprocess`), else on a Ray of its own (or a ``ray start`` one,
:mod:`precompute.runtime.raysession`). The choice and its reason are in the report
(``runner``) and the summary line.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass

from precompute.pipeline.fieldwork import time_samples
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.shardwork import ShardJob
from precompute.runtime.threads import one_thread_pools

__all__ = [
    "PROBE_S",
    "PROBE_SAMPLES",
    "RUNNERS",
    "Choice",
    "choose",
    "named_ray",
    "ray_start_seconds",
]

RUNNERS = ("auto", "ray", "sequential")
PROBE_SAMPLES = 5  # the median of 5 leaves out a first sample's lazy imports (torch)
PROBE_S = 0.5
# Starting a local Ray runs about a dozen Python processes importing Ray (docs/scale.md, "A
# local build's fixed cost"): about 10 s of CPU, 5-9 s of wall time on 2 cores, and not less
# than about 2.5 s however many cores share it.
RAY_START_CPU_S = 10.0
RAY_START_MIN_S = 2.5


@dataclass(frozen=True)
class Choice:
    """A runner and why: ``ray``, ``in process`` (auto's) or ``sequential`` (asked for).

    Attributes:
        runner: ``ray``, ``in process`` or ``sequential``.
        why: The reason, as the summary line says it.
        cpus: The CPUs the in-process runner gives its tasks (1 for ``sequential``).
    """

    runner: str
    why: str
    cpus: int = 1

    def to_dict(self) -> dict[str, object]:
        """The report's ``runner``."""
        return {"name": self.runner, "why": self.why}


def ray_start_seconds(cpus: int) -> float:
    """About how long starting a local Ray takes on ``cpus`` CPUs (its processes' CPU time)."""
    return max(RAY_START_MIN_S, RAY_START_CPU_S / max(cpus, 1))


def named_ray(address: str | None) -> str | None:
    """What names a Ray for this build (this process's Ray, an option, a variable), or None.

    In the order :func:`precompute.runtime.raysession.open_ray` takes them.
    """
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return "a Ray initialised in this process"
    if address is not None:
        return f"--ray-address {address}"
    if os.environ.get("RAY_ADDRESS"):
        return f"RAY_ADDRESS={os.environ['RAY_ADDRESS']}"
    return None


def choose(job: ShardJob, tasks: list[ShardTask], samples: int, cpus: int) -> Choice:
    """``auto``'s choice for ``tasks`` (``samples`` in all) on ``cpus`` usable CPUs, no Ray named.

    Decodes up to :data:`PROBE_SAMPLES` samples of the first task here to time them.
    """
    start = ray_start_seconds(cpus)
    if not tasks:
        return Choice("in process", "nothing left to build", cpus)
    with one_thread_pools():
        took = time_samples(job, tasks[0], PROBE_SAMPLES, PROBE_S)
    work = statistics.median(took) * samples / cpus if took else 0.0
    cores = "1 CPU" if cpus == 1 else f"{cpus} CPUs"
    if work < start:
        why = f"about {work:.1f} s of work on {cores}; Ray takes about {start:.0f} s to start"
        return Choice("in process", why, cpus)
    why = f"about {work:.0f} s of work on {cores}; Ray takes about {start:.0f} s to start"
    return Choice("ray", why)

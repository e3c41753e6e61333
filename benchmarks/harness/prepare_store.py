"""Build (or read the build time of) the store the store-based strategies read."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.errors import BenchConfigError
from loaders.monitor import Monitor

__all__ = ["build_store", "check_store_source", "store_build_info"]


def build_store(
    data: str,
    out: str | Path,
    *,
    size: int | str = 64,
    seed: int = 0,
    chunk_samples: int = 32,
    shard_samples: int = 256,
    spec: Any = None,
    runner: str = "ray",
    ray_address: str | None = None,
    content_hash: bool = False,
) -> dict[str, Any]:
    """Build a store of ``data`` with ``precompute.job.build`` and measure it.

    ``spec`` is the build spec, as ``precompute build`` takes it (its fields, options, size,
    mode: every kind of source); None builds images at ``size`` (center-crop), one variant.
    ``runner``, ``ray_address`` and ``content_hash`` are the build's own. A complete store
    already at ``out`` (from an earlier run) is reused, with the build time its report
    recorded, once the build confirms it holds ``data`` at this spec (a store of other data or
    settings fails, naming it). The loaders crop and resize on the device like the other
    strategies. Ray, if this call started it, is shut down afterwards so its processes do not
    count against the loaders measured next.

    Returns:
        ``{"status": "built", "store", "build_s", "cpu_s", "peak_rss_bytes", "num_valid"}``,
        ``{"status": "reused", ...}`` (:func:`store_build_info`'s) or
        ``{"status": "unavailable"|"failed", "reason"}`` when the precompute job cannot be
        imported or the build fails.
    """
    try:
        from precompute.job import build
        from precompute.spec import BuildSpec
    except Exception as exc:  # the job module is missing or broken: say so, build nothing
        return {"status": "unavailable", "reason": f"precompute.job: {type(exc).__name__}: {exc}"}
    if spec is None:
        spec = BuildSpec(
            size=size,
            mode="center-crop",
            seed=seed,
            chunk_samples=chunk_samples,
            shard_samples=shard_samples,
        )
    how: dict[str, Any] = {"progress": False, "content_hash": content_hash, "runner": runner}
    if ray_address is not None:
        how["ray_address"] = ray_address
    if _complete(out):  # an earlier run built it: reuse it and its recorded build time
        try:  # the same data and spec: returns at once (no Ray); else the store is another's
            build(data, str(out), spec, **how)
        except Exception as exc:
            return {
                "status": "failed",
                "store": str(out),
                "reason": f"{out} holds a store of other data or settings ({type(exc).__name__}: "
                f"{exc})",
            }
        return {**store_build_info(out), "status": "reused"}
    ray_was_up = _ray_up()
    t0 = time.perf_counter()
    try:
        with Monitor(0.2) as mon:
            attrs = build(data, str(out), spec, **how)
    except Exception as exc:  # reported, and the store strategies say why they cannot run
        return {
            "status": "failed",
            "store": str(out),
            "reason": f"precompute.job.build: {type(exc).__name__}: {exc}",
        }
    finally:
        if not ray_was_up and _ray_up():
            import ray

            ray.shutdown()
    build_s = time.perf_counter() - t0
    res = mon.result()
    return {
        "status": "built",
        "store": str(out),
        "build_s": build_s,
        "cpu_s": res.cpu_s,
        "peak_rss_bytes": res.peak_rss_bytes,
        "num_valid": attrs.get("num_valid"),
        "spec": spec.to_dict(),
        "runner": runner,
    }


def _complete(out: str | Path) -> bool:
    from precompute.errors import StoreError
    from precompute.format.layout import open_store_info

    try:
        open_store_info(out)
    except StoreError:
        return False
    return True


def _ray_up() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def store_build_info(store: str | Path) -> dict[str, Any]:
    """Return what an existing store's report says about its build (time if recorded)."""
    from precompute.format.layout import open_store_info

    info = open_store_info(store)
    report = dict(info.report)
    build_s = _find_seconds(report)
    return {
        "status": "given",
        "store": str(store),
        "build_s": build_s,
        "num_valid": info.num_valid,
        "spec": info.spec.to_dict(),
        "note": None if build_s is not None else "the store's report records no build time",
    }


def _find_seconds(report: dict[str, Any]) -> float | None:
    for key in ("build_s", "wall_s", "seconds", "elapsed_s"):
        if isinstance(report.get(key), (int, float)):
            return float(report[key])
    timings = report.get("timings")
    if isinstance(timings, dict):
        for key in ("total_s", "wall_s", "build_s", "total"):
            if isinstance(timings.get(key), (int, float)):
                return float(timings[key])
    return None


def _is_digest(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def check_store_source(data: Any, store: str | Path) -> str | None:
    """Check that ``store`` was built from ``data``; return a warning when it cannot tell.

    ``data`` is the source (a path, listed as a v1 source) or its
    :class:`~benchmarks.harness.sources.SourcePlan` (any kind of source). The store's
    recorded source fingerprint is compared with the source's (by file stats, then, if they
    differ, by file contents: a copy of the same files elsewhere matches).

    Returns:
        None when the fingerprints match, else why the check could not be made.

    Raises:
        BenchConfigError: The store was built from another dataset: its figures and break-even
            would compare different data.
    """
    from benchmarks.harness.sources import SourcePlan, plan_source
    from precompute.format.layout import open_store_info

    plan = data if isinstance(data, SourcePlan) else plan_source(str(data))
    source = plan.source
    info = open_store_info(store)
    stored, count = info.source_fingerprint, info.layout.num_samples
    if len(source.items) != count or (
        _is_digest(stored) and source.fingerprint() != stored and source.fingerprint(True) != stored
    ):
        raise BenchConfigError(
            f"--store {store} was built from another dataset than --data {plan.data} ({count} "
            f"vs {len(source.items)} samples, source fingerprint {stored[:12] or 'none'} vs "
            f"{source.fingerprint()[:12]}): build a store from --data, or leave --store out "
            "and let the harness build one"
        )
    if not _is_digest(stored):
        return (
            f"--store {store} records no source fingerprint ({stored or 'none'!r}): it has "
            f"as many samples as --data {plan.data}, but whether it holds the same samples is "
            "not known"
        )
    return None

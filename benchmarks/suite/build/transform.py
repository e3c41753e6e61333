"""What a user's transform costs a build: the same build with a cheap transform and without.

Run: ``.venv/bin/python -m benchmarks.suite.build.transform [--images N] [--runs 5]``

The same files, the same spec, the same cores, built into a fresh output each run: once as
they are and once with :func:`mirror` (each stored image mirrored left to right: a numpy view
copied, about what the cheapest real transform costs) as the build's transform at
``stored``, so what is left of the difference is the transform's machinery: the fingerprint
of its code, the check that Ray's workers import it, the call per sample and the checks of
what it returns. The rows take turns (:mod:`benchmarks.runner`), after a warm-up run of each;
``--runner ray`` (default) builds on a Ray started once (outside the timed part), ``in
process`` on this process's threads (``--runner auto`` on a small source). The ratio of the
medians is the transform's cost (target >= 0.9: within 10%).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.runner import Bench, Row, Run, add_json_argument, ratio

__all__ = ["main", "mirror"]

PLAIN, TRANSFORMED = "build", "build + transform"


def mirror(sample: dict[str, Any], key: str) -> dict[str, Any]:
    """A cheap transform: the image mirrored left to right (a copy, the stored dtype)."""
    sample["image"] = np.ascontiguousarray(sample["image"][:, ::-1])
    return sample


def _row(name: str, src: Path, out: Path, spec: Any, n: int, runner: str, **kw: Any) -> Row:
    from precompute.job import build

    def body(run: Run) -> int:
        with run.untimed():
            shutil.rmtree(out, ignore_errors=True)
        build(str(src), str(out), spec, progress=False, runner=runner, **kw)
        return n

    return Row(name, body, "tree", unit="image", show=("rate", "cpu_ms", "wall_s"))


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print both builds side by side with their ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--size", type=int, default=128, help="stored side length")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--runner", choices=("ray", "auto", "sequential"), default="ray")
    ap.add_argument("--workdir", type=Path, help="keep the dataset here (default: temporary)")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    from benchmarks.environment import usable_cores
    from precompute import BuildSpec
    from precompute.sample import make_sample_dataset

    work = args.workdir or Path(tempfile.mkdtemp(prefix="nostall-transform-"))
    src = work / f"images{args.images}"
    if not (src / ".complete").is_file():
        shutil.rmtree(src, ignore_errors=True)
        make_sample_dataset(src, args.images, size_range=(200, 480), seed=1)
        (src / ".complete").write_text("")
    spec = BuildSpec(size=args.size, mode="center-crop")
    cores = usable_cores()
    rows = [
        _row(PLAIN, src, work / "plain", spec, args.images, args.runner),
        _row(TRANSFORMED, src, work / "mirrored", spec, args.images, args.runner, transform=mirror),
    ]
    lines = [
        ratio(
            "ratio transformed/plain of medians",
            TRANSFORMED,
            PLAIN,
            fmt="{:.3f}",
            note="(target >= 0.9: the transform within 10%)",
        ),
        ratio("CPU ratio plain/transformed", PLAIN, TRANSFORMED, figure="cpu_ms", fmt="{:.3f}"),
    ]
    title = (
        f"build with and without a cheap transform ({args.images} images of 200-480 px, "
        f"S={args.size}, {cores} cores, runner {args.runner})"
    )
    with Bench("build-transform", args.json) as bench:
        if args.runner == "ray":
            import ray

            ray.init(num_cpus=cores, include_dashboard=False, logging_level=logging.ERROR,
                     log_to_driver=False)  # fmt: skip
        try:
            bench.measure(title, rows, runs=args.runs, lines=lines)
        finally:
            if args.runner == "ray":
                ray.shutdown()
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

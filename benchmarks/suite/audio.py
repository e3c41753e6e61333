"""Training-ready audio batches per second and host CPU per sample: nostall vs a classic loader.

Run: ``.venv/bin/python -m benchmarks.suite.audio [--clips 300] [--batch 32] [--runs 3]``

Setup (not timed): ``--clips`` generated clips in 4 class folders, mixed formats (WAV 16/24-bit,
FLAC, OGG/Vorbis, MP3), rates (8-48 kHz) and channel counts
(:func:`benchmarks.audio_data.make_audio_dataset`), and their log-mel store built by
``precompute build SRC --out OUT --clip-seconds 1 --features logmel`` in a child process (so
no Ray process is alive while the rows are timed; with ``--runner sequential``, in this process
without Ray). Timed by :mod:`benchmarks.runner`, side
by side in one run, ``--runs`` epochs after a warm-up epoch, the rows taking turns epoch by
epoch:

* ``classic``: a torch DataLoader with 2 worker processes over
  :class:`~benchmarks.audio_data.ClassicAudioDataset`: per item decode (soundfile), resample
  (soxr), crop/pad to 1 s and the log-mel (64 bands), shuffled, batched.
* ``nostall``: ``StoreLoader`` on the CPU device reading the store, with ``AudioAugment``
  (random 0.9 s crop, gain, SpecAugment time and frequency masks) on every batch, in this
  process with ``--threads`` torch intra-op threads (default 1, as each DataLoader worker
  has: on a small, shared host, idle intra-op threads spinning on tiny tensors cost CPU).

Prints samples/s and host CPU ms per sample (the classic row: this process and its workers;
the other: this process's nanosecond clock) of each row and the two ratios against the goals
(throughput >= 10x, CPU per sample <= 1/20).

**Long recordings** (``--long-minutes 10,60``, ``--skip-long`` to leave them out): a WAV of
each length (44.1 kHz stereo, :mod:`benchmarks.recordings`) and a 1 s one, each timed as a
fresh process, the rows taking turns: one streaming decode + resample of the file to 16 kHz
(the least any build must do), and ``precompute build --clips all --clip-seconds 1`` of it
(``--runner``, default ``ray``), whose 1 s recording is the fixed start cost. Prints, per
length, build time less the fixed cost over the decode (goal <= 1.5) and the build's peak RSS
(its process tree) against the shortest length's (goal: flat). Results are not committed.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from benchmarks.audio_data import ClassicAudioDataset, make_audio_dataset
from benchmarks.recordings import write_recording
from benchmarks.runner import Bench, Command, Line, Results, Row, add_json_argument, ratio

__all__ = ["main"]

SEED = 0
CLASSIC = "classic DataLoader (2 workers: decode+resample+log-mel)"
NOSTALL = "nostall StoreLoader + AudioAugment (cpu)"


def build_store(src: Path, out: Path, runner: str) -> None:
    """``precompute build`` of the log-mel store.

    On Ray in a child process (its Ray exits with it, and so leaves no Ray running beside the
    timed rows); ``sequential`` in this process, without Ray.
    """
    args = ["build", str(src), "--out", str(out), "--clip-seconds", "1", "--features", "logmel",
            "--n-mels", "64", "--quiet", "--runner", runner]  # fmt: skip
    if runner == "sequential":
        from precompute.cli import main as precompute

        precompute(args)
        return
    subprocess.run(
        [sys.executable, "-m", "precompute.cli", *args], check=True, stdout=subprocess.DEVNULL
    )


def classic_epochs(src: Path, batch: int) -> tuple[Callable[[int], Iterable[int]], Any]:
    """The DataLoader + 2 workers baseline; returns (epoch fn, its loader)."""
    from torch.utils.data import DataLoader, RandomSampler

    data = ClassicAudioDataset(src)
    gen = torch.Generator()
    loader = DataLoader(
        data, batch_size=batch, sampler=RandomSampler(data, generator=gen), num_workers=2,
        persistent_workers=True, prefetch_factor=2, drop_last=True,
    )  # fmt: skip

    def epoch(e: int) -> Iterable[int]:
        gen.manual_seed(SEED * 1000 + e)
        return (len(mel) for mel, _ in loader)

    return epoch, loader


def store_epochs(store: Path, batch: int) -> Callable[[int], Iterable[int]]:
    """StoreLoader epochs with ``AudioAugment`` on the CPU."""
    from loaders import StoreLoader
    from loaders.augment import AudioAugment

    policy = AudioAugment(crop=90, gain_db=(-6.0, 6.0), time_masks=2, time_mask_width=10,
                          freq_masks=2, freq_mask_width=8)  # fmt: skip
    loader = StoreLoader(store, batch, device="cpu", seed=SEED, augment=policy)

    def epoch(e: int) -> Iterable[int]:
        loader.set_epoch(e)
        return (len(b["audio"]) for b in loader)

    return epoch


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clips", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--threads", type=int, default=1,
        help="torch intra-op threads of this process (DataLoader workers use 1 each)",
    )  # fmt: skip
    p.add_argument("--long-minutes", default="10,60", help="lengths of the long recordings")
    p.add_argument("--long-runs", type=int, default=2)
    p.add_argument("--runner", default="ray", choices=["ray", "sequential"])
    p.add_argument("--skip-long", action="store_true")
    add_json_argument(p)
    return p.parse_args(argv)


def _long_rows(tmp: Path, minutes: list[float], runner: str) -> list[Command]:
    """Per length (and the 1 s fixed cost): decode + resample, and the build, fresh processes."""
    rows = []
    for name, m in [("1 s", 1 / 60), *((f"{m:g} min", m) for m in minutes)]:
        src = tmp / f"long-{name.replace(' ', '')}"
        write_recording(src / "rec" / "field.wav", m, seed=round(m * 60))
        out = tmp / f"{src.name}.zarr"
        if name != "1 s":
            rows.append(Command(f"decode+resample {name}", "benchmarks.recordings:decode_resample",
                                (str(src / "rec" / "field.wav"),), memory=True))  # fmt: skip
        rows.append(Command(f"build {name}", "benchmarks.recordings:build_windows",
                            (str(src), str(out), runner), memory=True,
                            before=functools.partial(shutil.rmtree, out, True)))  # fmt: skip
    return rows


def _long_lines(minutes: list[float]) -> list[Line]:
    def over(m: float) -> Callable[[Results], float]:
        def value(r: Results) -> float:
            fixed = r["build 1 s"].median("wall_s")
            return (r[f"build {m:g} min"].median("wall_s") - fixed) / r[
                f"decode+resample {m:g} min"
            ].median("wall_s")

        return value

    lines = [Line(f"build/decode {m:g} min, less the fixed cost", over(m), "{:.2f}",
                  "(goal <= 1.5)") for m in minutes]  # fmt: skip
    for m in minutes[1:]:
        lines.append(ratio(f"build peak RSS {m:g} min / {minutes[0]:g} min", f"build {m:g} min",
                           f"build {minutes[0]:g} min", "tree_peak_rss_mib", fmt="{:.2f}",
                           note="(goal: flat, about 1)"))  # fmt: skip
    return lines


def _cpu_ratio(results: Results) -> float:
    """Classic CPU per sample over nostall's (0 when the loader measured no clock tick)."""
    nostall = results[NOSTALL].median("cpu_ms")
    return results[CLASSIC].median("cpu_ms") / nostall if nostall > 0 else math.inf


LINES = (
    ratio("throughput nostall/classic", NOSTALL, CLASSIC, fmt="{:.1f}x", note="(goal >= 10x)"),
    Line(
        "CPU per sample nostall/classic",
        _cpu_ratio,  # CPU seconds come in clock ticks: a short run may measure none at all
        lambda v: f"1/{v:.1f}" if math.isfinite(v) else "below one clock tick (run longer)",
        "(goal <= 1/20)",
    ),
)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print the rows and ratios."""
    from benchmarks.environment import environment

    a = _args(argv)
    torch.set_num_threads(a.threads)
    env = environment()
    with Bench("audio", a.json) as bench, tempfile.TemporaryDirectory() as tmp:
        bench.note(
            json.dumps({k: env[k] for k in ("cpu", "cores_usable", "memory_gib")})
            + f" torch {torch.__version__}, intra-op threads {torch.get_num_threads()}"
        )
        t0 = time.perf_counter()
        src = make_audio_dataset(Path(tmp) / "clips", a.clips, 4, SEED, (0.5, 3.0))
        build_store(src, Path(tmp) / "store", a.runner)
        took = time.perf_counter() - t0
        bench.note(f"setup: {a.clips} clips (WAV/FLAC/OGG/MP3, 8-48 kHz, 1-2 ch, 0.5-3 s) + "
                   f"log-mel store in {took:.1f}s; batch {a.batch}")  # fmt: skip
        classic, loader = classic_epochs(src, a.batch)
        nostall = store_epochs(Path(tmp) / "store", a.batch)
        rows = [
            Row(CLASSIC, lambda run: sum(classic(run.index)), clock="tree"),
            Row(NOSTALL, lambda run: sum(nostall(run.index))),
        ]
        try:
            bench.measure("audio batches", rows, runs=a.runs, lines=LINES)
        finally:
            it = getattr(loader, "_iterator", None)
            if it is not None:
                it._shutdown_workers()
        if not a.skip_long:
            minutes = [float(m) for m in a.long_minutes.split(",")]
            long_rows = _long_rows(Path(tmp), minutes, a.runner)
            bench.note(f"long recordings: 44.1 kHz stereo WAV, 1 s windows, runner {a.runner}")
            bench.measure("long recordings", long_rows, runs=a.long_runs,
                          lines=_long_lines(minutes))  # fmt: skip


if __name__ == "__main__":
    main()

"""Training-ready audio batches per second and host CPU per sample: nostall vs a classic loader.

Run: ``.venv/bin/python -m benchmarks.bench_audio [--clips 300] [--batch 32] [--runs 3]``

Setup (not timed): ``--clips`` generated clips in 4 class folders, mixed formats (WAV 16/24-bit,
FLAC, OGG/Vorbis, MP3), rates (8-48 kHz) and channel counts
(:func:`benchmarks.audio_data.make_audio_dataset`), and their log-mel store built by
``precompute build SRC --out OUT --clip-seconds 1 --features logmel`` in a child process (so
no Ray process is alive while the rows are timed). Timed, side by side in one run, each a
median over ``--runs`` epochs after a warm-up epoch, the rows taking turns epoch by epoch
(:func:`benchmarks.bench_augment.time_epochs`):

* ``classic``: a torch DataLoader with 2 worker processes over
  :class:`~benchmarks.audio_data.ClassicAudioDataset`: per item decode (soundfile), resample
  (soxr), crop/pad to 1 s and the log-mel (64 bands), shuffled, batched.
* ``nostall``: ``StoreLoader`` on the CPU device reading the store, with ``AudioAugment``
  (random 0.9 s crop, gain, SpecAugment time and frequency masks) on every batch, in this
  process with ``--threads`` torch intra-op threads (default 1, as each DataLoader worker
  has: on a small, shared host, idle intra-op threads spinning on tiny tensors cost CPU).

Prints samples/s and host CPU ms per sample (this process and its children) of each row and
the two ratios against the goals (throughput >= 10x, CPU per sample <= 1/20). Results are not
committed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from benchmarks.audio_data import ClassicAudioDataset, make_audio_dataset
from benchmarks.bench_augment import time_epochs

__all__ = ["main"]

SEED = 0
CLASSIC = "classic DataLoader (2 workers: decode+resample+log-mel)"
NOSTALL = "nostall StoreLoader + AudioAugment (cpu)"


def build_store(src: Path, out: Path) -> None:
    """``precompute build`` of the log-mel store, in a child process (its Ray exits with it)."""
    cmd = [sys.executable, "-m", "precompute.cli", "build", str(src), "--out", str(out),
           "--clip-seconds", "1", "--features", "logmel", "--n-mels", "64", "--quiet"]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


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


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clips", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--threads", type=int, default=1,
        help="torch intra-op threads of this process (DataLoader workers use 1 each)",
    )  # fmt: skip
    return p.parse_args()


def main() -> None:
    """Run the comparison and print the rows and ratios."""
    from benchmarks.environment import environment

    a = _args()
    torch.set_num_threads(a.threads)
    env = environment()
    print(
        json.dumps({k: env[k] for k in ("cpu", "cores_usable", "memory_gib")}),
        f"torch {torch.__version__}, intra-op threads {torch.get_num_threads()}",
    )
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        src = make_audio_dataset(Path(tmp) / "clips", a.clips, 4, SEED, (0.5, 3.0))
        build_store(src, Path(tmp) / "store")
        print(f"setup: {a.clips} clips (WAV/FLAC/OGG/MP3, 8-48 kHz, 1-2 ch, 0.5-3 s) + log-mel "
              f"store in {time.perf_counter() - t0:.1f}s; batch {a.batch}, median of {a.runs} "
              "interleaved epochs after 1 warm-up each")  # fmt: skip
        classic, loader = classic_epochs(src, a.batch)
        rows = {CLASSIC: classic, NOSTALL: store_epochs(Path(tmp) / "store", a.batch)}
        try:
            res = time_epochs(rows, a.runs)
        finally:
            it = getattr(loader, "_iterator", None)
            if it is not None:
                it._shutdown_workers()
    for name, (rate, cpu) in res.items():
        print(f"{name:58s} {rate:9.1f} samples/s {rate / a.batch:8.1f} batches/s "
              f"{cpu:8.3f} CPU ms/sample")  # fmt: skip
    (c_rate, c_cpu), (n_rate, n_cpu) = res[CLASSIC], res[NOSTALL]
    # CPU seconds come in clock ticks: a short run of the loader may measure none at all
    cpu_ratio = f"1/{c_cpu / n_cpu:.1f}" if n_cpu > 0 else "below one clock tick (run longer)"
    print(f"throughput nostall/classic {n_rate / c_rate:.1f}x (goal >= 10x); CPU per sample "
          f"nostall/classic {cpu_ratio} (goal <= 1/20)")  # fmt: skip


if __name__ == "__main__":
    main()

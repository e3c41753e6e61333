"""Chunk codecs side by side: bytes per sample, CPU decode, a 150 MB/s link; FFCV's JPEG beside.

``python -m benchmarks.suite.codecs [--samples 2048] [--size 256] [--runs 3] [--threads 4]
[--ffcv-python PYTHON]``

Photo-like images: random crops (scale, position, flip, colour shift) of the one photograph the
installed packages ship (matplotlib's ``grace_hopper.jpg``, 512 x 600), resized to ``--size``.
One run prints:

1. bytes per sample of the ``image`` array stored raw, ``zstd:3`` and ``jpeg:90`` (4:2:0,
   baseline, restart markers), and of FFCV's ``jpg`` write mode at quality 90 and the same size
   (the ``.beton`` file over the samples; FFCV run by ``--ffcv-python PYTHON``, an interpreter with
   ``ffcv`` installed; left out, and said so, when it cannot run), each as a ratio to a sample
   decoded (shape x itemsize; ``precompute inspect``'s figures,
   :func:`precompute.format.storecheck.array_bytes`);
2. zstd:3 on other fields, raw bytes over stored bytes of chunks of 32 samples: segmentation
   masks (4 classes, regions of the photo's grey levels), int16 waveforms and float16 log-mels
   (:mod:`benchmarks.audio_data`'s synthetic clips), spectral cubes
   (:mod:`benchmarks.spectral_data`'s scene, 9 x 9 x 100 float32 patches);
3. CPU decode: samples/s and host CPU per sample over one epoch (a warm-up epoch first, then the
   median of ``--runs``), each loader in a fresh process measured the same way (wall clock, the
   process's user + system CPU): ``StoreLoader`` of the JPEG store (``device="cpu"``,
   ``augment=None``: decoded uint8 batches, 2 read threads) and of the raw store, and FFCV's
   ``Loader`` of its ``jpg`` file (``SimpleRGBImageDecoder``, 2 workers, ``os_cache``);
4. samples/s of the raw and the JPEG store read from a local S3-compatible server on 127.0.0.1
   behind a 150 MB/s link (:mod:`benchmarks.suite.codecs.capped`: tc's token bucket on the
   loopback of a network namespace of the run's own where one can be made, else the server's
   own token bucket), with the GETs, their mean size, the JPEG store from local disk beside (the
   decode's own pace) and the ratio.

Setup is outside the timed parts; results are printed, never committed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main", "photo_crops"]


def photo_crops(n: int, size: int, seed: int = 0) -> np.ndarray:
    """``n`` photo-like ``(size, size, 3)`` uint8 images cut from matplotlib's sample photo."""
    from matplotlib import cbook
    from PIL import Image

    photo = Image.open(str(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))).convert(
        "RGB"
    )
    w, h = photo.size
    rng = np.random.default_rng(seed)
    out = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        side = int(rng.uniform(0.3, 1.0) * min(w, h))
        x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
        crop = photo.crop((x, y, x + side, y + side)).resize(
            (size, size), Image.Resampling.BILINEAR
        )
        pixels = np.asarray(crop, np.float32) * rng.uniform(0.7, 1.2, 3)
        out[i] = np.clip(pixels[:, ::-1] if rng.random() < 0.5 else pixels, 0, 255)
    return out


def _stores(work: Path, images: np.ndarray) -> dict[str, Path]:
    from precompute.pipeline.writer import write_store_from_arrays
    from precompute.spec import BuildSpec

    out = {}
    for name, codec in [("raw", "raw"), ("zstd:3", "zstd:3"), ("jpeg:90", "jpeg:90")]:
        given = {"size": images.shape[1], "shard_samples": 256, "codecs": {"image": codec}}
        spec = BuildSpec.from_dict(given)
        out[name] = work / "served" / name.replace(":", "")
        write_store_from_arrays(out[name], images, np.arange(len(images)) % 10, spec)
    return out


def _image_bytes(store: Path) -> Any:
    """The ``image`` array's bytes per sample, stored and raw, as ``precompute inspect`` says."""
    from precompute.format.layout import open_store_info
    from precompute.format.storecheck import array_bytes

    info = open_store_info(store)
    return array_bytes(info.path, info.layout, ["image"])[0]


# -- FFCV, in its own interpreter -----------------------------------------------------------

_FFCV_WRITE = """
import sys, numpy as np
from ffcv.writer import DatasetWriter
from ffcv.fields import RGBImageField, IntField
images = np.load(sys.argv[1], mmap_mode="r")
class D:
    def __len__(self): return len(images)
    def __getitem__(self, i): return np.ascontiguousarray(images[i]), i % 10
DatasetWriter(sys.argv[2], {"image": RGBImageField(write_mode="jpg", max_resolution=images.shape[1],
              jpeg_quality=90), "label": IntField()}, num_workers=1).from_indexed_dataset(D())
"""

_FFCV_READ = """
import json, resource, statistics, sys, time
from ffcv.loader import Loader, OrderOption
from ffcv.fields.decoders import SimpleRGBImageDecoder, IntDecoder
loader = Loader(sys.argv[1], batch_size=64, num_workers=2, order=OrderOption.RANDOM, os_cache=True,
                pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
rates, cpus = [], []
for run in range(int(sys.argv[2]) + 1):
    t0, c0, n = time.perf_counter(), cpu(), 0
    for images, labels in loader:
        n += len(images)
    if run:
        rates.append(n / (time.perf_counter() - t0)); cpus.append((cpu() - c0) / n)
from ffcv.reader import Reader
table = Reader(sys.argv[1]).alloc_table
jpeg = float(table["size"].sum())  # the JPEG allocations (labels live in the metadata)
print(json.dumps({"rate": statistics.median(rates), "cpu_ms": 1e3 * statistics.median(cpus),
                  "jpeg_bytes": jpeg}))
"""


def _ffcv(python: str, images: np.ndarray, work: Path, runs: int) -> dict[str, float] | str:
    """FFCV's bytes per sample and decode figures, or why it could not run."""
    from benchmarks.suite.build.writers import ffcv_usable

    why = ffcv_usable(python)
    if why:
        return why
    np.save(work / "images.npy", images)
    beton = work / "ffcv.beton"
    try:
        steps: list[tuple[str, list[Any]]] = [
            (_FFCV_WRITE, [work / "images.npy", beton]),
            (_FFCV_READ, [beton, runs]),
        ]
        for script, args in steps:
            done = subprocess.run(
                [python, "-c", script, *[str(a) for a in args]],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if done.returncode:
                return f"FFCV failed: {done.stderr.strip().splitlines()[-1:]}"
        figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return f"FFCV could not run: {exc}"
    figures["file_bytes"] = beton.stat().st_size / len(images)  # pages of 8 MiB: padded
    figures["bytes"] = figures.pop("jpeg_bytes") / len(images)  # the JPEG streams alone
    return figures


# -- nostall loaders, each in a fresh process --------------------------------------------------


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def epochs(url: str, runs: int, env: dict[str, str] | None = None) -> dict[str, float]:
    """(In a fresh process) median samples/s and CPU ms per sample of ``StoreLoader`` epochs."""
    os.environ.update(env or {})
    from loaders import StoreLoader

    loader = StoreLoader(url, 64, device="cpu", augment=None, num_threads=2, seed=0)
    rates, cpus = [], []
    for run in range(runs + 1):
        t0, c0, n = time.perf_counter(), _cpu(), 0
        for batch in loader:
            n += batch["index"].shape[0]
        if run:
            rates.append(n / (time.perf_counter() - t0))
            cpus.append((_cpu() - c0) / n)
    return {"rate": statistics.median(rates), "cpu_ms": 1e3 * statistics.median(cpus)}


def _child(url: str, runs: int, env: dict[str, str] | None = None) -> dict[str, float]:
    code = "import json,sys; from benchmarks.suite.codecs.bench import epochs; "
    code += "print(json.dumps(epochs(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))"
    done = subprocess.run(
        [sys.executable, "-c", code, url, str(runs), json.dumps(env or {})],
        capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# -- other fields under zstd -------------------------------------------------------------------


def _zstd_ratio(values: np.ndarray, chunk: int = 32) -> float:
    from precompute.format.codecs import CodecSpec

    codec = CodecSpec("zstd", {"level": 3})
    raw = stored = 0
    for at in range(0, len(values), chunk):
        part = np.ascontiguousarray(values[at : at + chunk])
        raw += part.nbytes
        stored += len(codec.codec.encode(part, codec.options, 0))
    return raw / stored


def _other_fields(images: np.ndarray) -> dict[str, tuple[str, float]]:
    from benchmarks.audio_data import _sound
    from benchmarks.spectral_data import _patches, make_scene
    from precompute.audio.features import logmel, to_int16

    grey = images.mean(axis=3)
    levels = np.quantile(grey, [0.25, 0.5, 0.75])
    masks = np.digitize(grey, levels).astype(np.uint8)  # regions of the photo's grey levels
    rng = np.random.default_rng(0)
    kinds = ("tone", "chirp", "noise", "am")
    waves = np.stack([_sound(kinds[i % 4], i % 7, 16000, 16000, rng) for i in range(128)])
    mels = logmel(waves.astype(np.float32), 16000).astype(np.float16)
    scene, gt = make_scene(64, 64, 100, 16, seed=0)
    cubes = np.stack([p[0] for p in _patches(scene, gt, 9)])
    return {
        "mask": (f"{masks.shape[1:]} uint8, 4 classes", _zstd_ratio(masks)),
        "waveform": (f"{waves.shape[1:]} int16, synthetic 1 s clips", _zstd_ratio(to_int16(waves))),
        "log-mel": (f"{mels.shape[1:]} float16", _zstd_ratio(mels)),
        "spectral": (f"{cubes.shape[1:]} {cubes.dtype}", _zstd_ratio(cubes)),
    }


def _print(title: str, rows: list[tuple[str, ...]]) -> None:
    print(f"\n## {title}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def main(argv: list[str] | None = None) -> None:
    """Set up, measure, print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=4, help="read threads behind the link")
    p.add_argument(
        "--ffcv-python",
        default=sys.executable,
        help="an interpreter that can import ffcv (default: this one)",
    )
    args = p.parse_args(argv)
    from benchmarks.environment import environment_line
    from benchmarks.suite.codecs.capped import capped_run

    print(environment_line())
    with tempfile.TemporaryDirectory(prefix="nostall-bench-codecs-") as tmp:
        work = Path(tmp)
        images = photo_crops(args.samples, args.size)
        stores = _stores(work, images)
        ffcv = _ffcv(args.ffcv_python, images, work, args.runs)
        found = {k: _image_bytes(v) for k, v in stores.items()}
        raw = found["raw"].raw  # a sample decoded: what every ratio is taken over
        per = {k: a.stored for k, a in found.items()}
        rows: list[tuple[str, ...]] = [("store", "bytes/sample", "vs raw", "vs FFCV jpg")]
        fb = ffcv["bytes"] if isinstance(ffcv, dict) else None
        for name, b in [*per.items(), *([("FFCV jpg q90", fb)] if fb else [])]:
            vs = f"{b / fb:.2f}x" if fb else "-"
            rows.append((name, f"{b:,.0f}", f"{raw / b:.1f}x smaller", vs))
        _print(f"bytes per sample, {args.samples} photo crops of {args.size} px", rows)
        if not isinstance(ffcv, dict):
            print(f"FFCV: {ffcv}")
        else:
            print(f"(FFCV's file: {ffcv['file_bytes']:,.0f} bytes/sample with its page padding)")
        rows = [("field", "sample", "zstd:3 raw/stored")]
        rows += [(k, what, f"{r:.2f}x") for k, (what, r) in _other_fields(images).items()]
        _print("zstd:3 on other fields (chunks of 32 samples)", rows)
        decode = {name: _child(str(stores[name]), args.runs) for name in ("jpeg:90", "raw")}
        rows = [("loader", "samples/s", "host CPU ms/sample")]
        rows += [
            (f"StoreLoader {k}", f"{v['rate']:.0f}", f"{v['cpu_ms']:.2f}")
            for k, v in decode.items()
        ]
        if isinstance(ffcv, dict):
            rows.append(("FFCV jpg", f"{ffcv['rate']:.0f}", f"{ffcv['cpu_ms']:.2f}"))
            ours = decode["jpeg:90"]
            rate, cpu = ours["rate"] / ffcv["rate"], ours["cpu_ms"] / ffcv["cpu_ms"]
            rows.append(("StoreLoader jpeg / FFCV", f"{rate:.2f}x", f"{cpu:.2f}x"))
        _print("CPU decode to uint8 batches (2 threads / workers, batch 64)", rows)
        capped_run(work, threads=args.threads, runs=args.runs + 2)


if __name__ == "__main__":
    main()

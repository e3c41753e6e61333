"""Build time of ``precompute build`` (each runner) against FFCV's writer, side by side.

Run: ``.venv/bin/python -m benchmarks.suite.build.writers [--images 200,2000] [--runs 3]
[--recording-minutes 60] [--ffcv-python PYTHON] [--before PATH] [--workdir DIR]``

What a user waits for, each run a fresh process (imports, Ray's start and stop included),
the rows taking turns round by round (:mod:`benchmarks.runner`):

* ``sequential``, ``ray``, ``auto``: ``precompute build SRC --out OUT --size S --runner R``
  (``auto`` is the default: in process for a small source, Ray for a large one).
* ``before: ray``, ``before: sequential`` (with ``--before PATH``): the same command run from
  another checkout of the code (``PYTHONPATH=PATH``), e.g. the code before a change.
* ``ffcv raw``, ``ffcv jpg``: FFCV's ``DatasetWriter`` with ``RGBImageField(write_mode=...,
  max_resolution=S)`` and an ``IntField`` over the same files, decoded by Pillow (EXIF
  transposed, RGB, as the build does) in its worker processes (``num_workers`` = the usable
  cores). FFCV is no dependency of nostall: ``--ffcv-python`` names an interpreter that can
  import it (default: this one). Where it cannot, the rows are left out with a line saying so.

The images: ``--images`` photo-like JPEGs (quality 90, 333-500 px on the long side, as
ImageNet's): each a random crop, scale, flip and colour shift of matplotlib's sample photo
(``grace_hopper.jpg``, a dependency's file), so their pixels and their JPEG sizes are a
photo's, not a drawing's. The recording (``--recording-minutes``, 0 to leave it out): a 44.1 kHz
stereo WAV (:mod:`benchmarks.recordings`) built as ``--clips all --clip-seconds 1 --features
logmel`` (FFCV has no audio field). Prints, per source, wall and CPU seconds of each row and
the ratios of FFCV's writer to the build (target: the build no slower, ratio >= 1). Results
are not committed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.runner import Bench, Command, Line, add_json_argument

__all__ = ["cli_build", "ffcv_write", "main", "make_photos"]

SIZE = 256
SHOW = ("wall_s", "cpu_s", "tree_peak_rss_mib")
FFCV_SCRIPT = """
import sys
from PIL import Image, ImageOps
from ffcv.fields import IntField, RGBImageField
from ffcv.writer import DatasetWriter
rows = [line.rsplit(",", 1) for line in open(sys.argv[1]).read().splitlines()]
class Files:
    def __len__(self):
        return len(rows)
    def __getitem__(self, i):
        path, label = rows[i]
        return ImageOps.exif_transpose(Image.open(path)).convert("RGB"), int(label)
image = RGBImageField(write_mode=sys.argv[3], max_resolution=int(sys.argv[4]), jpeg_quality=90)
writer = DatasetWriter(sys.argv[2], {"image": image, "label": IntField()},
                       num_workers=int(sys.argv[5]))
writer.from_indexed_dataset(Files())
"""


def make_photos(root: Path, count: int, seed: int = 0) -> Path:
    """Write ``count`` photo-like JPEGs in 4 class folders (crops of a real photo)."""
    import numpy as np
    from matplotlib import cbook
    from PIL import Image, ImageEnhance, ImageOps

    photo = Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)).convert("RGB")
    rng = np.random.default_rng(seed)
    for i in range(count):
        w, h = photo.size
        scale = rng.uniform(0.35, 1.0)
        cw, ch = int(w * scale * rng.uniform(0.8, 1.0)), int(h * scale * rng.uniform(0.8, 1.0))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        img = photo.crop((x, y, x + cw, y + ch))
        side = int(rng.integers(333, 501))
        ratio = side / max(cw, ch)
        img = img.resize((max(1, round(cw * ratio)), max(1, round(ch * ratio))))
        if rng.random() < 0.5:
            img = ImageOps.mirror(img)
        img = ImageEnhance.Color(img).enhance(rng.uniform(0.6, 1.4))
        img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.8, 1.2))
        folder = root / f"class{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        img.save(folder / f"{i:05d}.jpg", quality=90)
    return root


def cli_build(pythonpath: str, src: str, out: str, runner: str, *flags: str) -> dict[str, Any]:
    """(In a fresh process) ``precompute build`` run from the code at ``pythonpath``."""
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "precompute.cli", "build", src, "--out", out, "--quiet"]
    env = {**os.environ, "PYTHONPATH": pythonpath}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [*argv, "--runner", runner, *flags], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode:
        raise RuntimeError(f"precompute build failed: {proc.stderr[-2000:]}")
    built = [ln for ln in proc.stderr.splitlines() if ln.startswith("built ")]
    return {"summary": built[-1] if built else ""}


def ffcv_write(python: str, listing: str, out: str, mode: str, size: str, workers: str) -> None:
    """(In a fresh process) FFCV's ``DatasetWriter`` over the files of ``listing``."""
    Path(out).unlink(missing_ok=True)
    subprocess.run([python, "-c", FFCV_SCRIPT, listing, out, mode, size, workers], check=True)


def ffcv_usable(python: str) -> str | None:
    """None if ``python`` imports FFCV's writer, else why not (one line)."""
    probe = "from ffcv.writer import DatasetWriter; from ffcv.fields import RGBImageField"
    try:
        proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"{python}: {exc}"
    if proc.returncode:
        lines = proc.stderr.strip().splitlines()
        return f"{python} cannot import ffcv ({lines[-1] if lines else proc.returncode})"
    return None


def _listing(src: Path, work: Path) -> Path:
    """``path,label`` lines of every image of ``src`` (FFCV's dataset), labels as the build's."""
    listing = work / f"{src.name}.list"
    classes = sorted(p.name for p in src.iterdir() if p.is_dir())
    rows = [f"{p},{i}" for i, c in enumerate(classes) for p in sorted((src / c).glob("*.jpg"))]
    listing.write_text("\n".join(rows) + "\n")
    return listing


def _rows(
    args: argparse.Namespace, src: Path, work: Path, flags: tuple[str, ...], images: bool
) -> list[Command]:
    """The build of each runner (and of the code before), and FFCV's writer of images."""
    here = str(Path(__file__).resolve().parents[3])
    runs: list[tuple[str, str, str]] = []
    if args.before:
        runs += [(f"before: {r}", args.before, r) for r in ("ray", "sequential")]
    runs += [(r, here, r) for r in ("sequential", "ray", "auto")]
    rows = [
        Command(name, "benchmarks.suite.build.writers:cli_build",
                (path, str(src), str(work / f"{src.name}-{runner}.zarr"), runner, *flags),
                memory=True, show=SHOW)
        for name, path, runner in runs
    ]  # fmt: skip
    if images and args.ffcv_why is None:
        listing, cores = str(_listing(src, work)), str(_cores())
        rows += [
            Command(f"ffcv {mode}", "benchmarks.suite.build.writers:ffcv_write",
                    (args.ffcv_python, listing, str(work / f"{src.name}-{mode}.beton"), mode,
                     str(SIZE), cores), memory=True, show=SHOW)
            for mode in ("raw", "jpg")
        ]  # fmt: skip
    return rows


def _cores() -> int:
    from precompute.runtime.raylocal import available_cpus

    return available_cpus()


def _ratio(name: str, slow: str, fast: str) -> Line:
    def value(r: Any) -> float:
        if slow not in r or fast not in r:
            return float("nan")
        return float(r[slow].median("wall_s") / r[fast].median("wall_s"))

    return Line(name, value, "{:.2f}", "")


def _lines(images: bool, before: bool) -> list[Line]:
    lines = []
    if images:
        lines += [
            _ratio("ffcv raw / auto (wall; >= 1: the build no slower)", "ffcv raw", "auto"),
            _ratio("ffcv jpg / auto (wall)", "ffcv jpg", "auto"),
        ]
    if before:
        lines += [
            _ratio("before: ray / auto (wall)", "before: ray", "auto"),
            _ratio("before: sequential / sequential (wall)", "before: sequential", "sequential"),
        ]
    return lines


def _sources(args: argparse.Namespace, work: Path) -> list[tuple[str, Path, tuple[str, ...], bool]]:
    """(title, source, build flags, images?) of each source, made once per workdir."""
    out: list[tuple[str, Path, tuple[str, ...], bool]] = []
    for n in args.images:
        src = work / f"photos{n}"
        if not (src / ".complete").is_file():
            shutil.rmtree(src, ignore_errors=True)
            make_photos(src, n)
            (src / ".complete").write_text("")
        out.append((f"{n} photo-like JPEGs, S={SIZE}", src, ("--size", str(SIZE)), True))
    if args.recording_minutes:
        from benchmarks.recordings import write_recording

        rec = work / f"rec{args.recording_minutes:g}" / "speech" / "rec.wav"
        if not rec.is_file():
            write_recording(rec, args.recording_minutes)
        flags = ("--clip-seconds", "1", "--clips", "all", "--features", "logmel")
        title = f"a {args.recording_minutes:g}-minute recording, 1 s log-mel windows"
        out.append((title, rec.parent.parent, flags, False))
    return out


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default="200,2000", help="image counts, comma-separated")
    ap.add_argument("--recording-minutes", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ffcv-python", default=sys.executable, help="an interpreter with ffcv")
    ap.add_argument("--before", help="another checkout's root: its build, run the same way")
    ap.add_argument("--workdir", help="keep the generated sources here (default: a temp dir)")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    args.images = [int(n) for n in str(args.images).split(",") if n.strip()]
    return args


def main(argv: list[str] | None = None) -> None:
    """Make the sources, run the rows of each side by side, print tables and ratios."""
    args = _args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_writers_"))
    work.mkdir(parents=True, exist_ok=True)
    args.ffcv_why = ffcv_usable(args.ffcv_python)
    with Bench("build-writers", args.json) as bench:
        from benchmarks.environment import environment

        bench.note("environment: " + json.dumps(environment(), default=str))
        if args.ffcv_why is not None:
            bench.note(f"FFCV rows left out: {args.ffcv_why} (give --ffcv-python)")
        for title, src, flags, images in _sources(args, work):
            rows = _rows(args, src, work, flags, images)
            lines = _lines(images, bool(args.before))
            bench.measure(title, rows, runs=args.runs, warmup=0, lines=lines)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""``benchmarks run`` on every kind of data, each against the pipelines its users run today.

``python -m benchmarks.suite.kinds [--kinds audio,masks,...] [--work DIR] [--epochs 3]``
writes each kind's data with the committed generators (outside the timed part; kept in
``--work`` for the next run), then runs, per kind, the command a user types::

    python -m benchmarks run --data SRC [the precompute build flags of SRC] --out DIR ...

(``benchmarks run``: every strategy one after another on the same data, batch size and
augmentation; :mod:`benchmarks.harness`), prints the command, its table and ratio lines, and
the goal lines of issue 43, in samples per second and in samples per host CPU second:

* audio (log-mel): ``precompute`` >= 10x ``workers`` and >= 10x ``tf-native``, per CPU second;
* masks: ``precompute`` >= 4x ``workers``;
* spectral: ``precompute`` >= 0.7x ``memmap`` (the numpy memmap read of the scene).

The kinds: ``images`` (class folders, :func:`precompute.sample.make_sample_dataset`),
``audio`` (:func:`benchmarks.audio_data.make_audio_dataset`: WAV/FLAC/OGG/MP3 at 8-48 kHz;
``tf-native`` reads its 16-bit WAV fifth), ``audio-wav`` (the same, 16-bit WAV only: every
clip ``tf.audio.decode_wav`` reads, the data of the ``tf.data`` user the goal compares with),
``masks`` (:func:`benchmarks.fields_data.make_segmentation`), ``landmarks``
(:func:`benchmarks.fields_data.make_landmarks`), ``boxes`` (a COCO file,
:func:`benchmarks.examples.detection.make_shapes`) and ``spectral`` (a scene and its ground
truth, :func:`benchmarks.spectral_data.make_scene`). Results are printed, never committed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GOALS", "KINDS", "main"]


def _images(root: Path, n: int) -> tuple[Path, list[str]]:
    from precompute.sample import make_sample_dataset

    return make_sample_dataset(root, num_images=n, num_classes=4, seed=0), ["--size", "64"]


def _audio(root: Path, n: int) -> tuple[Path, list[str]]:
    from benchmarks.audio_data import make_audio_dataset

    src = make_audio_dataset(root, n, 4, 0, (0.5, 3.0))
    return src, ["--clip-seconds", "1", "--features", "logmel", "--n-mels", "64"]


def _audio_wav(root: Path, n: int) -> tuple[Path, list[str]]:
    from benchmarks.audio_data import make_audio_dataset

    src = make_audio_dataset(root, n, 4, 0, (0.5, 3.0), formats=(0,))  # 16-bit WAV only
    return src, ["--clip-seconds", "1", "--features", "logmel", "--n-mels", "64"]


def _masks(root: Path, n: int) -> tuple[Path, list[str]]:
    from benchmarks.fields_data import make_segmentation

    return make_segmentation(root, n, 160), ["--mask-classes", "4", "--size", "128"]


def _landmarks(root: Path, n: int) -> tuple[Path, list[str]]:
    from benchmarks.fields_data import make_landmarks

    return make_landmarks(root, n, 192), ["--size", "128", "--mode", "letterbox"]


def _boxes(root: Path, n: int) -> tuple[Path, list[str]]:
    from benchmarks.examples.detection import make_shapes

    coco = make_shapes(root, n, 0)
    return coco, ["--images", str(root / "images"), "--size", "64", "--mode", "letterbox"]


def _spectral(root: Path, n: int) -> tuple[Path, list[str]]:
    from benchmarks.spectral_data import make_scene

    side = max(16, round(np.sqrt(2 * n)))  # about half the pixels are labelled
    scene, gt = make_scene(side, side, 100, 16, seed=0)
    root.mkdir(parents=True, exist_ok=True)
    np.save(root / "scene.npy", scene)
    np.save(root / "gt.npy", gt)
    return root / "scene.npy", ["--labels", "gt.npy", "--patch", "9"]


# kind -> (writer of its data, samples, batch size)
KINDS: dict[str, tuple[Callable[[Path, int], tuple[Path, list[str]]], int, int]] = {
    "images": (_images, 600, 64),
    "audio": (_audio, 300, 32),  # WAV 16/24-bit, FLAC, OGG, MP3: tf-native reads a fifth
    "audio-wav": (_audio_wav, 300, 32),  # 16-bit WAV only: the tf.data user's own data
    "masks": (_masks, 300, 32),
    "landmarks": (_landmarks, 300, 32),
    "boxes": (_boxes, 300, 32),
    "spectral": (_spectral, 10000, 64),
}
# kind -> (over, figure, goal) of "precompute / over"
GOALS: dict[str, list[tuple[str, str, float]]] = {
    "audio": [("workers", "samples_per_cpu_s", 10.0), ("tf-native", "samples_per_cpu_s", 10.0)],
    "audio-wav": [
        ("workers", "samples_per_cpu_s", 10.0),
        ("tf-native", "samples_per_cpu_s", 10.0),
    ],
    "masks": [("workers", "samples_per_s", 4.0)],
    "spectral": [("memmap", "samples_per_s", 0.7)],
}


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    p.add_argument("--work", type=Path, help="data and reports (default: a temporary folder)")
    p.add_argument("--scale", type=float, default=1.0, help="samples of each kind x SCALE")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=None, help="default: usable cores")
    p.add_argument("--consumer", default="none")
    p.add_argument("--runner", default="sequential", choices=["ray", "sequential"])
    p.add_argument(
        "--torch-threads", type=int, default=1,
        help="torch intra-op threads (1, as each DataLoader worker and the other suites)",
    )  # fmt: skip
    p.add_argument("--json", type=Path, help="write every kind's report.json here, by kind")
    return p.parse_args(argv)


def _goal_lines(kind: str, report: dict[str, Any]) -> list[str]:
    ratios = {r["to"]: r for r in report.get("ratios", [])}
    out = []
    for over, figure, goal in GOALS.get(kind, []):
        got = (ratios.get(over) or {}).get(figure)
        what = "samples/s" if figure == "samples_per_s" else "samples per CPU second"
        shown = "not measured" if got is None else f"{got:.2f}x"
        verdict = "" if got is None else (" met" if got >= goal else " MISSED")
        out.append(
            f"goal {kind}: precompute / {over} in {what}: {shown} (goal >= {goal:g}x){verdict}"
        )
    return out


def _data(
    write: Callable[[Path, int], tuple[Path, list[str]]], root: Path, n: int
) -> tuple[Path, list[str]]:
    """``write(root, n)`` once; a later run with the same ``--work`` reuses the files.

    So it reuses the store its report folder holds too (the same files: the same source
    fingerprint).
    """
    marker = root / "written.json"
    if marker.is_file():
        path, flags = json.loads(marker.read_text())
        return Path(path), list(flags)
    data, flags = write(root, n)
    marker.write_text(json.dumps([str(data), flags]))
    return data, flags


def run_kind(kind: str, work: Path, a: argparse.Namespace) -> dict[str, Any]:
    """Write ``kind``'s data (once) and run ``benchmarks run`` on it; return its report."""
    from benchmarks.cli import bench

    write, samples, batch = KINDS[kind]
    n = max(8, round(samples * a.scale))
    data, flags = _data(write, work / f"{kind}-data-{n}", n)
    out = work / f"{kind}-report-{n}"
    argv = ["run", "--data", str(data), *flags, "--out", str(out), "--epochs", str(a.epochs),
            "--batch-size", str(batch), "--consumer", a.consumer, "--runner", a.runner,
            "--torch-threads", str(a.torch_threads)]  # fmt: skip
    if a.workers is not None:
        argv += ["--workers", str(a.workers)]
    print(f"\n$ python -m benchmarks {shlex.join(argv)}", flush=True)
    bench.main(args=argv, prog_name="python -m benchmarks", standalone_mode=False)
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    for line in _goal_lines(kind, report):
        print(line)
    return report


def main(argv: list[str] | None = None) -> None:
    """Run every kind asked for and print its table, ratios and goals."""
    a = _args(argv)
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"--kinds: unknown {unknown}; known: {sorted(KINDS)}")
    with tempfile.TemporaryDirectory(prefix="nostall-kinds-") as tmp:
        work = a.work or Path(tmp)
        reports = {kind: run_kind(kind, work, a) for kind in kinds}
    if a.json:
        a.json.write_text(json.dumps(reports, indent=1, default=str))


if __name__ == "__main__":
    main()

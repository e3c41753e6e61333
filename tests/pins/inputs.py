"""Writes the committed inputs of the store pins (``tests/pins/src``), once, on purpose.

The pins hold the bytes of stores built from these exact files, so the files are committed
rather than generated at test time (a new Pillow could encode a generated image differently).
Run ``python -m tests.pins.inputs`` only to add a source; then re-record the pins with
``python -m tests.pins.record`` and say why in the commit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import soundfile as sf

from precompute.sample import make_sample_dataset
from tests.precompute.fielddata import make_keypoints_manifest, make_segmentation

SRC = Path(__file__).with_name("src")


def _audio(root: Path) -> None:
    for label, name in enumerate(["hum", "whistle"]):
        for i in range(3):
            rate = (8000, 11025, 16000)[i]
            t = np.arange(int(rate * (0.4 + 0.2 * i))) / rate
            tone = 0.3 * np.sin(2 * np.pi * (220 * (label + 1) + 40 * i) * t)
            path = root / name / f"{i}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            sf.write(path, tone.astype(np.float32), rate, subtype="PCM_16")


def _cubes(root: Path) -> None:
    rng = np.random.default_rng(5)
    for label, name in enumerate(["corn", "soy"]):
        for i in range(3):
            path = root / name / f"{i}.npy"
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, rng.normal(label, 1, (10, 10, 6)).astype(np.float32))


def main() -> None:
    """Write every pin source under ``tests/pins/src`` (replacing what is there)."""
    shutil.rmtree(SRC, ignore_errors=True)
    make_sample_dataset(SRC / "classes", 36, num_classes=3, size_range=(16, 40), manifest=True)
    make_segmentation(SRC / "seg", 5)
    make_keypoints_manifest(SRC / "points", 5, count=3)
    _audio(SRC / "audio")
    _cubes(SRC / "cubes")
    (SRC / "README.md").write_text(
        "Committed inputs of the store pins (tests/pins). Written by tests/pins/inputs.py.\n"
    )
    print(json.dumps(sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*") if p.is_file())))


if __name__ == "__main__":
    main()

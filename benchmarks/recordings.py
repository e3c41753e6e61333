"""Long recordings for the audio benchmark, and the two things it times in fresh processes.

:func:`write_recording` writes a stereo 16-bit WAV of N minutes (a tone sweeping each second,
plus noise) block by block. :func:`decode_resample` is the reference: one streaming decode of
the whole file, mono downmix and soxr resampling to 16 kHz (no sample kept). :func:`build_windows`
builds its ``--clips all`` store of 1 s windows. Imports stay light (numpy, soundfile, soxr
and precompute inside the functions), so a fresh process's time is the work's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

__all__ = ["build_windows", "decode_resample", "write_recording"]

RATE = 44100  # the recording's rate
STORE_RATE = 16000  # the store's (the audio kind's default)


def write_recording(path: Path, minutes: float, seed: int = 0) -> Path:
    """Write ``minutes`` of 44.1 kHz stereo PCM_16 to ``path`` (one second at a time)."""
    import numpy as np
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    with sf.SoundFile(path, "w", RATE, 2, subtype="PCM_16") as f:
        for second in range(round(minutes * 60)):
            t = (np.arange(RATE) + second * RATE) / RATE
            tone = 0.2 * np.sin(2 * np.pi * (300 + 7 * (second % 50)) * t)
            f.write((tone[:, None] + rng.normal(0, 0.02, (RATE, 2))).astype(np.float32))
    return path


def decode_resample(path: str) -> dict[str, Any]:
    """(In a fresh process) decode ``path`` whole, downmix to mono, resample to 16 kHz."""
    t0 = time.perf_counter()
    import numpy as np
    import soundfile as sf
    import soxr

    imports = time.perf_counter() - t0
    frames = 0
    with sf.SoundFile(path) as f:
        stream = soxr.ResampleStream(f.samplerate, STORE_RATE, 1, dtype="float32", quality="VHQ")
        for block in f.blocks(blocksize=1 << 16, dtype="float32", always_2d=True):
            frames += len(stream.resample_chunk(block.mean(axis=1, keepdims=True)))
        frames += len(stream.resample_chunk(np.zeros((0, 1), np.float32), last=True))
    return {"imports_s": imports, "frames": frames}


def build_windows(src: str, out: str, runner: str) -> dict[str, Any]:
    """(In a fresh process) build ``src``'s store of 1 s windows (``--clips all``)."""
    t0 = time.perf_counter()
    from precompute.cli import spec_from_options
    from precompute.job import build

    imports = time.perf_counter() - t0
    spec = spec_from_options(None, {"clip_seconds": 1.0, "clips": "all"}, src)
    report = build(src, out, spec, progress=False, runner=runner)["report"]
    return {"imports_s": imports, "windows": report["num_samples"]}

"""doctor's codec advice: measured bytes of the user's images, I/O-bound or not."""

from __future__ import annotations

from pathlib import Path

from benchmarks.codecadvice import codec_advice
from precompute.sample import make_image


def _images(root: Path, n: int = 4) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = root / f"{i}.jpg"
        make_image(0, i, i % 4, (80, 60)).save(path, quality=92)
        paths.append(path)
    return paths


def test_slow_storage_is_told_to_store_jpeg(tmp_path: Path) -> None:
    lines = codec_advice(_images(tmp_path), 64, read_mb_s=150.0, serve_per_s=50_000.0, gpu=False)
    assert "reads at most 12207 samples/s" in lines[0]  # 150e6 / (64 * 64 * 3)
    assert "raw is I/O-bound here" in lines[1] and "--codec image=jpeg:90" in lines[1]
    assert "KiB/sample on your images" in lines[1] and "on the CPU" in lines[1]


def test_fast_storage_keeps_the_store_raw(tmp_path: Path) -> None:
    lines = codec_advice(_images(tmp_path), 64, read_mb_s=3000.0, serve_per_s=5_000.0, gpu=True)
    assert lines[1].startswith("  raw is not I/O-bound here")
    assert len(lines) == 2

"""The spectral benchmark runs end to end on a tiny scene and prints every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_spectral import main


@pytest.mark.slow
def test_the_spectral_benchmark_prints_rates_ratios_and_rss(
    ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--height", "20", "--bands", "6", "--runs", "1", "--work", str(tmp_path)])
    out = capsys.readouterr().out
    for name in ("store raw", "store raw mmap", "store raw ram", "store aug", "memmap", "np.load"):
        assert f"{name:14s} " in out
    assert "ratio store raw / memmap: " in out and "ratio store raw / np.load: " in out
    assert "ratio store raw mmap / memmap: " in out and "ratio store raw ram / memmap: " in out
    for io in ("pread", "auto", "ram"):
        assert f"loader peak RSS, io='{io}' " in out

"""The spectral benchmark runs end to end on a tiny scene and prints every figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.suite.spectral import STORE_ROWS, main
from tests.benchmarks.figures import assert_positive, figure_after


@pytest.mark.ray
@pytest.mark.slow
def test_the_spectral_benchmark_prints_rates_ratios_and_rss(
    ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--height", "20", "--bands", "6", "--runs", "1", "--work", str(tmp_path)])
    out = capsys.readouterr().out
    for name in (*STORE_ROWS, "memmap", "np.load"):
        assert_positive(out, name, "patches/s")
    for name in STORE_ROWS:  # both rates are positive (above); printed to 2 decimals, a ratio
        for reference in ("memmap", "np.load"):  # under 0.005 on a loaded machine reads 0.00
            assert re.search(rf"ratio {name} / {reference}: [0-9]+\.[0-9]{{2}}x", out), out
    for io in ("pread", "auto", "ram"):
        for n in (192, 900):  # patches served of the scene, then all of one twice its side
            assert assert_positive(out, f"loader peak RSS, io='{io}', {n} patches", "peak_rss_mib")
        line = next(ln for ln in out.splitlines() if f"loader peak RSS, io='{io}' (" in ln)
        figure_after(line, "900 / 192 patches: ")

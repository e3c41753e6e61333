"""Smoke run of ``benchmarks.suite.loader`` section 6 (choosing samples) at a toy size."""

from __future__ import annotations

from benchmarks.suite.loader import bench as loader
from benchmarks.suite.loader import choosing
from tests.benchmarks.figures import assert_positive, figure_after


def test_section_6_times_a_subset_weights_and_a_mixture_against_plain(capsys, tmp_path) -> None:
    argv = ["--only", "6", "--samples", "128", "--size", "16", "--batch", "16", "--runs", "1"]
    loader.main([*argv, "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    for row in (choosing.PLAIN, *choosing.CHOSEN):
        assert_positive(out, row, "samples/s")
        assert_positive(out, row, "CPU ms/sample")
    for row in choosing.CHOSEN:
        assert figure_after(out, f"-> {row} / plain samples/s: ") > 0
    assert "subset of 10%: " in out and "chunk rows read per sample" in out
    assert "balance='label' (5% rare), buffer_chunks=8: rare share per batch std" in out

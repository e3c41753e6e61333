"""Smoke runs of the loader and augment benchmarks at toy sizes: every row is produced."""

from __future__ import annotations

import sys

from benchmarks import bench_augment, bench_loader


def test_bench_loader_reports_the_contiguous_memmap_reference(capsys, tmp_path) -> None:
    bench_loader.main(
        [
            "--only",
            "1",
            "--samples",
            "96",
            "--size",
            "16",
            "--batch",
            "16",
            "--runs",
            "1",
            "--workdir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert bench_loader.CONTIGUOUS in out and bench_loader.SAME_ORDER in out
    assert "contiguous" in out.split("-> StoreLoader (no augment, device=cpu)")[1]
    assert f"-> {bench_loader.MAPPED_WHOLE} / memmap" in out


def test_bench_augment_times_every_output_format(capsys, monkeypatch) -> None:
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "bench_augment",
            "--images",
            "32",
            "--batch",
            "8",
            "--size",
            "16",
            "--store-size",
            "24",
            "--runs",
            "1",
            "--no-grid",
        ],
    )
    bench_augment.main()
    out = capsys.readouterr().out
    for name in ("float32 channels_last", "bfloat16", "bfloat16 channels_last"):
        assert f"augment fast, 2 threads, {name} " in out
    assert "ratios vs StoreLoader + augment fast, 2 threads, float32 planar" in out
    same = out.split("bfloat16 vs float32 of the same memory format")[1]
    assert "bfloat16 channels_last" in same and "x" in same

"""The build report and ``inspect`` name the source as given: a manifest file, not its folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.cli import main
from precompute.pipeline.outputs import source_name
from tests.precompute.conftest import jpeg_bytes


def test_a_manifest_build_names_the_manifest_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(2):
        (tmp_path / f"{i}.jpg").write_bytes(jpeg_bytes(seed=i))
    (tmp_path / "train.csv").write_text("path,label\n0.jpg,cat\n1.jpg,dog\n")
    store = tmp_path / "s"
    main(["build", str(tmp_path / "train.csv"), "--out", str(store), "--size", "8",
          "--runner", "sequential", "--quiet"])  # fmt: skip
    capsys.readouterr()
    main(["inspect", str(store)])
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("source")]
    assert len(shown) == 1 and shown[0].split()[1] == str(tmp_path / "train.csv")


def test_source_names_are_absolute_paths_or_urls(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert source_name("m.csv") == str(tmp_path / "m.csv")
    assert source_name("file://" + str(tmp_path / "d") + "/") == str(tmp_path / "d")
    assert source_name("s3://bucket/raw/") == "s3://bucket/raw"

"""The detection example runs end to end on CPU and beats its own mean-box baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.examples import detection
from precompute.format.layout import open_store_info


@pytest.mark.slow
def test_the_detector_beats_the_mean_box_of_each_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = detection.main(["--quick", "--work", str(tmp_path)])
    assert len(history) == 4
    model, baseline = history[-1]
    assert 0 < baseline < 0.3 and model > 2 * baseline, history
    info = open_store_info(tmp_path / "train.zarr")
    boxes = next(f for f in info.spec.fields if f.kind == "boxes")
    assert boxes.options["classes"] == 3 and boxes.options["images"] == str(
        tmp_path / "train" / "images"
    )
    doc = json.loads((tmp_path / "train" / "instances.json").read_text())
    assert info.num_valid == len(doc["images"]) == 96
    assert boxes.options["max_boxes"] == 3  # 1 to 3 shapes per scene
    assert "mean-box baseline" in capsys.readouterr().out
    # run again in the same folder: the data are written again (new mtimes) and the stores,
    # fingerprinted by content, are reused (it was "holds a complete store of another ...")
    built = (tmp_path / "train.zarr" / "zarr.json").read_bytes()  # its report: build times
    assert detection.main(["--quick", "--work", str(tmp_path), "--epochs", "1"])
    assert (tmp_path / "train.zarr" / "zarr.json").read_bytes() == built

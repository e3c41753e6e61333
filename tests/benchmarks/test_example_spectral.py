"""The README's spectral example runs end to end and learns the synthetic scene."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.examples.spectral import main


@pytest.mark.ray
@pytest.mark.slow
def test_the_spectral_example_prints_losses_and_an_accuracy_above_chance(
    ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--work", str(tmp_path), "--epochs", "3"])
    out = capsys.readouterr().out
    losses = [float(x) for x in re.findall(r"epoch \d: train loss ([0-9.]+)", out)]
    assert len(losses) == 3 and losses[-1] < losses[0]
    accuracy, chance = (
        float(x) for x in re.findall(r"accuracy ([0-9.]+) \(chance ([0-9.]+)", out)[0]
    )
    assert accuracy > 2 * chance
    assert (tmp_path / "train" / "zarr.json").exists() and (
        tmp_path / "test" / "zarr.json"
    ).exists()

"""A coded store's ratio to raw is taken over a sample decoded, not over padded chunks.

The vision review: ``precompute inspect`` took raw bytes per sample as the raw store's shard
files over the samples, so a store whose sample count is not a multiple of the chunk counted
its last chunk's padding as raw (40 samples in chunks of 32: raw 1.6 times too large, a JPEG
store "43.6x smaller" where it is 27x). Raw is the sample's decoded bytes (shape x itemsize);
stored is the array's files over the samples that exist; the text, ``--json`` and the codec
benchmark give the same figures (one function: ``storecheck.array_bytes``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.suite.codecs.bench import _image_bytes
from precompute.cli import main
from precompute.format.summary import store_attributes, store_summary
from precompute.sample import make_sample_dataset


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    main([*args])
    return capsys.readouterr().out


@pytest.mark.parametrize("codec", ["jpeg:90", "zstd:3"])
@pytest.mark.parametrize("channels", [3, 1])
def test_the_ratio_is_over_a_decoded_sample_whatever_the_sample_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str, channels: int
) -> None:
    src = make_sample_dataset(tmp_path / "src", 10, size_range=(40, 60))
    out = tmp_path / "s.zarr"
    try:  # 10 samples in chunks of 4: the last chunk holds 2 and 2 slots of padding
        main(["build", str(src), "--out", str(out), "--size", "32", "--chunk-samples", "4",
              "--channels", str(channels), "--codec", f"image={codec}", "--runner",
              "sequential", "--quiet"])  # fmt: skip
    except SystemExit as exc:
        assert not exc.code
    files = sum(p.stat().st_size for p in (out / "image" / "c").rglob("*") if p.is_file())
    stored, raw = files / 10, 32 * 32 * channels  # the samples that exist; one decoded
    figures = store_attributes(out)["storage"]["image"]
    assert figures["raw_bytes_per_sample"] == raw
    assert figures["stored_bytes_per_sample"] == pytest.approx(stored)
    assert figures["ratio"] == pytest.approx(raw / stored)
    assert figures["codec"].startswith(codec)
    line = f"{raw / stored:.1f}x smaller than raw ({raw / 1024:.1f} KiB)"
    assert line in store_summary(out)
    assert line in _cli(capsys, "inspect", str(out))  # the command, as a user runs it
    said = json.loads(_cli(capsys, "inspect", "--json", str(out)))["storage"]["image"]
    assert said == pytest.approx(figures)
    bench = _image_bytes(out)  # the codec benchmark's figures: the same
    assert (bench.raw, bench.stored) == (raw, pytest.approx(stored))


def test_a_wxh_class_folder_store_reads_its_frame_as_height_x_width(tmp_path: Path) -> None:
    """A class-folder store (one image array) of --size 48x40 is 40 rows of 48 pixels: inspect
    said ``48x40x48x40x3`` (the frame's text twice)."""
    src = make_sample_dataset(tmp_path / "src", 6, size_range=(40, 60))
    out = tmp_path / "s.zarr"
    try:
        main(["build", str(src), "--out", str(out), "--size", "48x40", "--runner",
              "sequential", "--quiet"])  # fmt: skip
    except SystemExit as exc:
        assert not exc.code
    lines = store_summary(out).splitlines()
    assert any(line.startswith("image      40x48x3 uint8, mode ") for line in lines), lines

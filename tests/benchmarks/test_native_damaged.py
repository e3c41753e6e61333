"""A damaged file among the raw files: the native strategies leave it out, or name it.

A 16-bit WAV whose data chunk is shorter than its header says (a download cut short) is
decoded by soundfile, so the store and the ``workers`` have it, but ``tf.audio.decode_wav``
refuses it: ``tf-native`` probes every WAV before its timed epochs and leaves such files out,
counted and named with TensorFlow's own error, as it leaves out the formats it cannot decode.
A file damaged after that names itself in the one-line failure reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.audio_data import make_audio_dataset
from benchmarks.errors import BenchmarkError, one_line
from benchmarks.harness.loop import _failed
from benchmarks.harness.strategies import RunConfig, get_strategy

tf = pytest.importorskip("tensorflow")
SHORT = "Data too short when trying to read string"


def truncate(path: Path) -> None:
    """Cut a WAV's data chunk in half, its header unchanged (as the speech review did)."""
    data = path.read_bytes()
    path.write_bytes(data[: 44 + (len(data) - 44) // 2])


@pytest.fixture
def clips(tmp_path: Path) -> tuple[str, Any]:
    from precompute.cli import spec_from_options

    root = make_audio_dataset(tmp_path / "clips", 8, 2, 0, (0.8, 1.2), formats=(0,))  # 16-bit
    spec = spec_from_options(None, {"size": 64, "clip_seconds": 1.0, "features": "logmel"},
                             str(root))  # fmt: skip
    return str(root), spec


def _open(data: str, spec: Any) -> Any:
    cfg = RunConfig(data, None, 2, 0, 64, 0, "cpu", spec=spec)
    return get_strategy("tf-native").open(cfg)


def test_a_truncated_wav_is_left_out_counted_and_named_with_tensorflows_error(clips):
    data, spec = clips
    bad = sorted(Path(data).rglob("*.wav"))[3]
    truncate(bad)
    source = _open(data, spec)
    try:
        batches = list(source.epoch(0))
    finally:
        source.close()
    assert source.num_samples == 7 and len(batches) == 3  # 7 files, batches of 2
    assert source.note == (
        f"served 7 of 8 files: tf.audio.decode_wav cannot decode 1 WAV/PCM_16: "
        f"InvalidArgumentError: {SHORT} ({bad.name})"
    )


def test_a_file_damaged_after_the_probe_fails_the_row_in_one_line_naming_it(clips):
    data, spec = clips
    source = _open(data, spec)  # every file probed whole
    bad = sorted(Path(data).rglob("*.wav"))[5]
    truncate(bad)
    try:
        with pytest.raises(BenchmarkError) as caught:
            list(source.epoch(0))
    finally:
        source.close()
    reason = _failed("tf-native", "run", caught.value)["reason"]
    assert reason == f"run: BenchmarkError: {bad}: InvalidArgumentError: {SHORT}"
    raw = caught.value.__cause__  # TensorFlow's own error, as the review's row showed it
    assert "[[{{node DecodeWav}}]]" in str(raw) or "DecodeWav" in str(raw)
    assert one_line(raw) == f"InvalidArgumentError: {SHORT}"


def test_an_image_damaged_after_setup_names_itself_too(tiny_data):
    import shutil

    from precompute.spec import BuildSpec

    data = shutil.copytree(tiny_data, Path(str(tiny_data) + "-cut"))
    cfg = RunConfig(str(data), None, 8, 0, 24, 0, "cpu", spec=BuildSpec(size=24))
    source = get_strategy("tf-native").open(cfg)
    bad = sorted(data.rglob("*.png"))[0]
    bad.write_bytes(bad.read_bytes()[:200])  # cut short: TensorFlow says "Invalid PNG data"
    try:
        with pytest.raises(BenchmarkError, match=rf"^{bad}: InvalidArgumentError: Invalid PNG"):
            list(source.epoch(0))
    finally:
        source.close()
        shutil.rmtree(data)

"""`precompute inspect` names the inputs kept cut short (`report.truncated`), not only --json."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import soundfile as sf

from precompute.cli import main
from precompute.fields import FieldSpec
from precompute.format.summary import store_summary
from precompute.job import build
from precompute.spec import BuildSpec
from tests.precompute.audio_bytes import tone

RATE = 16000


def _wav(seconds: float) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, tone(440, RATE, seconds), RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def test_inspect_lists_the_inputs_kept_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src" / "k"
    src.mkdir(parents=True)
    whole = _wav(0.3)
    (src / "good.wav").write_bytes(whole)
    (src / "cutdata.wav").write_bytes(whole[: len(whole) - 2000])  # the header says more
    fields = (FieldSpec("audio", "audio", {"clip_seconds": 0.5}), FieldSpec("label", "label"))
    spec = BuildSpec(size=8, shard_samples=8, chunk_samples=4, fields=fields)
    store = tmp_path / "s.zarr"
    attrs = build(str(tmp_path / "src"), str(store), spec, progress=False, runner="sequential")
    assert attrs["report"]["truncated"] == ["k/cutdata.wav"]
    line = "truncated  k/cutdata.wav: its data ended before its header said; kept with what was"
    assert line in store_summary(store)
    main(["inspect", str(store)])
    assert line in capsys.readouterr().out
    assert not [ln for ln in store_summary(store).splitlines() if "good.wav" in ln]

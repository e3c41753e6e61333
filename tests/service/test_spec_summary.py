"""``cache ls`` and the status page describe a store by its fields' kinds.

An audio store was summarised as ``224px center-crop x1 seed=0``: the v1 image spec's size,
mode and variants, none of which an audio clip has. Each field now says what it is, as its
kind describes it (``Kind.describe``); the build's mode and variants show only where a field
lives in the image frame.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from precompute.format.summary import spec_summary
from precompute.job import build
from precompute.sample import make_sample_dataset
from precompute.spec import BuildSpec
from service import Cache
from service.cli import cache as cache_cli
from tests.precompute.audio_bytes import encode, tone
from tests.precompute.userpkg import make_package

AUDIO = {
    "fields": [
        {"name": "audio", "kind": "audio",
         "options": {"clip_seconds": 0.5, "representation": "logmel", "n_mels": 40}},
        {"name": "label", "kind": "label"},
    ],
}  # fmt: skip


def _sequential(request) -> None:
    build(str(request.source), str(request.out), request.spec, progress=False,
          runner="sequential")  # fmt: skip


def test_cache_ls_describes_an_audio_store_by_its_fields(tmp_path: Path) -> None:
    for i, name in enumerate(("down", "up")):
        (tmp_path / "clips" / name).mkdir(parents=True)
        wav = encode(tone(300 + 200 * i, 8000, 0.4), 8000, "wav16")
        (tmp_path / "clips" / name / "a.wav").write_bytes(wav)
    cache = Cache(tmp_path / "cache", builder=_sequential)
    cache.get_or_build(tmp_path / "clips", AUDIO)
    out = CliRunner().invoke(cache_cli, ["--root", str(tmp_path / "cache"), "ls"]).output
    assert "audio 0.5 s 16 kHz logmel 40 mels, label; seed 0" in out, out
    assert " px" not in out and "center-crop" not in out


def test_each_kind_describes_its_field() -> None:
    assert spec_summary(BuildSpec(size=16).to_dict()) == "16 px center-crop x1 seed 0"  # v1
    seg = BuildSpec.from_dict({
        "size": 64, "mode": "letterbox",
        "fields": [{"name": "image", "kind": "image", "options": {"channels": 1}},
                   {"name": "mask", "kind": "mask", "options": {"classes": 4}}],
    })  # fmt: skip
    assert spec_summary(seg.to_dict()) == "image 64 px grey, mask 4 classes; letterbox x1; seed 0"
    cubes = BuildSpec.from_dict({
        "size": 11, "seed": 2,
        "fields": [{"name": "image", "kind": "array",
                    "options": {"shape": [11, 11, 200], "dtype": "float32"}},
                   {"name": "label", "kind": "label"}],
    })  # fmt: skip
    assert spec_summary(cubes.to_dict()).startswith("array 11x11x200 float32, label; ")
    points = BuildSpec.from_dict({
        "size": 32,
        "fields": [{"name": "image", "kind": "image"},
                   {"name": "kp", "kind": "keypoints",
                    "options": {"points": 5, "flip_pairs": [[0, 1]]}}],
    })  # fmt: skip
    assert spec_summary(points.to_dict()).startswith("image 32 px, keypoints 5 points with flip")
    unknown = {"seed": 3, "fields": [{"name": "x", "kind": "not_installed"}]}
    assert spec_summary(unknown) == "fields x; seed 3"  # a plugin's kind that is not here


def test_cache_ls_tells_stores_apart_that_differ_only_in_their_transform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    name = make_package(tmp_path / "code")
    src = make_sample_dataset(tmp_path / "src", 4, 2, size_range=(20, 30))
    cache = Cache(tmp_path / "cache", builder=_sequential)
    for top in (200, 100):
        transform = {"name": f"{name}.ops:invert", "args": {"top": top}, "at": "stored"}
        cache.get_or_build(src, {"size": 16, "transform": transform})
    out = CliRunner().invoke(cache_cli, ["--root", str(tmp_path / "cache"), "ls"]).output
    rows = [line for line in out.splitlines() if "16 px center-crop" in line]
    assert len(rows) == 2, out
    assert f"transform {name}.ops:invert at stored, top=200, " in rows[0] + rows[1]
    assert f"transform {name}.ops:invert at stored, top=100, " in rows[0] + rows[1]
    long = {"name": "m.x:f", "args": {"table": "t" * 80}, "fingerprint": "ab" * 32}
    line = spec_summary({"size": 16, "transform": long})
    shown = "table='" + "t" * 30 + "..."  # the arguments cut to 40 characters
    assert line == f"16 px center-crop x1 seed 0; transform m.x:f at stored, {shown}, abababab"

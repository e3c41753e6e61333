"""Real builds of audio sources: class folders and manifests of WAV/FLAC/OGG/MP3 (issue 15)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import zarr
from PIL import Image

from benchmarks.audio_data import make_audio_dataset
from precompute.audio.features import logmel, to_int16
from precompute.audio.source import _windows, is_audio_source, list_audio_source
from precompute.cli import main
from precompute.errors import PrecomputeError, SourceError, SpecError
from precompute.fields import FieldSpec
from precompute.format.verify import verify_store
from precompute.job import build
from precompute.sources.resolve import infer_fields, list_build_source
from precompute.spec import BuildSpec
from tests.precompute.audio_bytes import encode, tone, with_channels, with_data_size

RATE = 16000


def _spec(**audio: object) -> BuildSpec:
    opts = {"clip_seconds": 0.5, **audio}
    fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
    return BuildSpec(size=8, shard_samples=8, chunk_samples=4, seed=3, fields=fields)


def _read(store: Path) -> dict[str, np.ndarray]:
    names = [p.parent.name for p in store.glob("*/zarr.json")]
    return {n: np.asarray(zarr.open_array(str(store / n), mode="r")[:]) for n in names}


def _report(store: Path) -> dict[str, object]:
    attrs = json.loads((store / "zarr.json").read_text())["attributes"]["nostall"]
    return dict(attrs["report"])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 clips of 0.3-1.5 s in 3 class folders, every format, rates 8-48 kHz, 1-2 channels."""
    return make_audio_dataset(tmp_path_factory.mktemp("audio") / "ds", 12, 3, 1, (0.3, 1.5))


def test_class_folders_are_an_audio_source(mixed: Path, tmp_path: Path) -> None:
    assert is_audio_source(str(mixed))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.png").write_bytes(b"")
    assert not is_audio_source(str(tmp_path))
    with pytest.raises(SpecError, match="--clip-seconds"):
        infer_fields(str(mixed))
    fields = infer_fields(str(mixed), {"audio": {"clip_seconds": 1.0}})
    assert [(f.name, f.kind) for f in fields] == [("audio", "audio"), ("label", "label")]


def test_cli_without_clip_seconds_names_the_flag(mixed: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["build", str(mixed), "--out", str(tmp_path / "s")])
    assert exc.value.code == 2
    assert "give --clip-seconds T" in capsys.readouterr().err


@pytest.mark.ray
def test_logmel_build_stores_features_length_start_label(
    ray_local: None, mixed: Path, tmp_path: Path
) -> None:
    attrs = build(str(mixed), str(tmp_path / "s"), _spec(representation="logmel", n_mels=32),
                  progress=False)  # fmt: skip
    got = _read(tmp_path / "s")
    assert got["audio"].shape == (12, 32, 51) and got["audio"].dtype == np.float16
    assert attrs["num_valid"] == 12 and verify_store(str(tmp_path / "s")) == []
    assert set(got) >= {"audio.length", "audio.start", "audio.truncated", "label", "key"}
    for j, key in enumerate(got["key"]):
        if not key:
            continue
        assert got["label"][j] == int(key.split("/")[0][-2:])
        wave, rate = sf.read(str(mixed / key), dtype="float32", always_2d=True)
        n = round(wave.shape[0] * RATE / rate)
        assert got["audio.length"][j] == -(-min(n, 8000) // 160)
        assert got["audio.start"][j] == pytest.approx(max(n - 8000, 0) // 2 / RATE, abs=1e-4)


@pytest.mark.ray
def test_waveform_values_are_the_decoded_clip(ray_local: None, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "beep").mkdir(parents=True)
    samples = tone(440, RATE, 0.25)
    (src / "beep" / "a.wav").write_bytes(encode(samples, RATE, "wav16"))
    build(str(src), str(tmp_path / "s"), _spec(), progress=False)
    got = _read(tmp_path / "s")
    j = list(got["key"]).index("beep/a.wav")
    want = np.zeros(8000, np.int16)
    want[:4000] = to_int16(sf.read(str(src / "beep" / "a.wav"), dtype="float32")[0])
    np.testing.assert_array_equal(got["audio"][j], want)
    assert got["audio.length"][j] == 4000 and got["audio"].dtype == np.int16


def test_feature_parameters_change_the_spec_hash(mixed: Path) -> None:
    a, b = _spec(representation="logmel"), _spec(representation="logmel", n_mels=40)
    assert a.digest() != b.digest()


def _long(tmp_path: Path) -> Path:
    src = tmp_path / "long"
    (src / "x").mkdir(parents=True)
    (src / "x" / "a.flac").write_bytes(encode(tone(300, 22050, 1.2), 22050, "flac"))
    (src / "x" / "b.wav").write_bytes(encode(tone(500, RATE, 0.4), RATE, "wav16"))
    return src


@pytest.mark.ray
def test_clips_all_cuts_consecutive_windows(ray_local: None, tmp_path: Path) -> None:
    src, spec = _long(tmp_path), _spec(clips="all", hop_seconds=0.25)
    build(str(src), str(tmp_path / "s"), spec, progress=False)
    got = _read(tmp_path / "s")
    cols = zip(got["key"], got["audio.start"], got["audio.length"], strict=True)
    rows = sorted((str(k), float(s), int(n)) for k, s, n in cols if k)
    assert rows == [
        ("x/a.flac@0.000", 0.0, 8000),
        ("x/a.flac@0.250", 0.25, 8000),
        ("x/a.flac@0.500", 0.5, 8000),
        ("x/a.flac@0.750", 0.75, 7200),
        ("x/b.wav@0.000", 0.0, 6400),
    ]
    whole = np.zeros(8000, np.int16)
    whole[:6400] = to_int16(sf.read(str(src / "x" / "b.wav"), dtype="float32")[0])
    np.testing.assert_array_equal(got["audio"][list(got["key"]).index("x/b.wav@0.000")], whole)
    build(str(src), str(tmp_path / "t"), spec, progress=False)
    again = _read(tmp_path / "t")
    for name in ("audio", "key", "audio.start", "label"):
        np.testing.assert_array_equal(got[name], again[name])


@pytest.mark.ray
def test_manifest_segments_and_names(ray_local: None, tmp_path: Path) -> None:
    src = _long(tmp_path)
    (src / "m.csv").write_text("path,label,start,end\nx/a.flac,dog,0.2,0.6\nx/b.wav,cat,,\n")
    build(str(src / "m.csv"), str(tmp_path / "s"), _spec(), progress=False)
    got = _read(tmp_path / "s")
    j = list(got["key"]).index("x/a.flac")
    assert got["label"][j] == 1 and got["audio.length"][j] == 6400
    assert got["audio.start"][j] == pytest.approx(0.2)
    rs = json.loads((tmp_path / "s" / "zarr.json").read_text())["attributes"]["nostall"]
    assert rs["report"]["classes"] == {"label": ["cat", "dog"]}


def _wav(samples: np.ndarray, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, RATE, format="WAV", subtype=subtype)
    return buf.getvalue()


def _hostile(root: Path) -> dict[str, str]:
    """A class folder of one good file and every hostile kind; -> name: expected reason."""
    d = root / "k"
    d.mkdir(parents=True)
    good = _wav(tone(440, RATE, 0.3))
    nan = tone(440, RATE, 0.3)
    nan[100] = np.nan
    files = {
        "good.wav": good,
        "empty.wav": b"",
        "text.wav": b"this is not audio, just text\n" * 4,
        "cuthead.wav": good[:30],
        "nan.wav": _wav(nan, "FLOAT"),
        "zero.wav": _wav(np.zeros((0, 1), np.float32)),
        "huge.wav": with_data_size(good, 0xFFFFFFF0),
        "channels.wav": with_channels(good, 200),
        "cutdata.wav": good[: len(good) - 2000],
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return {
        "k/empty.wav": "empty file",
        "k/text.wav": "not a readable audio file",
        "k/cuthead.wav": "not a readable audio file",
        "k/nan.wav": "NaN or inf sample",
        "k/zero.wav": "zero frames",
        "k/huge.wav": "over the budget",
        "k/channels.wav": "channels",
    }


@pytest.mark.ray
def test_hostile_audio_is_skipped_with_reasons(ray_local: None, tmp_path: Path) -> None:
    want = _hostile(tmp_path / "src")
    spec = dataclasses.replace(_spec(), on_error="skip")
    attrs = build(str(tmp_path / "src"), str(tmp_path / "s"), spec, progress=False)
    report = attrs["report"]
    reasons = {s["key"]: s["reason"] for s in report["skipped"]}
    assert sorted(reasons) == sorted(want)
    for key, part in want.items():
        assert part in reasons[key], (key, reasons[key])
    assert report["truncated"] == ["k/cutdata.wav"] and attrs["num_valid"] == 2
    got = _read(tmp_path / "s")
    j = list(got["key"]).index("k/cutdata.wav")
    assert got["audio.truncated"][j] == 1 and 0 < got["audio.length"][j] < 4800


@pytest.mark.ray
def test_hostile_audio_stops_a_raise_build_naming_the_file(ray_local: None, tmp_path: Path) -> None:
    (tmp_path / "src" / "k").mkdir(parents=True)
    (tmp_path / "src" / "k" / "text.wav").write_bytes(b"not audio at all\n" * 8)
    with pytest.raises(PrecomputeError, match=r"k/text\.wav"):
        build(str(tmp_path / "src"), str(tmp_path / "s"), _spec(), progress=False)


def test_clips_all_lists_unreadable_headers_per_policy(tmp_path: Path) -> None:
    want = _hostile(tmp_path / "src")
    fields = _spec(clips="all").fields
    source = list_audio_source(str(tmp_path / "src"), fields, "skip")
    skipped = dict(source.skipped)
    for key in ("k/empty.wav", "k/text.wav", "k/cuthead.wav"):
        assert key in skipped and key in want
    with pytest.raises(SourceError, match=r"k/(cuthead|empty)\.wav"):
        list_audio_source(str(tmp_path / "src"), fields, "raise")


@pytest.mark.ray
def test_logmel_matches_the_feature_function(ray_local: None, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "c").mkdir(parents=True)
    samples = tone(1000, RATE, 0.5)
    (src / "c" / "a.wav").write_bytes(encode(samples, RATE, "wavfloat"))
    build(str(src), str(tmp_path / "s"), _spec(representation="logmel"), progress=False)
    got = _read(tmp_path / "s")
    j = list(got["key"]).index("c/a.wav")
    want = logmel(samples[:, 0], RATE).astype(np.float16)
    np.testing.assert_array_equal(got["audio"][j], want)


def test_manifests_of_audio_paths_are_audio_sources(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("path,label,start,end\nx/a.flac,dog,0.2,0.6\n")
    (tmp_path / "a.jsonl").write_text('{"path": "x/a.MP3", "label": 1}\n')
    (tmp_path / "i.csv").write_text("path,label\nx/a.jpg,1\n")
    (tmp_path / "e.csv").write_text("")
    found = {n: is_audio_source(str(tmp_path / n)) for n in ("a.csv", "a.jsonl", "i.csv", "e.csv")}
    assert found == {"a.csv": True, "a.jsonl": True, "i.csv": False, "e.csv": False}


def test_a_bad_segment_cell_is_a_per_line_error(tmp_path: Path) -> None:
    src = _long(tmp_path)
    (src / "m.csv").write_text("path,label,start\nx/a.flac,1,soon\nx/b.wav,0,\n")
    fields = _spec().fields
    with pytest.raises(SourceError, match=r"line 2: start must be a number of seconds"):
        list_audio_source(str(src / "m.csv"), fields, "raise")
    source = list_audio_source(str(src / "m.csv"), fields, "skip")
    assert [it.key for it in source.items] == ["x/b.wav"]
    assert source.skipped == (
        ("x/a.flac", "line 2: start must be a number of seconds, got 'soon'"),
    )


def test_cli_feature_flags_set_field_options_and_the_hash(mixed: Path) -> None:
    from precompute.cli import spec_from_options

    def spec(**flags: object) -> BuildSpec:
        base = {"clip_seconds": 1.0, "features": "logmel", "clips": "all", "hop_seconds": 0.5}
        return spec_from_options(None, {**base, **flags}, str(mixed))

    a, b = spec(n_mels=64), spec(n_mels=40)
    opts = dict(b.fields[0].options)
    assert (opts["representation"], opts["n_mels"], opts["clips"], opts["hop_seconds"]) == (
        "logmel", 40, "all", 0.5,
    )  # fmt: skip
    assert a.digest() != b.digest()
    assert spec(channels="2").fields[0].options["channels"] == 2


@pytest.mark.ray
def test_kept_channels_are_an_axis(ray_local: None, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "c").mkdir(parents=True)
    stereo = np.concatenate([tone(440, RATE, 0.25), tone(880, RATE, 0.25)], axis=1)
    (src / "c" / "s.wav").write_bytes(encode(stereo, RATE, "wav16"))
    (src / "c" / "m.flac").write_bytes(encode(tone(440, RATE, 0.25), RATE, "flac"))
    build(str(src), str(tmp_path / "s"), _spec(channels=2), progress=False)
    got = _read(tmp_path / "s")
    assert got["audio"].shape == (2, 2, 8000)
    for j, key in enumerate(got["key"]):
        decoded = sf.read(str(src / key), dtype="float32", always_2d=True)[0]
        want = to_int16(decoded.T if decoded.shape[1] == 2 else np.repeat(decoded.T, 2, 0))
        np.testing.assert_array_equal(got["audio"][j][:, :4000], want)


def test_class_folders_named_by_numbers_or_mixed_names_label_like_v1_folders(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    for name in ("0", "10", "2", "cat"):
        (src / name).mkdir(parents=True)
        (src / name / "a.wav").write_bytes(encode(tone(440, RATE, 0.2), RATE, "wav16"))
    source = list_audio_source(str(src), _spec().fields, "raise")
    names = dict(source.classes)["label"]
    assert names == ("0", "10", "2", "cat")  # sorted folder names, as class folders give
    for item in source.items:
        assert names[item.value("label")] == item.file("audio").split("/")[0]


def test_a_folder_of_recordings_with_an_image_is_refused_naming_both(tmp_path: Path) -> None:
    """Cover art beside recordings: never a store of the one image (the audio left out)."""
    src = _long(tmp_path)
    Image.new("RGB", (8, 8)).save(src / "x" / "cover.png")
    with pytest.raises(SourceError, match=r"mixes image files \(1, e\.g\. x/cover\.png\) and "
                       r"audio files \(2, e\.g\. x/a\.flac\)"):  # fmt: skip
        list_build_source(str(src), BuildSpec(size=8))


def test_windows_that_reach_the_end_are_the_last_whatever_the_float_sums() -> None:
    # 3 * 0.3 + 0.4 is 1.2999999999999998 in floats: the window at 0.9 already reaches 1.3
    assert _windows(1.3, 0.4, 0.3, 0.0, None)[-1] == (0.9, 1.3)
    assert len(_windows(1.3, 0.4, 0.3, 0.0, None)) == 4


def test_a_hop_under_a_millisecond_is_refused() -> None:
    with pytest.raises(SpecError, match=r"hop_seconds must be at least 0\.001 seconds, got 1e-05"):
        _spec(clips="all", hop_seconds=0.00001)


def test_a_recording_listed_twice_is_named(tmp_path: Path) -> None:
    src = _long(tmp_path)
    (src / "m.csv").write_text("path,label\nx/a.flac,dog\nx/b.wav,cat\nx/a.flac,cat\n")
    with pytest.raises(SourceError, match=r"m\.csv: 'x/a\.flac' is listed twice"):
        list_audio_source(str(src / "m.csv"), _spec().fields, "raise")
    (src / "m.csv").write_text(f"path,label\nx/a.flac,dog\n{src}/x/./a.flac,cat\n")
    with pytest.raises(SourceError, match=r"x/\./a\.flac' is listed twice \(as 'x/a\.flac'\)"):
        list_audio_source(str(src / "m.csv"), _spec().fields, "raise")


def test_audio_manifest_labels_are_read_as_every_manifests(tmp_path: Path) -> None:
    """Integers (7, " 7"), names; ``1.0`` and ``-1`` are line errors, not class names."""
    src = _long(tmp_path)
    (src / "m.csv").write_text("path,label\nx/a.flac, 7\nx/b.wav,2\n")
    source = list_audio_source(str(src / "m.csv"), _spec().fields, "raise")
    assert sorted(item.value("label") for item in source.items) == [2, 7]
    assert dict(source.classes).get("label", ()) == ()
    for bad, reason in (("1.0", "is a number but not an integer"), ("-1", "outside 0..")):
        (src / "m.csv").write_text(f"path,label\nx/a.flac,{bad}\nx/b.wav,2\n")
        with pytest.raises(SourceError, match=f"m.csv: x/a.flac: line 2: .*{reason}"):
            list_audio_source(str(src / "m.csv"), _spec().fields, "raise")
        source = list_audio_source(str(src / "m.csv"), _spec().fields, "skip")
        assert [item.file("audio") for item in source.items] == ["x/b.wav"]


@pytest.mark.ray
def test_a_float_wav_over_full_scale_is_clipped_and_named_in_the_notes(
    ray_local: None, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "beep").mkdir(parents=True)
    loud = (3.0 * tone(440, RATE, 0.25)).astype(np.float32)  # peaks at 1.5: beyond int16
    sf.write(src / "beep" / "loud.wav", loud, RATE, subtype="FLOAT")
    sf.write(src / "beep" / "ok.wav", (loud / 2).astype(np.float32), RATE, subtype="FLOAT")
    attrs = build(str(src), str(tmp_path / "s"), _spec(), progress=False)
    notes = attrs["report"]["notes"]
    assert notes["audio_clipped"]["count"] == 1
    assert notes["audio_clipped"]["examples"] == ["beep/loud.wav"]
    got = _read(tmp_path / "s")
    j = list(got["key"]).index("beep/loud.wav")
    assert got["audio"][j].max() == 32767 and got["audio"][j].min() == -32768  # clipped


@pytest.mark.ray
def test_a_stereo_file_whose_downmix_cancels_is_named_in_the_notes(
    ray_local: None, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "beep").mkdir(parents=True)
    wave = tone(440, RATE, 0.25)
    sf.write(src / "beep" / "anti.wav", np.hstack([wave, -wave]), RATE)  # one channel inverted
    sf.write(src / "beep" / "fine.wav", np.hstack([wave, wave]), RATE)
    attrs = build(str(src), str(tmp_path / "s"), _spec(), progress=False)
    note = attrs["report"]["notes"]["audio_downmix_cancelled"]
    assert note["count"] == 1 and note["examples"] == ["beep/anti.wav"]
    assert "anti-phase" in note["says"]
    got = _read(tmp_path / "s")
    j = list(got["key"]).index("beep/anti.wav")
    assert np.abs(got["audio"][j]).max() <= 1  # stored as decoded: the silent mean


def test_full_scale_pcm16_noise_is_stored_exactly_without_a_clipped_note(tmp_path: Path) -> None:
    """-32768 is a PCM_16 sample like any other: int16 stores it, nothing was clipped."""
    src = tmp_path / "src"
    (src / "noise").mkdir(parents=True)
    rng = np.random.default_rng(0)
    clips = {}
    for i in range(10):
        pcm = rng.integers(-32768, 32768, 8000, dtype=np.int16)
        pcm[i] = -32768  # every clip reaches the bottom of the range; none passes 32767
        sf.write(src / "noise" / f"n{i}.wav", pcm, RATE, subtype="PCM_16")
        clips[f"noise/n{i}.wav"] = pcm
    attrs = build(str(src), str(tmp_path / "s"), _spec(), progress=False, runner="sequential")
    assert "audio_clipped" not in attrs["report"].get("notes", {})
    got = _read(tmp_path / "s")
    for j, key in enumerate(got["key"]):
        np.testing.assert_array_equal(got["audio"][j], clips[str(key)])


def test_a_log_mel_flag_on_a_waveform_build_is_refused_naming_it(
    mixed: Path, tmp_path: Path, capsys
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["build", str(mixed), "--out", str(tmp_path / "s"), "--clip-seconds", "1",
              "--n-mels", "40"])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--n-mels: a feature option, without effect on a waveform" in err
    assert not (tmp_path / "s").exists()


def test_inspect_of_a_waveform_store_shows_no_log_mel_option(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    (src / "beep").mkdir(parents=True)
    sf.write(src / "beep" / "a.wav", tone(440, RATE, 0.25), RATE)
    out = tmp_path / "s"
    main(["build", str(src), "--out", str(out), "--clip-seconds", "0.5", "--quiet",
          "--runner", "sequential"])  # fmt: skip
    main(["inspect", str(out)])
    shown = capsys.readouterr().out
    assert "field      audio: audio, 8000 int16, representation waveform" in shown
    assert not any(name in shown for name in ("n_mels", "n_fft", "hop_length"))


def test_a_waveform_store_recorded_with_log_mel_options_is_the_same_store(
    tmp_path: Path, capsys
) -> None:
    """A store built before the log-mel options left a waveform's spec: a re-run finds it."""
    import hashlib

    src = tmp_path / "src"
    (src / "beep").mkdir(parents=True)
    sf.write(src / "beep" / "a.wav", tone(440, RATE, 0.25), RATE)
    out = tmp_path / "s"
    args = ["build", str(src), "--out", str(out), "--clip-seconds", "0.5", "--runner",
            "sequential"]  # fmt: skip
    main([*args, "--quiet"])
    meta = json.loads((out / "zarr.json").read_text())
    attrs = meta["attributes"]["nostall"]
    old = dict(n_mels=64, n_fft=400, hop_length=160)  # what such a store recorded
    attrs["spec"]["fields"][0]["options"].update(old)
    attrs["fields"]["audio"]["options"].update(old)
    text = json.dumps(attrs["spec"], sort_keys=True, separators=(",", ":"))
    attrs["spec_hash"] = hashlib.sha256(text.encode()).hexdigest()
    (out / "zarr.json").write_text(json.dumps(meta))
    capsys.readouterr()
    main(args)
    assert "complete already (the same source and spec)" in capsys.readouterr().err


def test_clips_shorter_than_the_clip_are_counted_in_the_report_and_the_summary(
    tmp_path: Path, capsys
) -> None:
    """0.1 s files in a 0.5 s store: padded, said; a long file's last window is not."""
    src = tmp_path / "src"
    (src / "beep").mkdir(parents=True)
    for name in ("s0", "s1", "s2"):
        sf.write(src / "beep" / f"{name}.wav", tone(440, RATE, 0.1), RATE)
    sf.write(src / "beep" / "full.wav", tone(440, RATE, 0.5), RATE)
    out = tmp_path / "s"
    main(["build", str(src), "--out", str(out), "--clip-seconds", "0.5", "--runner",
          "sequential"])  # fmt: skip
    err = capsys.readouterr().err
    assert "note: 3 clips (e.g. beep/s0.wav): shorter than the clip length" in err
    padded = _report(out)["notes"]["audio_padded"]  # type: ignore[index]
    assert (padded["count"], padded["unit"]) == (3, "clip")
    long = tmp_path / "long"
    (long / "beep").mkdir(parents=True)
    sf.write(long / "beep" / "rec.wav", tone(440, RATE, 1.2), RATE)  # windows 0, 0.5, 1.0 (cut)
    sf.write(long / "beep" / "tiny.wav", tone(440, RATE, 0.2), RATE)
    main(["build", str(long), "--out", str(tmp_path / "w"), "--clip-seconds", "0.5", "--clips",
          "all", "--quiet", "--runner", "sequential"])  # fmt: skip
    notes = _report(tmp_path / "w")["notes"]
    assert notes["audio_padded"]["examples"] == ["beep/tiny.wav"]  # type: ignore[index]

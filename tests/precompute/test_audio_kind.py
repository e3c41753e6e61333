"""The ``audio`` field kind: options, storage, companions, and its decoder on real files."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from precompute.audio.features import from_int16, logmel
from precompute.audio.kind import AudioKind, AudioValue, decode_audio_field
from precompute.errors import DecodeError, SpecError
from precompute.fields import KINDS, FieldSpec, fields_table, parse_fields_table
from precompute.fields.base import Storage
from precompute.format.layout import StoreLayout
from precompute.format.storecheck import expected_shard_size
from tests.precompute.audio_bytes import encode, tone

MAX_PIXELS = 89_478_485


def _field(**options) -> FieldSpec:
    return FieldSpec("audio", "audio", {"clip_seconds": 1.0, **options})


def test_registered_with_its_rules() -> None:
    kind = KINDS["audio"]
    assert isinstance(kind, AudioKind)
    assert (kind.source, kind.decoder, kind.mixup, kind.cutmix) == (
        "file",
        "audio",
        "blend",
        "paste",
    )
    f = _field()
    assert (f.spatial, f.resample, f.augment) == (False, "none", "none")
    assert kind.companions(f.options, 256) == {
        "length": Storage((), "int32", 0),
        "start": Storage((), "float32", 0.0),
        "truncated": Storage((), "uint8", 0),
    }


def test_defaults_round_trip_and_fields_table() -> None:
    f = _field()
    assert dict(f.options) == {
        "representation": "waveform",
        "sample_rate": 16000,
        "clip_seconds": 1.0,
        "channels": "mono",
        "clips": "center",
        "hop_seconds": None,
    }  # fmt: skip  (a waveform's options hold no log-mel option)
    assert dict(_field(representation="logmel").options).keys() >= {"n_mels", "n_fft"}
    assert FieldSpec.from_dict(f.to_dict()) == f
    table = fields_table([f], 256)
    assert table["audio"]["shape"] == [16000] and table["audio"]["dtype"] == "int16"
    assert parse_fields_table(table, 256) == (f,)


@pytest.mark.parametrize(
    ("options", "shape", "dtype"),
    [
        ({}, (16000,), "int16"),
        ({"channels": 2, "clip_seconds": 0.5}, (2, 8000), "int16"),
        ({"representation": "logmel"}, (64, 101), "float16"),
        (
            {"representation": "logmel", "channels": 1, "n_mels": 40, "hop_length": 256},
            (1, 40, 63),
            "float16",
        ),
        (
            {"representation": "logmel", "sample_rate": 22050, "clip_seconds": 2.5},
            (64, 345),
            "float16",
        ),
    ],
)
def test_storage_matches_what_the_decoder_gives(options, shape, dtype) -> None:
    f = _field(**options)
    assert f.storage(256) == Storage(shape, dtype, 0)
    data = encode(tone(440.0, 44100, 3.0, channels=2), 44100, "flac")
    out = decode_audio_field(data, "a.flac", f, MAX_PIXELS)
    assert out.value.shape == shape and out.value.dtype == np.dtype(dtype)
    assert f.spec.validate(out, "audio", f.options, "a.flac") is out.value


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"representation": "cqt"},
            r"fields\.audio\.representation must be one of \['waveform', 'logmel', 'mfcc'\], "
            r"got 'cqt'",
        ),
        (
            {"sample_rate": 0},
            r"fields\.audio\.sample_rate must be an integer in \[1000, 384000\], got 0",
        ),
        (
            {"clip_seconds": -1},
            r"fields\.audio\.clip_seconds must lie in \(0, 3600\] seconds, got -1",
        ),
        (
            {"clip_seconds": "1"},
            r"fields\.audio\.clip_seconds must be a number of seconds, got '1'",
        ),
        ({"clip_seconds": 1e-5}, r"fields\.audio\.clip_seconds 1e-05 is < 1 sample"),
        (
            {"channels": "stereo"},
            r"fields\.audio\.channels must be 'mono' or an integer in \[1, 64\], got 'stereo'",
        ),
        ({"n_fft": 8}, r"fields\.audio\.n_fft must be an integer in \[16, 16384\], got 8"),
        ({"hop_length": True}, r"fields\.audio\.hop_length must be an integer"),
        (
            {"representation": "logmel", "clip_seconds": 0.01},
            r"fields\.audio\.clip_seconds 0\.01 gives 160 samples; a feature with n_fft 400 "
            r"needs more than 200",
        ),
        (
            {"representation": "logmel", "n_mels": 128, "n_fft": 256},
            r"fields\.audio\.n_mels 128 is too many for n_fft 256",
        ),
        ({"rate": 8000}, r"fields\.audio: unknown option\(s\) \['rate'\] of kind 'audio'"),
    ],
)
def test_bad_options_name_the_field_and_option(options, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _field(**options)


def test_clip_seconds_is_required() -> None:
    with pytest.raises(SpecError, match=r"fields\.a\.clip_seconds is required for kind 'audio'"):
        FieldSpec("a", "audio", {})


def test_short_file_is_padded_and_its_length_travels() -> None:
    data = encode(tone(440.0, 8000, 0.3), 8000, "wav16")
    f = _field()
    out = decode_audio_field(data, "s.wav", f, MAX_PIXELS)
    assert out.length == 4800 and not out.truncated
    assert not out.value[4800:].any() and out.value[:4800].any()
    ref = tone(440.0, 16000, 0.3)[:, 0]
    assert np.abs(from_int16(out.value[1000:4000]) - ref[1000:4000]).max() < 2e-3
    assert f.spec.companion_values(out, f.options)["length"].dtype == np.int32
    mel = decode_audio_field(data, "s.wav", _field(representation="logmel"), MAX_PIXELS)
    assert mel.length == 30  # ceil(4800 / 160): frames centred on a valid sample


def test_logmel_field_is_the_logmel_of_the_clip() -> None:
    data = encode(tone(1000.0, 16000, 1.0), 16000, "wav24")
    f = _field(representation="logmel")
    out = decode_audio_field(data, "t.wav", f, MAX_PIXELS)
    want = logmel(tone(1000.0, 16000, 1.0)[:, 0], 16000)
    np.testing.assert_allclose(out.value.astype(np.float32), want, atol=0.04)
    assert out.length == 100


def test_segments_and_truncation_reach_the_value() -> None:
    wave = np.concatenate([tone(440.0, 16000, 1.0), tone(2000.0, 16000, 1.0)])
    data = encode(wave, 16000, "wav16")
    f = _field(clip_seconds=0.5)
    out = decode_audio_field(data, "l.wav", f, MAX_PIXELS, segment_seconds=(1.25, 1.75))
    stored = sf.read(io.BytesIO(data), dtype="int16")[0][20000:28000]  # PCM_16 kept exactly
    np.testing.assert_array_equal(out.value, stored)
    with pytest.raises(DecodeError, match=r"l\.wav: segment start=1\.5 end=2\.5 s lies outside"):
        decode_audio_field(data, "l.wav", f, MAX_PIXELS, segment_seconds=(1.5, 2.5))
    cut = decode_audio_field(data[: 44 + 2 * 1000], "c.wav", f, MAX_PIXELS)
    assert cut.truncated and cut.length == 1000


def test_budget_and_bad_values() -> None:
    data = encode(tone(440.0, 16000, 1.0, channels=2), 16000, "wav16")
    with pytest.raises(DecodeError, match="over the budget of 40000 bytes"):
        decode_audio_field(data, "big.wav", _field(), 10_000)
    f = _field()
    bad = AudioValue(np.zeros(100, np.int16), 0)
    with pytest.raises(
        DecodeError,
        match=r"x\.wav: field 'audio' \(audio\): expected \(16000,\) int16, got \(100,\) int16",
    ):
        f.spec.validate(bad, "audio", f.options, "x.wav")
    with pytest.raises(DecodeError, match=r"length 16001 outside \[0, 16000\]"):
        f.spec.validate(AudioValue(np.zeros(16000, np.int16), 16001), "audio", f.options, "x.wav")


def test_store_arrays_of_an_audio_store() -> None:
    """The store table gives an audio field its array and its companions."""
    fields = (_field(representation="logmel"), FieldSpec("label", "label", {"classes": 4}))
    layout = StoreLayout(10, 256, 1, 4, 2, fields)
    arrays = layout.arrays
    assert list(arrays) == [
        "audio", "audio.length", "audio.start", "audio.truncated", "label", "valid", "key",
    ]  # fmt: skip
    assert (arrays["audio"].shape, arrays["audio"].dtype) == ((10, 64, 101), "float16")
    assert (arrays["audio.length"].shape, arrays["audio.length"].dtype) == ((10,), "int32")
    # 2 inner chunks of 2 * 64 * 101 float16 + crc each, then an index of 2 entries + crc
    assert expected_shard_size(layout, "audio", 0) == 2 * (2 * 64 * 101 * 2 + 4) + 2 * 16 + 4


def test_a_waveforms_spec_holds_no_log_mel_option() -> None:
    """Two waveform stores that differ only in log-mel options are one spec: one cache key."""
    from precompute.spec import BuildSpec
    from service.cache.keys import store_key

    def spec(**audio: object) -> BuildSpec:
        fields = (FieldSpec("audio", "audio", {"clip_seconds": 1.0, **audio}),)
        return BuildSpec(fields=(*fields, FieldSpec("label", "label")))

    plain, mels = spec(), spec(n_mels=128, n_fft=1024, hop_length=256)
    assert plain.digest() == mels.digest()
    assert store_key(plain, "f" * 64) == store_key(mels, "f" * 64)
    assert "n_mels" not in plain.canonical_json()
    assert (
        spec(representation="logmel").digest() != spec(representation="logmel", n_mels=40).digest()
    )
    # a fields table written before (every option recorded) reads as the same field
    old = fields_table([_field()], 256)
    old["audio"]["options"].update(n_mels=64, n_fft=400, hop_length=160)
    assert parse_fields_table(old, 256) == (_field(),)

"""The ``audio`` field kind: a clip stored as int16 samples, a float16 log-mel or float32 MFCCs.

Importing this module (the kinds registry does, at its first look-up) registers
:class:`AudioKind` (``register_kind``, with its flags: ``--clip-seconds``, ``--sample-rate``,
...), its file decoder :func:`decode_audio_field` (``register_decoder``) and the source reader
of audio class folders and manifests (:mod:`precompute.audio.source`). It is the worked
example of ``docs/kinds.md``.
The valid length of each sample travels as :class:`AudioValue` ``(value, length, truncated,
start)``: :meth:`AudioKind.check` returns the stored array, :meth:`AudioKind.companion_values`
the companions ``NAME.length`` (``()`` int32: samples of a waveform, frames of a log-mel whose
centre sample is a valid one, ``ceil(valid / hop_length)``), ``NAME.start`` (``()``
float32: the source time of the clip's first sample, in seconds) and ``NAME.truncated``
(``()`` uint8: 1 for a file whose data ended early, kept with the frames present; the build
report lists those keys under ``truncated``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from precompute.audio.clips import fit_clip, segment
from precompute.audio.decode import AudioInfo, decode_audio
from precompute.audio.features import INT16_SCALE, MEL_SCALES, clips_int16, num_frames, to_int16
from precompute.audio.options import (
    LOGMEL_OPTIONS,
    MAX_CLIP_SECONDS,
    check_channels,
    check_features,
    check_hop,
    check_hz,
    check_seconds,
    check_top_db,
    features,
    mel_norm,
    unused_options,
)
from precompute.audio.source import audio_fields, is_audio_source, list_audio_source
from precompute.audio.windows import decode_window
from precompute.checks import Size
from precompute.errors import DecodeError, SpecError
from precompute.fields.assemble import DECODE, FileInput, register_decoder
from precompute.fields.base import Kind, Storage
from precompute.fields.options import REQUIRED, Flag, Option, integer, one_of
from precompute.fields.registry import has_kind, register_kind
from precompute.fields.spec import FieldSpec
from precompute.kinds.hooks import SOURCE_READERS, SourceQuery, SourceReader, register_source
from precompute.notes import note
from precompute.sources.fields import FieldSource
from precompute.sources.folders import AUDIO_EXTENSIONS

__all__ = [
    "INT16_SCALE",
    "LOGMEL_OPTIONS",
    "MAX_CLIP_SECONDS",
    "AudioKind",
    "AudioValue",
    "clip_frames",
    "decode_audio_field",
]


class AudioValue(NamedTuple):
    """A decoded audio field value: the stored array, its valid length, a cut file."""

    value: np.ndarray
    length: int
    truncated: bool = False  # the file's data ended early; the frames present were kept
    start: float = 0.0  # source time of the clip's first sample, in seconds


def clip_frames(opts: Mapping[str, Any]) -> int:
    """Samples in one clip: ``round(clip_seconds * sample_rate)``."""
    return round(float(opts["clip_seconds"]) * int(opts["sample_rate"]))


def _lead(opts: Mapping[str, Any]) -> tuple[int, ...]:
    """The channel axis: none for ``mono``, ``(N,)`` for N kept channels."""
    return () if opts["channels"] == "mono" else (int(opts["channels"]),)


class AudioKind(Kind):
    """A clip of ``clip_seconds`` at ``sample_rate``: int16 waveform, float16 log-mel or MFCCs.

    Not spatial (the image draw never touches it, rule ``none``); mixup blends it, cutmix
    pastes a stretch of time. Stored ``(L,)`` / ``(C, L)`` int16 (``representation``
    ``waveform``, ``L = round(clip_seconds * sample_rate)``), ``(n_mels, frames)`` /
    ``(C, n_mels, frames)`` float16 (``logmel``, ``frames = 1 + L // hop_length``) or
    ``(n_mfcc, frames)`` / ``(C, n_mfcc, frames)`` float32 (``mfcc``). A waveform's options
    hold no feature option, a log-mel's no ``n_mfcc`` (:meth:`unused`).
    """

    name = "audio"
    source = "file"
    decoder = "audio"
    mixup, cutmix = "blend", "paste"
    extensions = tuple(sorted(AUDIO_EXTENSIONS))  # class folders and path,label manifests
    options = MappingProxyType(
        {
            "representation": Option("waveform", one_of("waveform", "logmel", "mfcc")),
            "sample_rate": Option(16000, integer(1000, 384000)),
            "clip_seconds": Option(REQUIRED, check_seconds),
            "channels": Option("mono", check_channels),
            "n_mels": Option(64, integer(1, 512)),
            "n_fft": Option(400, integer(16, 16384)),
            "hop_length": Option(160, integer(1, 16384)),
            "clips": Option("center", one_of("center", "all")),
            "hop_seconds": Option(None, check_hop),
            # added after stores were built (Option.late): left out of specs at their default
            "f_min": Option(0.0, check_hz, late=True),
            "f_max": Option(None, check_hz, late=True),
            "top_db": Option(80.0, check_top_db, late=True),
            "mel_scale": Option("htk", one_of(*MEL_SCALES), late=True),
            "mel_norm": Option(None, mel_norm, late=True),
            "n_mfcc": Option(20, integer(1, 512), late=True),
        }
    )
    flags = MappingProxyType(
        {
            "sample_rate": Flag("sample_rate", "Audio: stored rate in Hz (default 16000).", int),
            "clip_seconds": Flag("clip_seconds", "Audio: clip length T; needed for audio.", float),
            "clips": Flag("clips", "Audio: center (default: one clip per file) | all (windows)."),
            "hop_seconds": Flag(
                "hop_seconds", "Audio, --clips all: window hop (default T).", float
            ),
            "channels": Flag(
                "channels",
                "Images: 3 (default) | 1 (grey); audio: mono (default) | N.",
                shared=True,
            ),
            "features": Flag(
                "representation",
                "Audio: waveform (int16, default) | logmel (float16 dB) | mfcc (float32).",
            ),
            "f_min": Flag("f_min", "Audio features: lowest mel band edge, Hz (default 0).", float),
            "f_max": Flag("f_max", "Audio features: highest band edge, Hz (rate/2).", float),
            "top_db": Flag(
                "top_db", "Audio features: dB kept below each clip's peak (80; none: all)."
            ),
            "mel_scale": Flag("mel_scale", "Audio features: htk (default) | slaney mel scale."),
            "mel_norm": Flag("mel_norm", "Audio features: none (default) | slaney filter areas."),
            "n_mfcc": Flag("n_mfcc", "Audio MFCC: coefficients kept (default 20).", int),
            "n_mels": Flag("n_mels", "Audio log-mel: mel bands (default 64).", int),
            "n_fft": Flag("n_fft", "Audio log-mel: FFT size (default 400).", int),
            "hop_length": Flag(
                "hop_length", "Audio log-mel: STFT hop in samples (default 160).", int
            ),
        }
    )
    hint = (
        "on the command line: --clip-seconds T (and --sample-rate, --clips, --hop-seconds, "
        "--channels, --features, --n-mels, --f-min, --f-max, ...) or --fields"
    )

    def describe(self, opts: Mapping[str, Any], size: Size) -> str:
        """``audio 1 s 16 kHz logmel 64 mels`` (``waveform``, ``mfcc 20``; channels not mono)."""
        what = f"audio {opts['clip_seconds']:g} s {opts['sample_rate'] / 1000:g} kHz"
        what += f" {opts['representation']}"
        if opts["representation"] == "logmel":
            what += f" {opts['n_mels']} mels"
        elif opts["representation"] == "mfcc":
            what += f" {opts.get('n_mfcc', 20)}"
        if opts["channels"] != "mono":
            what += f" {opts['channels']} channels"
        return what + (" windows" if opts["clips"] == "all" else "")

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """A clip holds at least one sample; a feature's STFT, band and filters make sense."""
        if opts["hop_seconds"] is not None and opts["clips"] != "all":
            raise SpecError(f"fields.{field}.hop_seconds needs clips 'all' (--clips all)")
        length = clip_frames(opts)
        if length < 1:
            raise SpecError(f"fields.{field}.clip_seconds {opts['clip_seconds']} is < 1 sample")
        if opts["representation"] != "waveform":
            check_features(field, opts, length)

    def unused(self, opts: Mapping[str, Any]) -> Mapping[str, str]:
        """A waveform's feature options, a log-mel's ``n_mfcc``: not their spec."""
        return unused_options(opts)

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """int16 ``(C?, L)``, float16 ``(C?, n_mels, T)``, float32 ``(C?, n_mfcc, T)``; 0 holes."""
        length = clip_frames(opts)
        if opts["representation"] == "waveform":
            return Storage((*_lead(opts), length), "int16", 0)
        frames = num_frames(length, opts["hop_length"])
        if opts["representation"] == "mfcc":
            return Storage((*_lead(opts), opts["n_mfcc"], frames), "float32", 0.0)
        return Storage((*_lead(opts), opts["n_mels"], frames), "float16", 0.0)

    def band_values(
        self, name: str, arrays: Mapping[str, Any], opts: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """A feature's bands (mel bands, MFCCs) last, over each valid clip's valid frames."""
        if opts["representation"] == "waveform":
            return None
        values = np.moveaxis(np.asarray(arrays[name], dtype=np.float32), -2, -1)  # (n, C?, T, M)
        n, frames = values.shape[0], values.shape[-2]
        valid = np.asarray(arrays.get("valid", np.ones(n)), dtype=bool)
        length = np.asarray(arrays[f"{name}.length"]).reshape(n, 1)
        mask = (np.arange(frames)[None, :] < length) & valid[:, None]  # (n, T)
        return values, np.broadcast_to(mask.reshape(n, *[1] * (values.ndim - 3), frames),
                                       values.shape[:-1])  # fmt: skip

    def float_scale(self, opts: Mapping[str, Any]) -> float:
        """int16 waveforms as floats in [-1, 1), as ``AudioAugment`` makes them; log-mels cast."""
        return 1.0 / INT16_SCALE

    def companions(self, opts: Mapping[str, Any], size: Size) -> Mapping[str, Storage]:
        """``length``, ``start`` and ``truncated`` of each sample.

        ``length``: valid samples (waveform) or frames (log-mel); ``start``: source seconds of
        the first sample; ``truncated``: 1 where the file's data ended before its header said.
        """
        return {
            "length": Storage((), "int32", 0),
            "start": Storage((), "float32", 0.0),
            "truncated": Storage((), "uint8", 0),
        }

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An :class:`AudioValue` (or bare array) of exactly the storage shape and dtype."""
        array = value.value if isinstance(value, AudioValue) else value
        want = self.storage(opts, 1)
        if not isinstance(array, np.ndarray):
            raise ValueError(f"expected a numpy array, got {type(array).__name__}")
        if array.shape != want.shape or array.dtype != np.dtype(want.dtype):
            raise ValueError(f"expected {want.shape} {want.dtype}, got {array.shape} {array.dtype}")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ValueError("NaN or inf values")
        if isinstance(value, AudioValue):
            self.length_of(value, opts)
        return array

    def length_of(self, value: AudioValue, opts: Mapping[str, Any]) -> int:
        """The valid length of ``value``: 0..the stored time axis (``ValueError`` outside)."""
        top = self.storage(opts, 1).shape[-1]
        if isinstance(value.length, bool) or not isinstance(value.length, int | np.integer):
            raise ValueError(f"length must be an integer, got {value.length!r}")
        if not 0 <= value.length <= top:
            raise ValueError(f"length {value.length} outside [0, {top}]")
        return int(value.length)

    def companion_values(self, value: AudioValue, opts: Mapping[str, Any]) -> dict[str, Any]:
        """``length`` (int32), ``start`` (float32 seconds), ``truncated`` (uint8 0/1)."""
        audio = value if isinstance(value, AudioValue) else AudioValue(value, 0)
        return {
            "length": np.asarray(self.length_of(value, opts), dtype=np.int32),
            "start": np.asarray(audio.start, dtype=np.float32),
            "truncated": np.asarray(audio.truncated, dtype=np.uint8),
        }


def _cut(wave: np.ndarray, rate: int, seg: Sequence[Any], key: str) -> tuple[np.ndarray, int]:
    """``(part, first frame)`` of a segment ``[start, end]`` or ``[start, end, mode]``.

    ``mode`` ``window`` (a ``--clips all`` window): the frames from ``start`` (the end
    clamped to the file; a start past the decoded end is an error); else a manifest segment
    (:func:`~precompute.audio.clips.segment`).
    """
    start, end = seg[0], seg[1]
    if len(seg) > 2 and seg[2] == "window":
        a = round(float(start) * rate)
        if a >= wave.shape[1]:
            raise DecodeError(key, f"window at {start} s starts after the decoded audio ends")
        return wave[:, a : max(round(float(end) * rate), a + 1)], a
    cut = segment(wave.shape[1], rate, start, end, key)
    return wave[:, cut], int(cut.start)


def _is_window(segment_seconds: Sequence[Any] | None) -> bool:
    return (
        segment_seconds is not None and len(segment_seconds) > 2 and segment_seconds[2] == "window"
    )


def _whole(seg: Sequence[Any] | None) -> bool:
    """Whether a clip holds its file (or manifest segment) from the start, not a later window.

    A ``--clips all`` window that starts after 0 s is one of a longer file's windows: its
    last, partial window is padded by design, and not noted.
    """
    return seg is None or not _is_window(seg) or float(seg[0]) == 0


def _decoded(
    data: bytes | FileInput, key: str, opts: Mapping[str, Any], budget: int, seg: Any
) -> tuple[np.ndarray, AudioInfo, int]:
    """``(wave, info, first frame)``: a window seeks, anything else decodes the whole file.

    A window of a format whose seeking is unreliable (OGG) decodes the whole file too.
    """
    rate, channels = opts["sample_rate"], opts["channels"]
    if _is_window(seg) and isinstance(data, FileInput):
        with data.open() as stream:
            window = decode_window(
                stream, key, sample_rate=rate, channels=channels,
                start=float(seg[0]), end=float(seg[1]), max_bytes=budget,
            )  # fmt: skip
        if window is not None:
            return window
    raw = data.read() if isinstance(data, FileInput) else data
    wave, info = decode_audio(raw, key, sample_rate=rate, channels=channels, max_bytes=budget)
    if seg is None:
        return wave, info, 0
    part, first = _cut(wave, rate, seg, key)
    return part, info, first


def decode_audio_field(
    data: bytes | FileInput,
    key: str,
    field: FieldSpec,
    max_pixels: int,
    segment_seconds: Sequence[Any] | None = None,
) -> AudioValue:
    """Decode an audio file into the stored value of ``field`` and its valid length.

    The ``DECODE`` signature: ``max_pixels`` is the decompression guard of every input, here
    the most decoded samples (frames x channels at the file's rate) a file may declare.
    ``segment_seconds`` ``(start, end)`` (a manifest's segment columns) cuts the resampled
    wave before the clip is fitted (centre crop or zero pad); ``(start, end, "window")`` is a
    ``--clips all`` window: the clip starts at ``start`` (padded past the end of the file),
    and only its span of the file is decoded (:mod:`precompute.audio.windows`), so the budget
    bounds the window, not the recording. The value's ``start`` is the source time of the
    clip's first sample. ``data``: the file's bytes, or a
    :class:`~precompute.fields.assemble.FileInput` (the build's: ``takes_input``).

    Raises:
        DecodeError: Naming ``key``: see :func:`~precompute.audio.decode.decode_audio` and
            :func:`~precompute.audio.clips.segment`.
    """
    opts = field.options
    rate = opts["sample_rate"]
    wave, info, first = _decoded(data, key, opts, 4 * max_pixels, segment_seconds)
    length = clip_frames(opts)
    clip, valid = fit_clip(wave, length)
    if valid < length and _whole(segment_seconds):  # a file (segment) shorter than a clip
        note("audio_padded", key)
    first += max(wave.shape[1] - length, 0) // 2  # the centre crop's first frame
    if opts["channels"] == "mono":
        clip = clip[0]
    start = first / rate
    if opts["representation"] == "waveform":
        if clips_int16(clip):  # float samples beyond [-1, 1): int16 clips them
            note("audio_clipped", key)
        return AudioValue(to_int16(clip), valid, info.truncated, start)
    try:
        stored = features(clip, opts)
    except ValueError as exc:
        raise DecodeError(key, f"field {field.name!r}: {exc}") from None
    frames = -(-valid // opts["hop_length"])  # frames whose centre is a valid sample
    return AudioValue(stored, frames, info.truncated, start)


def _accepts(q: SourceQuery) -> bool:
    return is_audio_source(q.src, q.text)


def _infer(q: SourceQuery) -> tuple[FieldSpec, ...]:
    return audio_fields(q.src, q.options)


def _list(q: SourceQuery) -> FieldSource:
    return list_audio_source(q.src, q.fields, q.on_error, q.text)


decode_audio_field.takes_input = True  # type: ignore[attr-defined]  # a FileInput, not bytes
if not has_kind("audio"):
    register_kind(AudioKind())
if "audio" not in DECODE:
    register_decoder("audio", decode_audio_field)
if "audio" not in SOURCE_READERS:
    register_source(
        SourceReader(
            "audio",
            _accepts,
            _infer,
            _list,
            kinds=("audio",),
            needs="audio options (--clip-seconds and the others) need class folders or a "
            "manifest of audio files (.wav, .flac, .ogg, .mp3, ...)",
        )
    )

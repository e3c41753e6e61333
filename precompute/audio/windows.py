"""One ``--clips all`` window of a recording: seek, decode its span plus a margin, resample.

A window ``[start, end)`` seconds of a long recording needs a few seconds of it, not the file:
the file is opened as a seekable stream, the frames of the window's span (plus a margin on
each side, so the resampler's filter sees what it would see in the whole recording) are
decoded, and only they are resampled. Memory and time follow the window, not the file, so a
recording of an hour costs about one decode of it over all its windows, and the decode budget
(``max_bytes``) bounds the span, not the file's length.

The span is aligned to the resampling grid (``rate / gcd(rate, sample_rate)`` input frames),
so output frame ``k`` of the span is output frame ``k`` of the whole recording's resampling:
the window holds the frames a whole-file decode and resample gives, bit for bit for the rate
pairs tested (44.1, 48, 22.05 and 8 kHz to 16 kHz, and no resampling), and within 1e-7 where
soxr's multi-stage filters keep state across the whole stream (16 to 8 kHz). Without
resampling the frames are exactly the file's. MP3 frames after a seek differ from a decode
from the start by at most one float32 step (the decoder's rounding), so its windows are within
1e-7 too.

Only formats whose seeking lands on the asked frame are cut this way (:data:`SEEK_FORMATS`):
libsndfile 1.2 seeks OGG (Vorbis, Opus) to wrong frames at most positions, so for those
:func:`decode_window` returns None and the caller decodes the whole file, as before.
"""

from __future__ import annotations

import math
from typing import IO, TYPE_CHECKING

import numpy as np

from precompute.audio.decode import (
    MAX_CHANNELS,
    QUALITY,
    AudioInfo,
    backend,
    check_channels,
    mix_channels,
    open_sound,
    wav_declared_frames,
)
from precompute.errors import DecodeError

if TYPE_CHECKING:
    import soundfile as sf

__all__ = ["MARGIN_FRAMES", "SEEK_FORMATS", "decode_window", "resampled_frames"]

# Containers whose seeking is frame-exact in libsndfile (checked against a decode from the start)
SEEK_FORMATS = frozenset({"WAV", "WAVEX", "RF64", "W64", "AIFF", "AU", "CAF", "FLAC", "MP3"})

# Frames of the lower of the two rates decoded beyond each end of a window: 4x the longest
# reach of soxr's very-high-quality filters measured (about 256 frames at 8 kHz -> 16 kHz).
MARGIN_FRAMES = 1024


def resampled_frames(frames: int, rate: int, sample_rate: int) -> int:
    """Frames soxr makes of ``frames`` at ``rate`` resampled to ``sample_rate`` (half up)."""
    return (2 * frames * sample_rate + rate) // (2 * rate)


def _read_span(f: sf.SoundFile, first: int, stop: int, key: str, max_bytes: int) -> np.ndarray:
    """Frames ``[first, stop)`` of the open file as float32 ``(frames, C)``, checked."""
    need = (stop - first) * f.channels * 4
    if need > max_bytes:
        raise DecodeError(
            key, f"a window needs {need} bytes decoded, over the budget of {max_bytes} bytes"
        )
    try:
        f.seek(first)
        wave: np.ndarray = f.read(stop - first, dtype="float32", always_2d=True)
    except RuntimeError as exc:  # soundfile's LibsndfileError
        raise DecodeError(key, f"corrupt audio stream ({f.format}): {exc}") from None
    bad = ~np.isfinite(wave)
    if bad.any():
        frame = first + int(np.argmax(bad.any(axis=1)))
        raise DecodeError(key, f"NaN or inf sample at frame {frame} (of {f.frames})")
    return wave


def _span(frames: int, rate: int, sample_rate: int, lo: int, hi: int) -> tuple[int, int, int]:
    """``(first input frame, stop input frame, first output frame)`` decoded for ``[lo, hi)``.

    The span starts on the resampling grid and reaches :data:`MARGIN_FRAMES` of the lower rate
    beyond each end of the window (clamped to the file).
    """
    g = math.gcd(rate, sample_rate)
    step_in, step_out = rate // g, sample_rate // g
    margin = -(-MARGIN_FRAMES * sample_rate // min(rate, sample_rate))  # in output frames
    k0 = max(0, (lo - margin) // step_out) * step_out
    k1 = -(-(hi + margin) // step_out) * step_out
    return k0 // step_out * step_in, min(frames, k1 // step_out * step_in), k0


def decode_window(
    file: IO[bytes],
    key: str,
    *,
    sample_rate: int,
    channels: str | int,
    start: float,
    end: float,
    max_bytes: int,
) -> tuple[np.ndarray, AudioInfo, int] | None:
    """Decode the window ``[start, end)`` seconds of the recording in ``file``.

    Args:
        file: The encoded file, a seekable binary stream.
        key: The input's name, for errors.
        sample_rate: The output rate in Hz (soxr, ``QUALITY``, as a whole-file decode).
        channels: The channel rule (:func:`~precompute.audio.decode.decode_audio`'s).
        start: The window's start in seconds (rounded to the nearest output frame).
        end: Its end in seconds, clamped to the recording; at least one frame.
        max_bytes: Budget of the float32 frames decoded for the window at the file's rate.

    Returns:
        ``(wave, info, first)``: float32 ``(C, frames)`` of the window, what the file
        declared and held (``info.frames`` counts the whole recording), and the window's first
        output frame in the recording. None for a format outside :data:`SEEK_FORMATS`.

    Raises:
        DecodeError: An unreadable or empty file, a forged header, a window that starts after
            the decoded audio ends, a corrupt stream, NaN/inf samples, or fewer channels than
            asked for.
    """
    rule = check_channels(channels)
    declared = wav_declared_frames(file) or 0  # a cut WAV holds fewer frames
    with open_sound(file, key) as f:
        if f.format not in SEEK_FORMATS:
            return None
        rate, frames = f.samplerate, f.frames
        if f.channels > MAX_CHANNELS or rate <= 0 or frames <= 0:
            what = f"{f.channels} channels at {rate} Hz, {frames} frames"
            raise DecodeError(key, f"declares {what}: not a recording to cut windows from")
        if isinstance(rule, int) and 1 < f.channels < rule:
            raise DecodeError(key, f"has {f.channels} channels; {rule} were asked for")
        total = resampled_frames(frames, rate, sample_rate)
        lo = round(start * sample_rate)
        if lo >= total:
            raise DecodeError(key, f"window at {start} s starts after the decoded audio ends")
        hi = min(total, max(round(end * sample_rate), lo + 1))
        declared = max(declared, frames)
        info = AudioInfo(f.format, f.subtype, rate, f.channels, frames, declared, frames < declared)
        if rate == sample_rate:
            first, stop, k0 = lo, hi, lo
        else:
            first, stop, k0 = _span(frames, rate, sample_rate, lo, hi)
        wave = mix_channels(_read_span(f, first, stop, key, max_bytes), rule, key)
    if rate != sample_rate:
        wave = backend("soxr").resample(wave, rate, sample_rate, quality=QUALITY)
    return np.ascontiguousarray(wave[lo - k0 : hi - k0].T, dtype=np.float32), info, lo

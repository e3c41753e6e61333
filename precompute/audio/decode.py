"""Decode one audio file from memory: soundfile (libsndfile), channel rule, soxr resampling.

Every format libsndfile reads is accepted (WAV 16/24/32-bit PCM and float, FLAC, OGG/Vorbis,
MP3, AIFF, ...); no ffmpeg. The file's declared size is checked against a byte budget before
any sample is allocated. A WAV whose ``data`` chunk is cut keeps the frames that are there
and says so in :attr:`AudioInfo.truncated`; every other problem is a
:class:`~precompute.errors.DecodeError` naming the input key and the reason.
"""

from __future__ import annotations

import importlib
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from precompute.errors import DecodeError, SpecError
from precompute.notes import note

if TYPE_CHECKING:
    import soundfile as sf

__all__ = [
    "DEFAULT_MAX_BYTES",
    "EXTRA_HINT",
    "MAX_CHANNELS",
    "QUALITY",
    "AudioInfo",
    "backend",
    "check_channels",
    "decode_audio",
    "mix_channels",
    "open_sound",
    "wav_declared_frames",
]

EXTRA_HINT = "pip install soundfile soxr (dependencies of nostall)"
QUALITY = "VHQ"  # soxr's very high quality: linear phase, 0.91 passband, >= 170 dB stopband
MAX_CHANNELS = 64  # more channels than any recording rig: a forged header
DEFAULT_MAX_BYTES = 1 << 30  # decoded float32 samples of one file (frames * channels * 4)


@dataclass(frozen=True)
class AudioInfo:
    """What the file declared and what decoding it gave.

    Attributes:
        format: libsndfile's container name (``WAV``, ``FLAC``, ``OGG``, ``MP3``, ...).
        subtype: The sample encoding (``PCM_16``, ``PCM_24``, ``FLOAT``, ``VORBIS``, ...).
        sample_rate: The file's rate in Hz.
        channels: The file's channel count.
        frames: Frames decoded (at the file's rate).
        declared_frames: Frames the header declares (a cut WAV declares more than it holds).
        truncated: Fewer frames were there than declared; the ones present were kept.
    """

    format: str
    subtype: str
    sample_rate: int
    channels: int
    frames: int
    declared_frames: int
    truncated: bool


def check_channels(channels: Any) -> str | int:
    """Return a valid channel rule: ``"mono"``, ``"keep"`` or a count 1..MAX_CHANNELS.

    Raises:
        SpecError: Naming the bad value.
    """
    if channels in ("mono", "keep"):
        return str(channels)
    count = isinstance(channels, int) and not isinstance(channels, bool)
    if count and 1 <= channels <= MAX_CHANNELS:
        return int(channels)
    raise SpecError(f"channels must be 'mono', 'keep' or 1..{MAX_CHANNELS}, got {channels!r}")


def backend(name: str) -> ModuleType:
    """Import ``soundfile`` or ``soxr`` when first needed.

    Raises:
        ImportError: The package is missing; the message names the extra to install.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"audio decoding needs {name}: {EXTRA_HINT}") from exc


def wav_declared_frames(data: bytes | IO[bytes]) -> int | None:
    """Frames a RIFF/WAVE file's ``data`` chunk declares, or None for another file.

    Walks the chunks of the header (sizes only; nothing is allocated). ``data``: the file's
    bytes, or a seekable stream of them, of which only the chunk headers are read (a few dozen
    bytes; the stream is left at its start).
    """
    read_at = _read_at(data)
    head = read_at(0, 12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, block = 12, 0
    while len(chunk := read_at(pos, 8)) == 8:
        tag, size = chunk[:4], struct.unpack_from("<I", chunk, 4)[0]
        if tag == b"fmt " and len(fmt := read_at(pos + 8, 14)) == 14:
            block = struct.unpack_from("<H", fmt, 12)[0]
        if tag == b"data":
            return size // block if block else None
        pos += 8 + size + (size & 1)
    return None


def _read_at(data: bytes | IO[bytes]) -> Callable[[int, int], bytes]:
    """``read_at(offset, n)``: up to ``n`` bytes of ``data`` at ``offset``."""
    if isinstance(data, bytes | bytearray):
        return lambda pos, n: bytes(data[pos : pos + n])

    def read_at(pos: int, n: int) -> bytes:
        data.seek(pos)
        got = data.read(n)
        data.seek(0)
        return got

    return read_at


def open_sound(data: bytes | IO[bytes], key: str) -> sf.SoundFile:
    """Open encoded audio (bytes, or a seekable binary file) with soundfile.

    Raises:
        DecodeError: Empty, or not a readable audio file (naming ``key``).
    """
    if isinstance(data, bytes | bytearray):
        data = io.BytesIO(data)
    if data.seek(0, io.SEEK_END) == 0:
        raise DecodeError(key, "empty file (0 bytes)")
    data.seek(0)
    sndfile = backend("soundfile")
    try:
        return sndfile.SoundFile(data)
    except sndfile.LibsndfileError as exc:
        raise DecodeError(key, f"not a readable audio file: {exc.error_string}") from None
    except (RuntimeError, TypeError, ValueError) as exc:
        raise DecodeError(key, f"not a readable audio file: {exc}") from None


def _guard(f: sf.SoundFile, declared: int, key: str, max_bytes: int) -> None:
    """Refuse absurd headers before a sample is allocated."""
    if f.channels > MAX_CHANNELS:
        raise DecodeError(key, f"declares {f.channels} channels; at most {MAX_CHANNELS}")
    if f.samplerate <= 0:
        raise DecodeError(key, f"declares sample rate {f.samplerate} Hz")
    need = max(declared, f.frames) * f.channels * 4
    if need > max_bytes:
        raise DecodeError(
            key,
            f"declares {max(declared, f.frames)} frames x {f.channels} channels = {need} "
            f"bytes decoded, over the budget of {max_bytes} bytes",
        )


def _read(f: sf.SoundFile, key: str) -> np.ndarray:
    try:
        wave: np.ndarray = f.read(dtype="float32", always_2d=True)
    except RuntimeError as exc:  # soundfile's LibsndfileError
        raise DecodeError(key, f"corrupt audio stream ({f.format}): {exc}") from None
    if wave.shape[0] == 0:
        raise DecodeError(key, "zero frames of audio")
    bad = ~np.isfinite(wave)
    if bad.any():
        frame = int(np.argmax(bad.any(axis=1)))
        raise DecodeError(key, f"NaN or inf sample at frame {frame} (of {wave.shape[0]})")
    return wave


# A downmix this much quieter than its channels (20 dB in power) has cancelled them out ...
CANCELLED_POWER = 0.01
# ... unless the channels are near silence themselves (mean power under -60 dBFS)
QUIET_POWER = 1e-6


_POWER_BLOCK = 1 << 20  # samples per dot product: no temporary the size of the recording


def _power(x: np.ndarray) -> float:
    """Mean square of ``x``'s samples, block by block (float32 dots summed in float64)."""
    flat = x.reshape(-1)
    total = 0.0
    for i in range(0, flat.size, _POWER_BLOCK):
        block = flat[i : i + _POWER_BLOCK]
        total += float(np.dot(block, block))
    return total / max(flat.size, 1)


def _downmix(wave: np.ndarray, key: str) -> np.ndarray:
    """The mean of ``wave``'s channels; a downmix that cancels them is noted for ``key``."""
    mono = np.asarray(wave.mean(axis=1, keepdims=True, dtype=np.float32))
    if wave.shape[1] > 1:
        power = _power(wave)
        if power > QUIET_POWER and _power(mono) < CANCELLED_POWER * power:
            note("audio_downmix_cancelled", key)
    return mono


def mix_channels(wave: np.ndarray, channels: str | int, key: str) -> np.ndarray:
    """(frames, C) -> (frames, C') by the channel rule (see :func:`decode_audio`)."""
    if channels == "keep":
        return wave
    if channels == "mono":
        return _downmix(wave, key)
    if wave.shape[1] == 1:
        return np.repeat(wave, int(channels), axis=1)
    return wave[:, : int(channels)]


def decode_audio(
    data: bytes,
    key: str,
    *,
    sample_rate: int,
    channels: str | int = "mono",
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[np.ndarray, AudioInfo]:
    """Decode ``data`` to float32 samples in [-1, 1] (PCM) at ``sample_rate``.

    Args:
        data: The encoded file.
        key: The input's name, for errors.
        sample_rate: The output rate in Hz; other rates are resampled by soxr (``QUALITY``).
        channels: ``"mono"``: the mean of all channels (in a build, a mean 20 dB quieter
            than the channels, anti-phase channels cancelling, is noted as
            ``audio_downmix_cancelled``); ``"keep"``: every channel as stored;
            ``N``: exactly N channels: the first N of the file, a mono file repeated N times
            (a file with 2..N-1 channels is an error).
        max_bytes: Budget of the decoded float32 samples at the file's own rate; a header
            that declares more is refused before decoding.

    Returns:
        ``(wave, info)``: ``wave`` is float32 ``(C, frames)``, C-contiguous.

    Raises:
        DecodeError: Empty or unreadable data (unknown format, text, a cut header), zero
            frames, NaN/inf samples, absurd channel count or length, a corrupt stream, or
            fewer channels than asked for.
        SpecError: A bad ``channels`` rule or ``sample_rate``.
    """
    rule = check_channels(channels)
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 1:
        raise SpecError(f"sample_rate must be a positive integer, got {sample_rate!r}")
    with open_sound(data, key) as f:
        declared = max(wav_declared_frames(data) or 0, f.frames)
        _guard(f, declared, key, max_bytes)
        if isinstance(rule, int) and 1 < f.channels < rule:
            raise DecodeError(key, f"has {f.channels} channels; {rule} were asked for")
        wave = _read(f, key)
        info = AudioInfo(
            f.format, f.subtype, f.samplerate, f.channels, wave.shape[0], declared,
            wave.shape[0] < declared,
        )  # fmt: skip
    wave = mix_channels(wave, rule, key)
    if info.sample_rate != sample_rate:
        wave = backend("soxr").resample(wave, info.sample_rate, sample_rate, quality=QUALITY)
    return np.ascontiguousarray(wave.T, dtype=np.float32), info

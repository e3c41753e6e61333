"""Real audio files for the audio tests, encoded by soundfile (libsndfile) in memory."""

from __future__ import annotations

import io
import struct

import numpy as np
import soundfile as sf

# (format, subtype, extension) of every encoding the audio decoder must read
ENCODINGS = {
    "wav16": ("WAV", "PCM_16", "wav"),
    "wav24": ("WAV", "PCM_24", "wav"),
    "wav32": ("WAV", "PCM_32", "wav"),
    "wavfloat": ("WAV", "FLOAT", "wav"),
    "flac": ("FLAC", "PCM_16", "flac"),
    "ogg": ("OGG", "VORBIS", "ogg"),
    "mp3": ("MP3", "MPEG_LAYER_III", "mp3"),
}
LOSSLESS = ("wav16", "wav24", "wav32", "wavfloat", "flac")


def tone(freq: float, rate: int, seconds: float, channels: int = 1, amp: float = 0.5) -> np.ndarray:
    """``(frames, channels)`` float32 sine; channel c has amplitude ``amp / (c + 1)``."""
    t = np.arange(round(rate * seconds)) / rate
    wave = np.sin(2 * np.pi * freq * t)
    return np.stack([amp / (c + 1) * wave for c in range(channels)], axis=1).astype(np.float32)


def encode(samples: np.ndarray, rate: int, encoding: str) -> bytes:
    """``samples`` ``(frames, channels)`` encoded as ``encoding`` (a key of ENCODINGS)."""
    fmt, subtype, _ = ENCODINGS[encoding]
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def riff_chunk(data: bytes, tag: bytes) -> int:
    """Offset of the RIFF chunk ``tag`` in a WAV file."""
    pos = 12
    while data[pos : pos + 4] != tag:
        pos += 8 + struct.unpack_from("<I", data, pos + 4)[0]
    return pos


def with_channels(wav: bytes, channels: int) -> bytes:
    """A WAV whose fmt chunk is patched to claim ``channels`` channels."""
    out = bytearray(wav)
    struct.pack_into("<H", out, riff_chunk(wav, b"fmt ") + 10, channels)
    return bytes(out)


def with_data_size(wav: bytes, size: int) -> bytes:
    """A WAV whose data chunk is patched to declare ``size`` bytes."""
    out = bytearray(wav)
    struct.pack_into("<I", out, riff_chunk(wav, b"data") + 4, size)
    return bytes(out)


def flac_with_total(flac: bytes, total: int) -> bytes:
    """A FLAC whose STREAMINFO is patched to declare ``total`` samples per channel (36 bits)."""
    out = bytearray(flac)
    pos = 8 + 13  # "fLaC" + block header, 10 bytes of sizes, 28 bits of rate/channels/bps
    out[pos] = (out[pos] & 0xF0) | ((total >> 32) & 0x0F)
    struct.pack_into(">I", out, pos + 1, total & 0xFFFFFFFF)
    return bytes(out)

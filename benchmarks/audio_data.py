"""A generated audio dataset of mixed formats and rates, and the classic per-item baseline.

:func:`make_audio_dataset` writes ``root/<class>/NNNN.<ext>`` clips, a pure function of its
arguments (the same bytes every run: OGG's random stream serial number is replaced by one
derived from the seed). Each class has its own kind of sound: tones, chirps, noise bursts
and amplitude-modulated tones, at a class-specific pitch. Formats cycle through WAV 16/24-bit,
FLAC, OGG/Vorbis and MP3; rates (8, 22.05, 44.1, 48 kHz), channel counts (1, 2) and durations
are drawn per clip. :class:`ClassicAudioDataset` is what a training script without nostall
does per item: decode (soundfile), resample (soxr), crop or pad, and compute the log-mel with
the same torch code the build uses (:mod:`precompute.audio`).
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from torch.utils.data import Dataset

from benchmarks.errors import BenchConfigError
from precompute.audio.clips import fit_clip
from precompute.audio.decode import decode_audio
from precompute.audio.features import logmel_tensor

__all__ = [
    "FORMATS",
    "RATES",
    "ClassicAudioDataset",
    "fix_ogg_serial",
    "list_audio",
    "make_audio_dataset",
]

FORMATS = (
    ("wav", "WAV", "PCM_16"), ("wav", "WAV", "PCM_24"), ("flac", "FLAC", "PCM_16"),
    ("ogg", "OGG", "VORBIS"), ("mp3", "MP3", "MPEG_LAYER_III"),
)  # fmt: skip
RATES = (8000, 22050, 44100, 48000)
SOUNDS = ("tone", "chirp", "noise", "am")
EXTENSIONS = frozenset(ext for ext, _, _ in FORMATS)


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


_OGG_CRC = _crc_table()


def _ogg_crc(page: bytes) -> int:
    crc = 0
    for byte in page:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _OGG_CRC[(crc >> 24) ^ byte]
    return crc


def fix_ogg_serial(data: bytes, serial: int) -> bytes:
    """``data`` (an Ogg stream) with every page's serial number set to ``serial``, CRCs redone."""
    out, pos = bytearray(data), 0
    while pos + 27 <= len(out) and out[pos : pos + 4] == b"OggS":
        segments = out[pos + 26]
        end = pos + 27 + segments + sum(out[pos + 27 : pos + 27 + segments])
        out[pos + 14 : pos + 18] = serial.to_bytes(4, "little")
        out[pos + 22 : pos + 26] = bytes(4)
        out[pos + 22 : pos + 26] = _ogg_crc(bytes(out[pos:end])).to_bytes(4, "little")
        pos = end
    return bytes(out)


def _sound(kind: str, label: int, rate: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """One clip of the class's kind of sound, float64 ``(n,)``, peak below 0.8."""
    t = np.arange(n) / rate
    pitch = min(150.0 * (1 + label) * rng.uniform(0.95, 1.05), 0.4 * rate)
    if kind == "tone":
        wave = np.sin(2 * np.pi * pitch * t) + 0.3 * np.sin(4 * np.pi * pitch * t)
    elif kind == "chirp":
        top = min(pitch * 8, 0.45 * rate)
        wave = np.sin(2 * np.pi * (pitch * t + (top - pitch) * t**2 / (2 * t[-1] + 1e-9)))
    elif kind == "noise":
        gate = np.repeat(rng.random(n // 800 + 1) < 0.5, 800)[:n]
        wave = rng.standard_normal(n) * gate
    else:
        wave = np.sin(2 * np.pi * pitch * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
    wave = wave / max(float(np.abs(wave).max()), 1e-9) * rng.uniform(0.3, 0.75)
    return wave + 0.01 * rng.standard_normal(n)


def _encode(wave: np.ndarray, rate: int, fmt: tuple[str, str, str], serial: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, wave.astype(np.float32), rate, format=fmt[1], subtype=fmt[2])
    data = buf.getvalue()
    return fix_ogg_serial(data, serial) if fmt[1] == "OGG" else data


def make_audio_dataset(
    root: str | Path,
    num_clips: int = 300,
    num_classes: int = 4,
    seed: int = 0,
    seconds: tuple[float, float] = (0.5, 3.0),
    formats: tuple[int, ...] | None = None,
) -> Path:
    """Write ``num_clips`` clips in ``num_classes`` class folders under ``root``; return it.

    Clip ``i`` has label ``i % num_classes``, format ``FORMATS[i % 5]`` (with ``formats``,
    indices into ``FORMATS``: ``FORMATS[formats[i % len(formats)]]``, e.g. ``(0,)`` for 16-bit
    WAV only, what ``tf.audio.decode_wav`` reads), and a rate, a channel
    count (1 or 2) and a duration in ``seconds`` drawn from ``numpy.random.default_rng([seed,
    i])``: every file is a pure function of ``(seed, i, num_classes, seconds)``.

    Raises:
        BenchConfigError: A count or the duration range is invalid.
    """
    if num_clips < 1 or num_classes < 1:
        raise BenchConfigError(
            f"num_clips and num_classes must be >= 1, got {num_clips}, {num_classes}"
        )
    if formats is not None and (not formats or not set(formats) <= set(range(len(FORMATS)))):
        raise BenchConfigError(f"formats must be indices into FORMATS (0-4), got {formats!r}")
    if not 0 < seconds[0] <= seconds[1] <= 60:
        raise BenchConfigError(f"seconds must satisfy 0 < low <= high <= 60, got {seconds!r}")
    root = Path(root)
    for i in range(num_clips):
        rng = np.random.default_rng([seed, i])
        cycle = formats or tuple(range(len(FORMATS)))
        label, fmt = i % num_classes, FORMATS[cycle[i % len(cycle)]]
        rate, channels = RATES[int(rng.integers(len(RATES)))], int(rng.integers(1, 3))
        n = round(rng.uniform(*seconds) * rate)
        mono = _sound(SOUNDS[label % len(SOUNDS)], label, rate, n, rng)
        wave = np.stack([mono * (0.8 + 0.2 * c) for c in range(channels)], axis=1)
        folder = root / f"class_{label:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        serial = zlib.crc32(f"{seed}:{i}".encode())
        (folder / f"{i:05d}.{fmt[0]}").write_bytes(_encode(wave, rate, fmt, serial))
    return root


def list_audio(root: str | Path) -> list[tuple[Path, int]]:
    """``(path, label)`` of every clip under ``root``: class folders in sorted order."""
    classes = sorted(p for p in Path(root).iterdir() if p.is_dir())
    return [
        (path, label)
        for label, folder in enumerate(classes)
        for path in sorted(folder.iterdir())
        if path.suffix[1:] in EXTENSIONS
    ]


class ClassicAudioDataset(Dataset[tuple[torch.Tensor, int]]):
    """The classic per-item pipeline: decode, resample, crop/pad, log-mel, every epoch.

    Items are ``(logmel (n_mels, frames) float32, label)``, the same values the build
    stores as float16 for a ``logmel`` field with these options (mono, centre crop).
    """

    def __init__(
        self,
        root: str | Path,
        sample_rate: int = 16000,
        clip_seconds: float = 1.0,
        n_mels: int = 64,
        n_fft: int = 400,
        hop_length: int = 160,
    ) -> None:
        self.items = list_audio(root)
        if not self.items:
            raise BenchConfigError(f"no audio files under {root}")
        self.sample_rate, self.length = sample_rate, round(clip_seconds * sample_rate)
        self.n_mels, self.n_fft, self.hop_length = n_mels, n_fft, hop_length

    def __len__(self) -> int:
        """Number of clips."""
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """Decode, resample, fit and transform clip ``index``."""
        path, label = self.items[index]
        wave, _ = decode_audio(path.read_bytes(), path.name, sample_rate=self.sample_rate)
        clip, _ = fit_clip(wave, self.length)
        x = torch.from_numpy(clip[0])
        mel = logmel_tensor(x, self.sample_rate, self.n_fft, self.hop_length, self.n_mels)
        return mel, label

"""Log-mel spectrograms and MFCCs with torch alone (no torchaudio), and int16 waveforms.

:func:`logmel` follows ``torchaudio.transforms.MelSpectrogram`` with its defaults and
``AmplitudeToDB(stype="power", top_db=80)``: a periodic Hann window of ``n_fft`` samples,
``torch.stft`` centred with reflect padding, power 2, a triangular mel filterbank between
``f_min`` and ``f_max`` (``torchaudio.functional.melscale_fbanks``: the **HTK** mel scale
without area normalisation by default, ``mel_scale="slaney"`` and ``norm="slaney"`` as there),
then ``10 * log10(max(mel, 1e-10))`` clamped below at the clip's maximum minus ``top_db``
(librosa's ``power_to_db(ref=1.0, amin=1e-10, top_db=80)``; None: no clamp). A wave of ``n``
samples gives ``1 + n // hop_length`` frames. :func:`mfcc` is ``torchaudio.transforms.MFCC``:
the orthonormal DCT-II (``create_dct(n_mfcc, n_mels, "ortho")``) of that log-mel.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from precompute.errors import SpecError

if TYPE_CHECKING:  # torch is imported when a feature is computed
    import torch

__all__ = [
    "AMIN",
    "INT16_SCALE",
    "MEL_NORMS",
    "MEL_SCALES",
    "TOP_DB",
    "clips_int16",
    "dct_matrix",
    "from_int16",
    "hz_to_mel",
    "logmel",
    "logmel_tensor",
    "mel_filterbank",
    "mel_to_hz",
    "mfcc",
    "num_frames",
    "to_int16",
]

AMIN = 1e-10  # power floor of the dB conversion (-100 dB)
TOP_DB = 80.0  # dynamic range kept below a clip's loudest value
INT16_SCALE = 32768.0  # full scale of int16 storage, as libsndfile and torchaudio read PCM_16
MEL_SCALES = ("htk", "slaney")
MEL_NORMS = (None, "slaney")
# the Slaney scale: linear (200/3 Hz a mel) below 1 kHz, logarithmic above (27 mels an octave)
_F_SP, _MIN_LOG_HZ, _LOGSTEP = 200.0 / 3, 1000.0, float(np.log(6.4) / 27.0)
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP


def hz_to_mel(freq: float, mel_scale: str = "htk") -> float:
    """The mel of ``freq`` Hz: HTK's ``2595 * log10(1 + f / 700)``, or Slaney's."""
    if mel_scale == "htk":
        return 2595.0 * float(np.log10(1.0 + freq / 700.0))
    if freq < _MIN_LOG_HZ:
        return freq / _F_SP
    return _MIN_LOG_MEL + float(np.log(freq / _MIN_LOG_HZ)) / _LOGSTEP


def mel_to_hz(mel: torch.Tensor, mel_scale: str = "htk") -> torch.Tensor:
    """Inverse of :func:`hz_to_mel`."""
    import torch

    if mel_scale == "htk":
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    linear = _F_SP * mel
    return torch.where(
        mel >= _MIN_LOG_MEL, _MIN_LOG_HZ * torch.exp(_LOGSTEP * (mel - _MIN_LOG_MEL)), linear
    )


@functools.lru_cache(maxsize=32)
def _filterbank(
    n_freqs: int,
    f_min: float,
    f_max: float,
    n_mels: int,
    rate: int,
    mel_scale: str = "htk",
    norm: str | None = None,
) -> torch.Tensor:
    import torch

    all_freqs = torch.linspace(0, rate // 2, n_freqs)
    lo, hi = hz_to_mel(f_min, mel_scale), hz_to_mel(f_max, mel_scale)
    f_pts = mel_to_hz(torch.linspace(lo, hi, n_mels + 2), mel_scale)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = torch.clamp(torch.minimum(down, up), min=0.0)
    if norm == "slaney":  # each filter's area 1 (on a Hz axis)
        fb = fb * (2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels])).unsqueeze(0)
    return fb


def mel_filterbank(
    n_freqs: int,
    f_min: float,
    f_max: float,
    n_mels: int,
    sample_rate: int,
    mel_scale: str = "htk",
    norm: str | None = None,
) -> torch.Tensor:
    """``(n_freqs, n_mels)`` float32 triangular filters.

    The same numbers as ``torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max,
    n_mels, sample_rate, norm, mel_scale)`` (defaults: HTK scale, no normalisation). A fresh
    tensor (callers may modify it).
    """
    fb = _filterbank(n_freqs, float(f_min), float(f_max), n_mels, sample_rate, mel_scale, norm)
    return fb.clone()


@functools.lru_cache(maxsize=32)
def _dct(n_mfcc: int, n_mels: int) -> torch.Tensor:
    import torch

    n = torch.arange(float(n_mels))
    k = torch.arange(float(n_mfcc)).unsqueeze(1)
    dct = torch.cos(np.pi / float(n_mels) * (n + 0.5) * k)  # (n_mfcc, n_mels)
    dct[0] *= 1.0 / np.sqrt(2.0)
    dct *= np.sqrt(2.0 / float(n_mels))
    return dct.t().contiguous()


def dct_matrix(n_mfcc: int, n_mels: int) -> torch.Tensor:
    """``(n_mels, n_mfcc)`` orthonormal DCT-II (``create_dct(..., "ortho")``), a fresh tensor."""
    return _dct(n_mfcc, n_mels).clone()


def num_frames(samples: int, hop_length: int) -> int:
    """Frames of a centred STFT of ``samples`` samples: ``1 + samples // hop_length``."""
    return 1 + samples // hop_length


def _check(n: int, sample_rate: int, n_fft: int, hop: int, n_mels: int, f_max: float) -> None:
    for name, value in (("sample_rate", sample_rate), ("n_fft", n_fft), ("hop_length", hop)):
        if value < 1:
            raise SpecError(f"{name} must be positive, got {value}")
    if n_mels < 1 or not 0 < f_max <= sample_rate / 2:
        raise SpecError(f"need n_mels >= 1 and 0 < f_max <= {sample_rate / 2}, got {f_max}")
    if n <= n_fft // 2:
        raise SpecError(f"{n} samples are too few for n_fft {n_fft} (need > {n_fft // 2})")


def logmel_tensor(
    wave: torch.Tensor,
    sample_rate: int,
    n_fft: int = 400,
    hop_length: int = 160,
    n_mels: int = 64,
    f_min: float = 0.0,
    f_max: float | None = None,
    top_db: float | None = TOP_DB,
    mel_scale: str = "htk",
    norm: str | None = None,
) -> torch.Tensor:
    """Log-mel in dB of ``wave`` ``(..., n)`` float: ``(..., n_mels, frames)`` float32.

    Runs on ``wave``'s device. ``top_db`` clamps each leading-index slice (each clip) at
    its own maximum minus ``top_db``; None keeps the -100 dB floor only. ``mel_scale`` and
    ``norm``: the filterbank's (:func:`mel_filterbank`).

    Raises:
        SpecError: A wave of at most ``n_fft // 2`` samples (reflect padding needs more),
            or bad parameters.
    """
    import torch

    top = float(sample_rate // 2) if f_max is None else float(f_max)
    _check(wave.shape[-1], sample_rate, n_fft, hop_length, n_mels, top)
    lead = wave.shape[:-1]
    flat = wave.reshape(-1, wave.shape[-1]).to(torch.float32)
    window = torch.hann_window(n_fft, device=wave.device)
    spec = torch.stft(flat, n_fft, hop_length, window=window, center=True,
                      pad_mode="reflect", return_complex=True)  # fmt: skip
    power = spec.real.square() + spec.imag.square()  # (B, n_freqs, frames)
    fb = _filterbank(n_fft // 2 + 1, float(f_min), top, n_mels, sample_rate, mel_scale, norm)
    fb = fb.to(wave.device)
    mel = torch.matmul(power.transpose(1, 2), fb).transpose(1, 2)
    db = 10.0 * torch.log10(torch.clamp(mel, min=AMIN))
    if top_db is not None:
        peak = db.amax(dim=(1, 2), keepdim=True)
        db = torch.maximum(db, peak - top_db)
    return db.reshape(*lead, n_mels, db.shape[-1])


def logmel(
    wave: np.ndarray,
    sample_rate: int,
    n_fft: int = 400,
    hop_length: int = 160,
    n_mels: int = 64,
    f_min: float = 0.0,
    f_max: float | None = None,
    top_db: float | None = TOP_DB,
    mel_scale: str = "htk",
    norm: str | None = None,
) -> np.ndarray:
    """:func:`logmel_tensor` of a numpy wave ``(..., n)`` on the CPU: float32 numpy."""
    import torch

    x = torch.from_numpy(np.ascontiguousarray(wave, dtype=np.float32))
    mel = logmel_tensor(
        x, sample_rate, n_fft, hop_length, n_mels, f_min, f_max, top_db, mel_scale, norm
    )
    return mel.numpy()


def mfcc(
    wave: np.ndarray, sample_rate: int, n_mfcc: int = 20, **logmel_options: object
) -> np.ndarray:
    """MFCCs of a numpy wave ``(..., n)``: ``(..., n_mfcc, frames)`` float32.

    The orthonormal DCT-II of :func:`logmel` (``logmel_options``: its keyword arguments),
    as ``torchaudio.transforms.MFCC(sample_rate, n_mfcc, log_mels=False, melkwargs=...)``.
    """
    import torch

    mel = torch.from_numpy(logmel(wave, sample_rate, **logmel_options))  # type: ignore[arg-type]
    dct = _dct(n_mfcc, mel.shape[-2])
    return torch.matmul(mel.transpose(-1, -2), dct).transpose(-1, -2).contiguous().numpy()


def to_int16(wave: np.ndarray) -> np.ndarray:
    """Float samples -> int16: times 32768, rounded half to even, clipped to [-32768, 32767].

    A 16-bit PCM file decoded by soundfile (``k / 32768``) comes back as exactly ``k``.
    """
    scaled: np.ndarray = np.clip(np.rint(np.asarray(wave, np.float64) * INT16_SCALE), -32768, 32767)
    return scaled.astype(np.int16)


def clips_int16(wave: np.ndarray) -> bool:
    """Whether :func:`to_int16` clips a sample of ``wave`` (more than its rounding moves it).

    int16 holds ``[-32768, 32767] / 32768``: ``-1.0`` (a PCM_16 file's ``-32768``) is stored
    exactly; a sample is clipped only beyond ``32767.5 / 32768`` or below ``-32768.5 / 32768``.
    """
    if not wave.size:
        return False
    top, bottom = float(wave.max()) * INT16_SCALE, float(wave.min()) * INT16_SCALE
    return top > 32767.5 or bottom < -32768.5


def from_int16(stored: np.ndarray) -> np.ndarray:
    """int16 samples -> float32 ``k / 32768`` in [-1, 1) (:func:`to_int16` up to rounding)."""
    return (stored.astype(np.float32) / np.float32(INT16_SCALE)).astype(np.float32)

"""The ``audio`` kind's options: their checkers, which a representation uses, its features.

A field stores a ``waveform`` (int16), a ``logmel`` (float16 dB) or ``mfcc`` (float32: the
first ``n_mfcc`` coefficients of the orthonormal DCT of that log-mel). The log-mel options
(``n_mels``, ``n_fft``, ``hop_length``; ``f_min``, ``f_max``, ``top_db``, ``mel_scale``,
``mel_norm``) are a feature's only, ``n_mfcc`` MFCC's only: :func:`unused_options` names the
ones a representation leaves without effect (``Kind.unused``: out of the spec, a flag setting
one refused). :func:`features` computes a clip's stored features.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from precompute.audio.decode import MAX_CHANNELS
from precompute.audio.features import MEL_NORMS, MEL_SCALES, logmel, mel_filterbank, mfcc
from precompute.errors import SpecError
from precompute.policy import show

__all__ = [
    "FEATURE_OPTIONS",
    "LOGMEL_OPTIONS",
    "MAX_CLIP_SECONDS",
    "MIN_HOP_SECONDS",
    "check_channels",
    "check_features",
    "check_hop",
    "check_hz",
    "check_seconds",
    "check_top_db",
    "features",
    "mel_norm",
    "unused_options",
]

MAX_CLIP_SECONDS = 3600.0
MIN_HOP_SECONDS = 0.001  # a window's key names its start in milliseconds
# The options of every feature (a log-mel and the MFCCs of one); a waveform has none of them.
LOGMEL_OPTIONS = (
    "n_mels", "n_fft", "hop_length", "f_min", "f_max", "top_db", "mel_scale", "mel_norm",
)  # fmt: skip
FEATURE_OPTIONS = (*LOGMEL_OPTIONS, "n_mfcc")


def check_seconds(where: str, value: Any) -> float:
    """A positive number of seconds, at most an hour."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{where} must be a number of seconds, got {show(value)}")
    if not (math.isfinite(value) and 0 < value <= MAX_CLIP_SECONDS):
        raise SpecError(f"{where} must lie in (0, {MAX_CLIP_SECONDS:g}] seconds, got {show(value)}")
    return float(value)


def check_channels(where: str, value: Any) -> str | int:
    """``mono``, or a channel count (a flag's text too)."""
    if value == "mono" and isinstance(value, str):
        return "mono"
    if value == "keep":
        raise SpecError(
            f"{where} 'keep' is not storable: a store holds one channel count; give the "
            "count N (the first N channels, a mono file repeated) or 'mono'"
        )
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHANNELS:
        raise SpecError(
            f"{where} must be 'mono' or an integer in [1, {MAX_CHANNELS}], got {show(value)}"
        )
    return value


def check_hop(where: str, value: Any) -> float | None:
    """None, or the seconds between ``--clips all`` windows (at least a millisecond)."""
    if value is None:
        return None
    hop = check_seconds(where, value)
    if hop < MIN_HOP_SECONDS:  # windows under a millisecond apart: duplicate keys and samples
        raise SpecError(f"{where} must be at least {MIN_HOP_SECONDS:g} seconds, got {show(value)}")
    return hop


def _number(where: str, value: Any, what: str) -> float:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # else refused below, naming the text
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"{where} must be {what}, got {show(value)}")
    return float(value)


def check_hz(where: str, value: Any) -> float | None:
    """None (``f_max``: half the rate), or a frequency in Hz ``>= 0``."""
    if value is None:
        return None
    hz = _number(where, value, "a frequency in Hz")
    if hz < 0:
        raise SpecError(f"{where} must be >= 0 Hz, got {show(value)}")
    return hz


def check_top_db(where: str, value: Any) -> float | None:
    """The dynamic range kept below a clip's peak, in dB (> 0); None or ``none``: all of it."""
    if value is None or (isinstance(value, str) and value.lower() == "none"):
        return None
    db = _number(where, value, "a number of dB, or none")
    if db <= 0:
        raise SpecError(f"{where} must be > 0 dB (or none: no clamp), got {show(value)}")
    return db


def mel_norm(where: str, value: Any) -> str | None:
    """None (or ``none``) or ``slaney`` (each filter's area 1)."""
    if isinstance(value, str) and value.lower() == "none":
        value = None
    if value not in MEL_NORMS:
        raise SpecError(f"{where} must be one of {list(MEL_NORMS)}, got {show(value)}")
    return value  # type: ignore[no-any-return]


def unused_options(opts: Mapping[str, Any]) -> dict[str, str]:
    """The options ``opts``' representation leaves without effect, each with why."""
    kind = opts.get("representation")
    if kind == "mfcc":
        return {}
    if kind == "logmel":
        return {"n_mfcc": "an MFCC option, without effect on a log-mel: add --features mfcc"}
    why = "a feature option, without effect on a waveform: add --features logmel (or mfcc)"
    mfcc_only = "an MFCC option, without effect on a waveform: add --features mfcc"
    return {**dict.fromkeys(FEATURE_OPTIONS, why), "n_mfcc": mfcc_only}


def check_features(field: str, opts: Mapping[str, Any], length: int) -> None:
    """A feature's STFT, band and filters make sense for a clip of ``length`` samples.

    Raises:
        SpecError: Too short a clip for ``n_fft``, a band outside ``[0, rate / 2]`` or empty,
            a mel filter that covers no FFT bin, more MFCCs than mel bands.
    """
    if length <= opts["n_fft"] // 2:
        raise SpecError(
            f"fields.{field}.clip_seconds {opts['clip_seconds']} gives {length} samples; "
            f"a feature with n_fft {opts['n_fft']} needs more than {opts['n_fft'] // 2}"
        )
    rate = opts["sample_rate"]
    top = float(rate // 2) if opts["f_max"] is None else opts["f_max"]
    if not 0 <= opts["f_min"] < top <= rate / 2:
        raise SpecError(
            f"fields.{field}: need 0 <= f_min < f_max <= sample_rate / 2 = {rate / 2:g} Hz, "
            f"got f_min {opts['f_min']:g}, f_max {top:g}"
        )
    if opts["mel_scale"] not in MEL_SCALES:
        raise SpecError(f"fields.{field}.mel_scale must be one of {list(MEL_SCALES)}")
    fb = mel_filterbank(
        opts["n_fft"] // 2 + 1, opts["f_min"], top, opts["n_mels"], rate,
        opts["mel_scale"], opts["mel_norm"],
    )  # fmt: skip
    if bool((fb.amax(dim=0) == 0).any()):
        raise SpecError(
            f"fields.{field}.n_mels {opts['n_mels']} is too many for n_fft {opts['n_fft']} "
            f"between {opts['f_min']:g} and {top:g} Hz: some mel filters cover no FFT bin; "
            "lower n_mels, widen the band or raise n_fft"
        )
    if opts["representation"] == "mfcc" and opts["n_mfcc"] > opts["n_mels"]:
        raise SpecError(
            f"fields.{field}.n_mfcc {opts['n_mfcc']} is more than n_mels {opts['n_mels']}"
        )


def features(clip: np.ndarray, opts: Mapping[str, Any]) -> np.ndarray:
    """The stored features of a float ``clip`` ``(..., n)``: log-mel float16, MFCC float32.

    Raises:
        SpecError: A clip the STFT cannot take (:func:`precompute.audio.features.logmel`).
    """
    kw = {
        "n_fft": opts["n_fft"], "hop_length": opts["hop_length"], "n_mels": opts["n_mels"],
        "f_min": opts["f_min"], "f_max": opts["f_max"], "top_db": opts["top_db"],
        "mel_scale": opts["mel_scale"], "norm": opts["mel_norm"],
    }  # fmt: skip
    rate = opts["sample_rate"]
    if opts["representation"] == "mfcc":
        return mfcc(clip, rate, opts["n_mfcc"], **kw).astype(np.float32)
    return logmel(clip, rate, **kw).astype(np.float16)

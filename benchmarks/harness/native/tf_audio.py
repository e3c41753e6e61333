"""``tf-native`` for audio: the ``tf.data`` pipeline of a TensorFlow speech recipe.

In ``map(num_parallel_calls=AUTOTUNE)`` per file: ``tf.io.read_file``, ``tf.audio.decode_wav``,
the channels averaged to mono, resampling to the stored rate by linear interpolation (TensorFlow
has no resampler op; soxr, the build's, is band-limited), the centre clip cut or zero-padded to
``--clip-seconds``, then for log-mel ``tf.signal.stft`` (periodic Hann window, the clip reflect-
padded by ``n_fft // 2`` as ``torch.stft(center=True)`` does), the power through the build's mel
matrix (HTK scale, :func:`precompute.audio.features.mel_filterbank`), dB with the 80 dB range,
and the policy's random crop and SpecAugment masks
(:class:`~benchmarks.harness.workloads.audio.AudioPolicy`); ``batch(drop_remainder=True)``,
``prefetch(AUTOTUNE)``. ``tf.audio.decode_wav`` reads 16-bit PCM WAV only: FLAC, OGG, MP3 and
24-bit WAV files are left out, counted and named in the report, and so is a 16-bit WAV it
refuses (decoded once before the timed epochs: a data chunk shorter than its header says), with
TensorFlow's error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from benchmarks.errors import one_line
from benchmarks.harness.native.files import audio_format, first_failing, split_files

__all__ = ["audio_source"]

TF_WAV = "WAV/PCM_16"


def _decode_error(tf: Any, path: str) -> str | None:
    """Why ``tf.audio.decode_wav`` cannot decode ``path`` (a damaged WAV), or None."""
    try:
        tf.audio.decode_wav(tf.io.read_file(path))
    except tf.errors.OpError as exc:
        return one_line(exc)
    return None


def _refuse(tf: Any) -> Callable[[str], str | None]:
    """``refuse(path)``: the format of a file ``tf.audio.decode_wav`` cannot decode, or None.

    A 16-bit WAV is decoded once, before the timed epochs: one that TensorFlow refuses (a
    data chunk shorter than its header says) is left out with its error, as other formats are.
    """

    def refuse(path: str) -> str | None:
        fmt = audio_format(path)
        if fmt != TF_WAV:
            return fmt
        error = _decode_error(tf, path)
        return None if error is None else f"{fmt}: {error}"

    return refuse


def _resample(tf: Any, mono: Any, rate_in: Any, rate: int) -> Any:
    """``mono`` at ``rate_in`` Hz to ``rate`` Hz by linear interpolation."""
    n = tf.shape(mono)[0]
    step = tf.cast(rate_in, tf.float64) / rate
    n_out = tf.cast(tf.math.floor(tf.cast(n, tf.float64) / step), tf.int32)
    pos = tf.cast(tf.range(n_out), tf.float64) * step
    i0 = tf.minimum(tf.cast(tf.math.floor(pos), tf.int32), n - 1)
    i1 = tf.minimum(i0 + 1, n - 1)
    w = tf.cast(pos - tf.cast(i0, tf.float64), tf.float32)
    return tf.gather(mono, i0) * (1.0 - w) + tf.gather(mono, i1) * w


def _clip(tf: Any, wave: Any, length: int) -> tuple[Any, Any]:
    """The centre ``length`` samples (zero-padded at the end), and how many are real."""
    n = tf.shape(wave)[0]
    start = tf.maximum((n - length) // 2, 0)
    part = wave[start : start + length]
    valid = tf.shape(part)[0]
    return tf.pad(part, [[0, length - valid]]), valid


def _logmel(tf: Any, clip: Any, p: Any, mel: Any) -> Any:
    padded = tf.pad(clip, [[p.n_fft // 2, p.n_fft // 2]], mode="REFLECT")
    stft = tf.signal.stft(padded, p.n_fft, p.hop, fft_length=p.n_fft)
    power = tf.math.square(tf.math.real(stft)) + tf.math.square(tf.math.imag(stft))
    db = 10.0 * tf.math.log(tf.maximum(tf.matmul(power, mel), 1e-10)) / tf.math.log(10.0)
    db = tf.maximum(db, tf.reduce_max(db) - 80.0)
    return tf.transpose(db)  # (n_mels, frames)


def _uniform_int(tf: Any, seed: Any, top: Any) -> Any:
    """An integer uniform in ``[0, top]`` from the stateless ``seed``."""
    u = tf.random.stateless_uniform([], seed=seed)
    return tf.minimum(tf.cast(tf.math.floor(u * tf.cast(top + 1, tf.float32)), tf.int32), top)


def _span(tf: Any, x: Any, seed: Any, extent: Any, width: int, time: bool, low: Any) -> Any:
    """One SpecAugment span inside ``[0, extent)`` along time (or bands), set to ``low``."""
    w = _uniform_int(tf, seed, tf.minimum(extent, width))
    start = _uniform_int(tf, seed + 1, extent - w)
    pos = tf.range(tf.shape(x)[1 if time else 0])
    hit = (pos >= start) & (pos < start + w)
    return tf.where(hit[None, :] if time else hit[:, None], low, x)


def _masks(tf: Any, x: Any, length: Any, p: Any, seed: Any) -> Any:
    """Two time masks inside the valid steps and two frequency masks, the clip's minimum."""
    low = tf.reduce_min(x[:, : tf.maximum(length, 1)])
    for j in range(2):
        x = _span(tf, x, seed + 10 + 2 * j, length, p.time_width, True, low)
    for j in range(2):
        x = _span(tf, x, seed + 20 + 2 * j, tf.constant(p.n_mels), p.freq_width, False, low)
    return x


def _load(tf: Any, p: Any, mel: Any) -> Any:
    def load(path: Any, label: Any, seed: Any) -> tuple[Any, Any]:
        wave, rate_in = tf.audio.decode_wav(tf.io.read_file(path))
        mono = _resample(tf, tf.reduce_mean(wave, axis=1), rate_in, p.rate)
        clip, valid = _clip(tf, mono, p.samples)
        if not p.logmel:
            start = _uniform_int(tf, seed, tf.maximum(valid - p.crop, 0))
            gain = tf.random.stateless_uniform([], seed=seed + 1, minval=-6.0, maxval=6.0)
            x = tf.pad(clip[start:], [[0, p.crop]])[: p.crop] * tf.pow(10.0, gain / 20.0)
            return x, label
        feats = _logmel(tf, clip, p, mel)
        frames = (valid + p.hop - 1) // p.hop
        start = _uniform_int(tf, seed, tf.maximum(frames - p.crop, 0))
        x = tf.pad(feats[:, start:], [[0, 0], [0, p.crop]])[:, : p.crop]
        length = tf.clip_by_value(frames - start, 0, p.crop)
        return _masks(tf, x, length, p, seed), label

    return load


def audio_source(paths: Sequence[str], labels: Sequence[int], policy: Any, cfg: Any) -> Any:
    """The ``tf-native`` epoch source of the 16-bit WAV files among ``paths``.

    Raises:
        NotApplicable: None of the files is a 16-bit PCM WAV.
    """
    import tensorflow as tf
    import torch

    from benchmarks.harness.strategies.epochs import TfSource
    from precompute.audio.features import mel_filterbank

    split = split_files(paths, _refuse(tf), "tf.audio.decode_wav")
    kept = list(split.kept)
    p = policy
    mel = tf.constant(mel_filterbank(p.n_fft // 2 + 1, 0.0, p.rate / 2, p.n_mels, p.rate).numpy())
    files = tf.constant([paths[i] for i in kept])
    labs = tf.constant([labels[i] for i in kept], tf.int64)
    seeds = tf.data.Dataset.random(seed=cfg.seed, rerandomize_each_iteration=True).batch(2)
    ds = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices((files, labs)), seeds))
    ds = ds.shuffle(len(kept), seed=cfg.seed, reshuffle_each_iteration=True)
    load = _load(tf, p, mel)
    ds = ds.map(lambda fl, s: load(*fl, s), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(cfg.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def make(epoch: int) -> Iterator[Any]:
        return iter(ds)

    served = [paths[i] for i in kept]

    def culprit() -> str | None:
        return first_failing(served, lambda path: _decode_error(tf, path))

    note = split.note()
    return TfSource(make, len(kept), torch.device(cfg.device), note, loader=ds, culprit=culprit)

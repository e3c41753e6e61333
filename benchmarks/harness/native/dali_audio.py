"""``gpu-decode`` for audio: DALI decodes, resamples and computes the log-mel.

The graph: ``fn.decoders.audio`` (resampled to the stored rate, downmixed to mono), the centre
clip cut or zero-padded to ``--clip-seconds`` (``fn.slice``), then for log-mel
``fn.spectrogram`` (centred windows, reflect padding, power 2), ``fn.mel_filter_bank`` (HTK
scale, no normalisation, as the build's) and ``fn.to_decibels`` with the 80 dB range, and the
policy's random crop and SpecAugment masks (:class:`~benchmarks.harness.workloads.audio.
AudioPolicy`), drawn on the host and applied in the graph; for waveforms the crop and a gain.
With CUDA every step after decoding runs on the GPU; here (no GPU) DALI runs the whole graph
on its CPU threads. DALI's audio decoder reads WAV, FLAC and OGG/Vorbis, not MP3: MP3 files are
left out, counted and named in the report.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from benchmarks.harness.native.dali_epochs import DaliEpochs, device_id, host_labels
from benchmarks.harness.native.files import audio_format, split_files

__all__ = ["audio_source"]

TOP_DB = 80.0


def _refuse(path: str) -> str | None:
    fmt = audio_format(path)
    return fmt if fmt.startswith(("MP3", "unknown")) else None


def _lengths(paths: Sequence[str], rate: int) -> np.ndarray:
    """Samples of each file once decoded at ``rate`` (from its header)."""
    import soundfile as sf

    out = []
    for path in paths:
        info = sf.info(path)
        out.append(math.floor(info.frames * rate / info.samplerate))
    return np.asarray(out, np.int64)


def _graph(feeder: Iterable[Any], p: Any, cfg: Any) -> Any:
    from loaders.dali._compat import require_dali

    dali: Any = require_dali()
    fn, types = dali.fn, dali.types

    dev = device_id(torch.device(cfg.device))
    pipe = dali.Pipeline(batch_size=cfg.batch_size, num_threads=cfg.threads, device_id=dev)
    with pipe:
        raw, anchor, start, draw, label = fn.external_source(
            source=feeder, num_outputs=5, batch=True, cycle="raise"
        )
        audio, _ = fn.decoders.audio(raw, sample_rate=p.rate, downmix=True, dtype=types.FLOAT)
        clip = fn.slice(audio, start=anchor, shape=[p.samples], axes=[0],
                        out_of_bounds_policy="pad")  # fmt: skip
        if dev is not None:
            clip, draw = clip.gpu(), draw.gpu()
        if p.logmel:
            spec = fn.spectrogram(clip, nfft=p.n_fft, window_length=p.n_fft, window_step=p.hop,
                                  center_windows=True, reflect_padding=True, power=2)  # fmt: skip
            mel = fn.mel_filter_bank(spec, sample_rate=p.rate, nfilter=p.n_mels,
                                     freq_low=0.0, freq_high=p.rate / 2, mel_formula="htk",
                                     normalize=False)  # fmt: skip
            db = fn.to_decibels(mel, multiplier=10.0, reference=1.0, cutoff_db=-100.0)
            db = dali.math.max(db, fn.reductions.max(db) - TOP_DB)
            x = fn.slice(db, start=start, shape=[p.crop], axes=[1], out_of_bounds_policy="pad")
            low = fn.reductions.min(x)
            x = x * draw + low * (1.0 - draw)
        else:
            x = fn.slice(clip, start=start, shape=[p.crop], axes=[0], out_of_bounds_policy="pad")
            x = x * draw
        pipe.set_outputs(x, label)
    pipe.build()
    return pipe


def audio_source(paths: Sequence[str], labels: Sequence[int], policy: Any, cfg: Any) -> Any:
    """The ``gpu-decode`` epoch source of the files among ``paths`` DALI decodes.

    Raises:
        NotApplicable: DALI decodes none of the files.
    """
    from loaders.dali._compat import to_torch

    split = split_files(paths, _refuse, "DALI's fn.decoders.audio")
    kept = np.asarray(split.kept, np.int64)
    p, size = policy, cfg.batch_size
    decoded = _lengths([paths[i] for i in kept], p.rate)
    anchors = np.maximum((decoded - p.samples) // 2, 0)
    valid = np.minimum(decoded, p.samples)
    steps = -(-valid // p.hop) if p.logmel else valid
    labs = np.asarray(labels, np.int64)[kept]

    def feeder(epoch: int) -> Iterator[Any]:
        order = np.random.default_rng([cfg.seed, 0x5A, epoch]).permutation(len(kept))
        for b in range(len(kept) // size):
            rows = order[b * size : (b + 1) * size]
            rng = np.random.default_rng([cfg.seed, epoch, b])
            draws = [p.draw(int(steps[r]), rng) for r in rows]
            yield (
                [np.fromfile(paths[kept[r]], np.uint8) for r in rows],
                [np.array([anchors[r]], np.int32) for r in rows],
                [np.array([s], np.int32) for s, _ in draws],
                [d for _, d in draws],
                [labs[r : r + 1] for r in rows],
            )

    def finish(outs: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return to_torch(outs[0], device), host_labels(outs[1], device)

    device = torch.device(cfg.device)
    return DaliEpochs(
        lambda feed: _graph(feed, p, cfg), feeder, finish, len(kept), device, split.note()
    )

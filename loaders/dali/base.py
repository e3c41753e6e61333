"""The loader contract shared by both DALI loaders: order, length, epochs, state and resume.

A subclass says how many sample slots it has, how they group into chunks, which are valid, and
how to fetch a batch of samples (:meth:`DaliLoaderBase._fetch`). Everything else lives here:

* order: :func:`loaders.plan.epoch_plan` over ``(seed, epoch, rank, world_size)``, the same
  order as ``StoreLoader`` for the same arguments; with ``drop_last=False`` the ranks are
  evened out by repeats, marked ``is_pad`` in the batches;
* randomness: :func:`loaders.dali.params.draw_batch_params`, keyed by the batch position;
* resume: the state is ``(epoch, batches served)``; a new iteration builds a pipeline whose
  feeder starts at that batch, so the remainder is identical to an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from loaders.contract import check_state, pad_flags, resolve_device, resolve_rank
from loaders.dali._compat import dali_device_id, require_dali, to_torch
from loaders.dali.graph import GraphSpec, build_pipeline
from loaders.dali.params import draw_batch_params
from loaders.dali.policy import as_dali_augment
from loaders.errors import LoaderError
from loaders.order import batch_seed, epoch_after, num_batches
from loaders.plan import EpochPlan, epoch_plan

__all__ = ["DaliLoaderBase", "Fetched", "PipelineRunError"]

_STATE_KEYS = ("seed", "world_size", "batch_size", "shuffle", "drop_last", "buffer_chunks")


class PipelineRunError(LoaderError):
    """DALI failed to produce a batch; the message carries DALI's own error."""

    def __init__(self, epoch: int, batch: int, reason: str) -> None:
        super().__init__(f"DALI pipeline failed on batch {batch} of epoch {epoch}: {reason}")
        self.epoch, self.batch, self.reason = epoch, batch, reason


@dataclass
class Fetched:
    """One batch as the feeder gives it to DALI.

    Attributes:
        data: Per-sample inputs: HWC uint8 arrays, or 1-D uint8 arrays of encoded bytes.
        hw: (n, 2) height and width the crop is drawn in.
        offset: (n, 2) top-left of that region inside each input (None: the origin).
        label: (n,) int64 labels.
        index: (n,) int64 sample indices.
    """

    data: list[np.ndarray] | np.ndarray
    hw: npt.NDArray[np.int64]
    offset: npt.NDArray[np.int64] | None
    label: npt.NDArray[np.int64]
    index: npt.NDArray[np.int64]


class _Feeder:
    """The ``external_source`` iterable of one pipeline: batches ``start..stop`` of one epoch."""

    def __init__(self, loader: DaliLoaderBase, epoch: int, start: int) -> None:
        self._loader, self._epoch, self._start = loader, epoch, start
        self._order = loader.epoch_indices(epoch)
        self._stop = loader.num_batches(epoch)
        self._next = start
        self._names = loader._graph().feed_names

    def __iter__(self) -> _Feeder:
        self._next = self._start
        return self

    def __next__(self) -> tuple[Any, ...]:
        if self._next >= self._stop:
            raise StopIteration
        b, bs, ld = self._next, self._loader.batch_size, self._loader
        self._next += 1
        got = ld._fetch(self._epoch, b, self._order[b * bs:(b + 1) * bs])
        p = draw_batch_params(ld.augment, got.hw, seed=ld.seed, epoch=self._epoch, rank=ld.rank,
                              batch=b, offset=got.offset)
        feeds = {"data": got.data, "label": got.label, "index": got.index,
                 **{k: getattr(p, k) for k in self._names[1:-2]}}
        return tuple(feeds[k] for k in self._names)


class DaliLoaderBase:
    """Batches from a DALI pipeline behind the ``StoreLoader`` contract (see module docstring).

    Args:
        batch_size: Samples per batch.
        augment: On-device augmentation policy: a :class:`DaliAugment`, or a
            ``loaders.augment`` ``TrainAugment`` / ``EvalAugment`` (translated by
            :func:`loaders.dali.policy.from_policy`); None serves raw uint8 NHWC images
            (:meth:`DaliAugment.identity`), as ``StoreLoader`` does without an augment.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; None picks CUDA when available.
        shuffle: Shuffle chunks and samples (False: storage order, for evaluation).
        seed: Order and augmentation seed.
        drop_last: Drop the last incomplete batch and the last ``total % world_size``
            samples of the epoch's sequence; False serves every sample, evening out the ranks
            with repeats marked ``is_pad`` (as ``StoreLoader``).
        rank: This process's rank; default from torch.distributed or ``RANK``.
        world_size: Number of ranks; default from torch.distributed or ``WORLD_SIZE``.
        buffer_chunks: Shuffle window in chunks (as ``StoreLoader``).
        mixup: ``mixup(images, labels, generator) -> (images, soft_targets)`` (e.g. the
            mixup/cutmix ops of :mod:`loaders.augment`), applied to every batch on the device
            with a generator seeded by :func:`loaders.order.batch_seed`, as ``StoreLoader``
            does; batches then carry ``target`` instead of ``label``.
        num_threads: DALI CPU threads.
        prefetch: DALI prefetch queue depth.
    """

    def __init__(self, batch_size: int, *, augment: Any = None,
                 device: str | torch.device | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = True, rank: int | None = None, world_size: int | None = None,
                 buffer_chunks: int = 8, mixup: Any = None, num_threads: int = 2,
                 prefetch: int = 2) -> None:
        require_dali()

        for name, value in (("batch_size", batch_size), ("buffer_chunks", buffer_chunks),
                            ("num_threads", num_threads), ("prefetch", prefetch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        rank, world_size = resolve_rank(rank, world_size)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.drop_last, self.rank, self.world_size = drop_last, rank, world_size
        self.buffer_chunks, self.mixup = buffer_chunks, mixup
        self.augment = as_dali_augment(augment)
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = resolve_device(device)
        self._device_id = dali_device_id(self.device)
        self._threads, self._prefetch = num_threads, prefetch
        self.epoch, self._served = 0, 0
        self._plans: dict[int, EpochPlan] = {}

    # -- what a subclass provides -------------------------------------------------------------
    num_samples: int
    chunk_samples: int

    def _valid(self) -> npt.NDArray[np.bool_] | None:
        """Return the mask of real samples (None: all are)."""
        return None

    def _fetch(self, epoch: int, batch: int, indices: npt.NDArray[np.int64]) -> Fetched:
        raise NotImplementedError

    def _graph(self) -> GraphSpec:
        raise NotImplementedError

    # -- the contract ---------------------------------------------------------------------------
    def plan(self, epoch: int) -> EpochPlan:
        """Return the order of ``epoch`` on this rank (``StoreLoader``'s plan)."""
        if epoch not in self._plans:
            self._plans = {epoch: epoch_plan(
                self.num_samples, self.chunk_samples, seed=self.seed, epoch=epoch,
                rank=self.rank, world_size=self.world_size, shuffle=self.shuffle,
                buffer_chunks=self.buffer_chunks, valid=self._valid(),
                batch_size=self.batch_size, pad=not self.drop_last)}
        return self._plans[epoch]

    def epoch_indices(self, epoch: int) -> npt.NDArray[np.int64]:
        """Return the sample indices this rank visits in ``epoch``, in order."""
        return self.plan(epoch).order

    def num_batches(self, epoch: int) -> int:
        """Return the number of batches of ``epoch`` on this rank."""
        return num_batches(len(self.epoch_indices(epoch)), self.batch_size, self.drop_last)

    def __len__(self) -> int:
        return self.num_batches(self.epoch)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch the next iteration serves (from its first batch)."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch, self._served = int(epoch), 0

    def _identity(self) -> dict[str, Any]:
        """What a saved state must match to be resumed by this loader."""
        return {k: getattr(self, k) for k in _STATE_KEYS}

    def state_dict(self) -> dict[str, Any]:
        """Return ``{epoch, batch, ...}``: where the next iteration resumes, plus identity."""
        return {"epoch": self.epoch, "batch": self._served, "rank": self.rank,
                **self._identity()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: the next iteration serves the exact remainder.

        Raises:
            LoaderError: The state was saved by a loader with another seed, world size, batch
                size, order settings or data (another rank's state is fine: see
                :func:`loaders.contract.check_state`).
        """
        check_state(state, self._identity())
        epoch, batch = int(state["epoch"]), int(state["batch"])
        total = self.num_batches(epoch)
        if not 0 <= batch <= total:
            raise LoaderError(f"state batch {batch} outside [0, {total}] of epoch {epoch}")
        self.epoch, self._served = epoch_after(epoch, batch, total) if total else (epoch, 0)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """Serve the rest of the current epoch.

        Handing out the last batch completes the pass and selects the next epoch (the
        iterator need not be run to its end: a loop that takes ``len()`` batches and calls
        ``iter()`` again gets the next epoch).
        """
        epoch, start = self.epoch, self._served
        if start >= self.num_batches(epoch):  # an empty epoch is a complete pass at once
            self.epoch, self._served = epoch + 1, 0
            return
        yield from self._run(epoch, start)

    def _run(self, epoch: int, start: int) -> Iterator[dict[str, torch.Tensor]]:
        """Serve batches ``start..`` of ``epoch`` (a subclass may add error recovery here)."""
        yield from self._run_from(epoch, start)

    def _stream(self) -> int | None:
        """Torch's current CUDA stream, so DALI's outputs are ordered on it (no host sync)."""
        if self.device.type != "cuda":
            return None
        return int(torch.cuda.current_stream(self.device).cuda_stream)

    def _run_from(self, epoch: int, start: int) -> Iterator[dict[str, torch.Tensor]]:
        pipe = self._pipeline(epoch, start)
        for b in range(start, self.num_batches(epoch)):
            try:
                outs = pipe.run(self._stream())
            except RuntimeError as exc:  # DALI reports operator failures as RuntimeError
                raise PipelineRunError(epoch, b, str(exc)) from exc
            self._police(epoch, b)
            batch = self._to_batch(outs, epoch, b)
            self.epoch, self._served = epoch_after(epoch, b + 1, self.num_batches(epoch))
            if len(batch["index"]):  # empty only when every sample of the batch was skipped
                yield batch

    def _pipeline(self, epoch: int, start: int) -> Any:
        return build_pipeline(self._graph(), _Feeder(self, epoch, start))

    def _police(self, epoch: int, batch: int) -> None:
        """Apply the bad-input policy to what feeding ``batch`` found (nothing by default)."""

    def _to_batch(self, outs: Any, epoch: int, batch: int) -> dict[str, torch.Tensor]:
        image, label, index = outs
        host_index = torch.from_numpy(np.array(index.as_tensor())).reshape(-1)
        out = {"image": to_torch(image, self.device),
               "label": torch.from_numpy(np.array(label.as_tensor())).reshape(-1),
               "index": host_index,
               "is_pad": pad_flags(host_index, torch.from_numpy(self.plan(epoch).repeats))}
        if self.augment.channels_last and self.augment.layout == "CHW":
            out["image"] = out["image"].permute(0, 3, 1, 2)  # NCHW view, channels_last memory
        if self.augment.dtype == "bfloat16":
            out["image"] = out["image"].to(torch.bfloat16)
        keep = out["index"] >= 0  # a placeholder fed for a batch whose inputs were all skipped
        if not bool(keep.all()):
            out = {k: v[keep.to(v.device)] for k, v in out.items()}
        for key in ("label", "index", "is_pad"):
            out[key] = out[key].to(self.device)
        if self.mixup is not None:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(batch_seed(self.seed, epoch, self.rank, batch))
            out["image"], out["target"] = self.mixup(out["image"], out.pop("label"), gen)
        return out

    def _graph_spec(self, out_size: int | None, decode: bool) -> GraphSpec:
        return GraphSpec(aug=self.augment, out_size=out_size, decode=decode,
                         batch_size=self.batch_size, device_id=self._device_id,
                         num_threads=self._threads, prefetch=self._prefetch)

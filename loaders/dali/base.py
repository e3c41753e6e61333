"""The loader contract shared by both DALI loaders: order, length, epochs, state and resume.

A subclass says how many sample slots it has, how they group into chunks, which are valid, what
identifies its data, and how to fetch a batch of samples (:meth:`DaliLoaderBase._fetch`).
Settings, epochs, the plan of an epoch, the state and mixup's generator are the contract's
(:class:`loaders.contract.ContractLoader`, shared with ``StoreLoader``). What lives here:

* order: the contract's plan, so the same order as ``StoreLoader`` for the same arguments;
  with ``drop_last=False`` the ranks are evened out by repeats, marked ``is_pad`` by their
  position in the plan (:meth:`loaders.batching.plan.EpochPlan.is_pad`, as ``StoreLoader``'s
  reader);
* randomness: :func:`loaders.dali.params.draw_batch_params`, keyed by the batch position;
* resume: an iteration builds a pipeline whose feeder starts at the contract's first batch,
  so the remainder after :meth:`load_state_dict` is identical to an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from loaders.contract import ContractLoader, Mixup, check_int
from loaders.dali._compat import dali_device_id, require_dali, to_torch
from loaders.dali.graph import PASSED, GraphSpec, build_pipeline
from loaders.dali.params import draw_batch_params
from loaders.dali.policy import as_dali_augment
from loaders.errors import LoaderError
from loaders.transfer.dtype import check_dtype, float_scales, to_dtype
from precompute.fields import v1_fields

__all__ = ["DaliLoaderBase", "Fetched", "PipelineRunError"]


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
        rows: (n,) which of the requested samples each row is, when some were left out
            (None: row ``i`` is the ``i``-th requested sample).
    """

    data: list[np.ndarray] | np.ndarray
    hw: npt.NDArray[np.int64]
    offset: npt.NDArray[np.int64] | None
    label: npt.NDArray[np.int64]
    index: npt.NDArray[np.int64]
    rows: npt.NDArray[np.intp] | None = None


class _Feeder:
    """The ``external_source`` iterable of one pipeline: batches ``start..stop`` of one epoch."""

    def __init__(self, loader: DaliLoaderBase, epoch: int, start: int) -> None:
        self._loader, self._epoch, self._start = loader, epoch, start
        self._plan = loader.plan(epoch)
        self._order = self._plan.order
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
        indices = self._order[b * bs : (b + 1) * bs]
        got = ld._fetch(self._epoch, b, indices)
        is_pad = self._plan.is_pad(b * bs, len(indices))
        p = draw_batch_params(
            ld.augment,
            got.hw,
            seed=ld.seed,
            epoch=self._epoch,
            rank=ld.rank,
            batch=b,
            offset=got.offset,
        )
        feeds = {
            "data": got.data,
            "label": got.label,
            "index": got.index,
            "is_pad": is_pad if got.rows is None else is_pad[got.rows],
            **{k: getattr(p, k) for k in self._names[1 : -len(PASSED)]},
        }
        return tuple(feeds[k] for k in self._names)


class DaliLoaderBase(ContractLoader):
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
            with the batch's generator (:meth:`ContractLoader.batch_generator`), as
            ``StoreLoader`` does; batches then carry ``target`` instead of ``label``.
        num_threads: DALI CPU threads.
        prefetch: DALI prefetch queue depth.
        dtype: None, ``"float32"``, ``"bfloat16"`` or ``"float16"``: ``image`` in that dtype,
            last (uint8 to [0, 1]; the augment's own float dtype must agree), as
            ``StoreLoader``'s ``dtype`` (:mod:`loaders.transfer.dtype`).

    Raises:
        ValueError: A setting is out of range (the message names it and its value).
        ImportError: DALI is not installed (the message names the extra to install).
    """

    def __init__(
        self,
        batch_size: int,
        *,
        augment: Any = None,
        device: str | torch.device | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
        buffer_chunks: int = 8,
        mixup: Mixup | None = None,
        num_threads: int = 2,
        prefetch: int = 2,
        dtype: str | None = None,
    ) -> None:
        require_dali()
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        super().__init__(
            batch_size,
            device=device,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            rank=rank,
            world_size=world_size,
            buffer_chunks=buffer_chunks,
        )
        self._threads = check_int("num_threads", num_threads, 1)
        self._prefetch = check_int("prefetch", prefetch, 1)
        self.mixup = mixup
        self._dtype, self.dtype = check_dtype(dtype, augment), dtype
        self._scales = float_scales(v1_fields())  # what dtype= converts: the image
        self.augment = as_dali_augment(augment)
        self._device_id = dali_device_id(self.device)

    @property
    def num_threads(self) -> int:
        """DALI CPU threads (fixed when the loader is made)."""
        return self._threads

    @property
    def prefetch(self) -> int:
        """DALI prefetch queue depth (fixed when the loader is made)."""
        return self._prefetch

    # -- what a subclass provides -------------------------------------------------------------
    def _fetch(self, epoch: int, batch: int, indices: npt.NDArray[np.int64]) -> Fetched:
        raise NotImplementedError

    def _graph(self) -> GraphSpec:
        raise NotImplementedError

    # -- serving the contract's plan ----------------------------------------------------------
    def epoch_indices(self, epoch: int) -> npt.NDArray[np.int64]:
        """Return the sample indices this rank visits in ``epoch``, in order."""
        return self.plan(epoch).order

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """Serve the current epoch from its first batch (or the resumed one).

        Handing out the last batch completes the pass and selects the next epoch (the
        iterator need not be run to its end: a loop that takes ``len()`` batches and calls
        ``iter()`` again gets the next epoch).
        """
        epoch, start, total = self._begin_pass()
        if start < total:
            yield from self._run(epoch, start, self._pass)

    def _run(self, epoch: int, start: int, mine: int) -> Iterator[dict[str, torch.Tensor]]:
        """Serve batches ``start..`` of ``epoch`` for iteration ``mine``.

        A subclass may add error recovery here.
        """
        yield from self._run_from(epoch, start, mine)

    def _stream(self) -> int | None:
        """Torch's current CUDA stream, so DALI's outputs are ordered on it (no host sync)."""
        if self.device.type != "cuda":
            return None
        return int(torch.cuda.current_stream(self.device).cuda_stream)

    def _run_from(self, epoch: int, start: int, mine: int) -> Iterator[dict[str, torch.Tensor]]:
        pipe = self._pipeline(epoch, start)
        for b in range(start, self.num_batches(epoch)):
            if self._superseded(mine):  # a newer iteration (or set_epoch) took over
                return
            try:
                outs = pipe.run(self._stream())
            except RuntimeError as exc:  # DALI reports operator failures as RuntimeError
                raise PipelineRunError(epoch, b, str(exc)) from exc
            self._police(epoch, b)
            batch = self._to_batch(outs, epoch, b)
            self._mark_served(epoch, b + 1, self.num_batches(epoch))
            if len(batch["index"]):  # empty only when every sample of the batch was skipped
                yield batch

    def _pipeline(self, epoch: int, start: int) -> Any:
        return build_pipeline(self._graph(), _Feeder(self, epoch, start))

    def _police(self, epoch: int, batch: int) -> None:
        """Apply the bad-input policy to what feeding ``batch`` found (nothing by default)."""

    def _to_batch(self, outs: Any, epoch: int, batch: int) -> dict[str, torch.Tensor]:
        image, *passed = outs
        out = {"image": to_torch(image, self.device)}
        for key, value in zip(PASSED, passed, strict=True):
            out[key] = torch.from_numpy(np.array(value.as_tensor())).reshape(-1)
        if self.augment.channels_last and self.augment.layout == "CHW":
            out["image"] = out["image"].permute(0, 3, 1, 2)  # NCHW view, channels_last memory
        if self.augment.dtype == "bfloat16":
            out["image"] = out["image"].to(torch.bfloat16)
        keep = out["index"] >= 0  # a placeholder fed for a batch whose inputs were all skipped
        if not bool(keep.all()):
            out = {k: v[keep.to(v.device)] for k, v in out.items()}
        for key in PASSED:
            out[key] = out[key].to(self.device)
        if self.mixup is not None:
            gen = self.batch_generator(epoch, batch)
            out["image"], out["target"] = self.mixup(out["image"], out.pop("label"), gen)
        return to_dtype(out, self._scales, self._dtype)

    def _graph_spec(self, out_size: int | None, decode: bool) -> GraphSpec:
        return GraphSpec(
            aug=self.augment,
            out_size=out_size,
            decode=decode,
            batch_size=self.batch_size,
            device_id=self._device_id,
            num_threads=self._threads,
            prefetch=self._prefetch,
        )

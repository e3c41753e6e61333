"""What every loader of the contract shares: settings, epochs, plans, state, ranks, ``is_pad``.

``StoreLoader`` and the DALI loaders (``loaders.dali``) derive from :class:`ContractLoader`, so
the contract is written once: which settings a loader checks, which epoch and batch an
iteration serves, the plan of an epoch, what a saved state holds and which states it resumes,
how each batch's generator is seeded, where rank and world size come from, which device a
loader pins, and how a batch marks the repeats that even out the ranks. A loader adds only how
it reads and delivers the batches of a plan.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import numpy as np
import numpy.typing as npt
import torch

from loaders.batching.order import ORDER_VERSION, batch_seed, epoch_after
from loaders.batching.plan import EpochPlan
from loaders.errors import DeviceUnavailableError, LoaderError
from loaders.selection import Choice, SampleTable, Selection, plan_epoch, select
from loaders.selection.resume import ELASTIC_KEYS, check_state, resumed_layout, saved_layout
from precompute.checks import check_integer

__all__ = [
    "SETTINGS_KEYS",
    "ContractLoader",
    "Mixup",
    "check_int",
    "check_state",
    "resolve_device",
    "resolve_rank",
    "store_identity",
]

# ``mixup(images, labels_int64, generator) -> (images, soft_targets)``, on the device.
Mixup = Callable[[torch.Tensor, torch.Tensor, torch.Generator], tuple[torch.Tensor, torch.Tensor]]

_Loader = TypeVar("_Loader", bound="ContractLoader")

# The settings a saved state must match (besides the data identity a loader adds).
INT_MOST = 2**31 - 1  # the largest size or count check_int takes by default
EPOCH_MOST = 2**63 - 1  # the largest epoch (set_epoch, a saved state)
SETTINGS_KEYS = ("seed", "world_size", "batch_size", "shuffle", "drop_last", "buffer_chunks")


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Return (rank, world_size): from the arguments, else torch.distributed, else torchrun env.

    Raises:
        ValueError: Only one of the two given, or rank outside ``[0, world_size)``.
    """
    if (rank is None) != (world_size is None):
        raise ValueError(f"give both rank and world_size or neither, got {rank=} {world_size=}")
    if rank is None or world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        else:
            rank = int(os.environ.get("RANK", 0))
            world_size = int(os.environ.get("WORLD_SIZE", 1))
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    return rank, world_size


def resolve_device(device: str | torch.device) -> torch.device:
    """Return ``device`` with a CUDA index pinned now (``"cuda"`` -> the current GPU).

    Pinning at construction keeps every later allocation, copy and generator on the GPU that
    was current when the loader was built, even if the caller switches devices afterwards.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(f"device {device!r} requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def store_identity(spec_hash: str) -> dict[str, Any]:
    """Return the data identity of a store: its spec hash.

    Every loader of a store states it the same way, so a state saved by ``StoreLoader``
    resumes a ``DaliStoreLoader`` with the same settings, and the other way round.
    """
    return {"spec_hash": spec_hash}


def check_int(name: str, value: object, least: int, most: int | None = INT_MOST) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) in ``[least, most]``.

    ``most`` (default 2**31 - 1) keeps sizes and counts within what numpy indexes (a seed
    takes up to 2**64 - 1); None: no upper bound. A numpy integer is one too (a setting or
    state that went through numpy).

    Raises:
        ValueError: Naming ``name`` and the value otherwise.
    """
    number = check_integer(name, value, least)  # below: ">= least", the bound that matters
    return number if most is None else check_integer(name, number, least, most)


class EpochSetter:
    """Forwards ``set_epoch`` to its loader (nothing else of a sampler).

    Frameworks written for ``DistributedSampler`` set each epoch on a sampler; this keeps the
    loader on the framework's epoch, whatever number of batches it takes from each.
    """

    def __init__(self, loader: ContractLoader) -> None:
        self.loader = loader

    def set_epoch(self, epoch: int) -> None:
        """:meth:`ContractLoader.set_epoch` of the loader."""
        self.loader.set_epoch(epoch)


@dataclass(frozen=True)
class EpochHook:
    """``loader.batch_sampler``: holds the :class:`EpochSetter` as its ``sampler``."""

    sampler: EpochSetter


class ContractLoader:
    """The settings, epoch bookkeeping and resume state every loader of the contract shares.

    A subclass provides its sample space (:attr:`num_samples`, :attr:`chunk_samples`,
    :meth:`_valid`) and the identity of its data (:meth:`_data_identity`), and serves the
    batches of :meth:`plan` its own way: an iteration starts with :meth:`_begin_pass`, reports
    each batch handed out with :meth:`_mark_served` and draws its randomness from
    :meth:`batch_generator`. The state of a run is then ``(epoch, batch)`` plus the identity
    a resuming loader must match.

    Args:
        batch_size: Samples per batch (per rank).
        device: Where batches live (pinned by :func:`resolve_device`).
        shuffle: Shuffle chunks, then samples inside windows of ``buffer_chunks`` chunks.
        seed: Seed of the order, the variant choice and the augmentation randomness.
        drop_last: Leave out the last, smaller batch and ``total % world_size`` samples.
        rank: This process's rank (see :func:`resolve_rank`).
        world_size: Number of ranks.
        buffer_chunks: Chunks per shuffle window.
        choice: Which samples an epoch serves and how often (``subset``, ``split``,
            ``weights``, ``balance``, a mixture's ``proportions``: :class:`Choice`).

    Raises:
        ValueError: A setting is not an integer in range; the message names it and its value.
    """

    num_samples: int
    chunk_samples: int

    def __init__(
        self,
        batch_size: int,
        *,
        device: str | torch.device,
        shuffle: bool,
        seed: int,
        drop_last: bool,
        rank: int | None,
        world_size: int | None,
        buffer_chunks: int,
        choice: Choice | None = None,
    ) -> None:
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.buffer_chunks = check_int("buffer_chunks", buffer_chunks, 1)
        self.seed = check_int("seed", seed, 0, 2**64 - 1)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self._rank_given = rank is not None
        self.device = resolve_device(device)
        self._epoch, self._batch, self._resume = 0, 0, 0
        self._pass = 0  # the live iteration; an older one is superseded (see _superseded)
        self._plans: dict[int, EpochPlan] = {}
        self.choice = choice or Choice()
        self._selection: Selection | None = None
        self._layouts: dict[int, tuple[int, int]] = {}  # an epoch begun on another world

    def _valid(self) -> npt.NDArray[np.bool_] | None:
        """Return the mask of real samples (None: all are)."""
        return None

    def _data_identity(self) -> dict[str, Any]:
        """Return what identifies the served data (a store's spec hash, a source fingerprint)."""
        raise NotImplementedError

    def _sample_tables(self) -> list[SampleTable]:
        """Each store as the selection sees it (default: one, its slots and valid mask).

        A loader whose stores hold fields, keys or splits says so, so that ``subset``,
        ``split`` and ``balance`` can use them.
        """
        valid = self._valid()
        n = self.num_samples
        return [
            SampleTable(
                type(self).__name__,
                n,
                self.chunk_samples,
                np.ones(n, bool) if valid is None else valid,
            )
        ]

    def _sample_space(self) -> tuple[int, int, list[npt.NDArray[np.int64]]]:
        """``(slots, chunk samples, each table's slots in this space)``: one store's own."""
        n = self.num_samples
        return n, self.chunk_samples, [np.arange(n, dtype=np.int64)]

    @property
    def selection(self) -> Selection:
        """The resolved selection (:mod:`loaders.selection`): resolved at the first plan."""
        if self._selection is None:
            n, chunk, slots = self._sample_space()
            self._selection = select(self.choice, self._sample_tables(), n, chunk, slots)
        return self._selection

    @property
    def epoch(self) -> int:
        """The epoch the next iteration serves."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Serve ``epoch`` from its first batch on the next iteration.

        Except right after :meth:`load_state_dict` of a state of that same epoch: its resume
        is kept, so the usual loop (load the checkpoint, then ``set_epoch(e)`` at the top of
        every epoch, as with ``DistributedSampler``) serves the rest of the saved epoch, not
        its first batches a second time.
        """
        epoch = check_int("epoch", epoch, 0, EPOCH_MOST)
        if self._resume and epoch == self._epoch:
            return
        if self._layouts:  # an epoch restarted is cut for this world, as every new one
            self._layouts, self._plans = {}, {}
        self._epoch, self._batch, self._resume = epoch, 0, 0
        self._pass += 1

    @property
    def batch_sampler(self) -> EpochHook:
        """Where Lightning sets each epoch: ``loader.batch_sampler.sampler.set_epoch(e)``.

        Lightning calls it at the start of every epoch (as for a ``DataLoader`` with a batch
        sampler); without it, a trainer that takes fewer batches than ``len(loader)`` an
        epoch (``limit_train_batches``) would start the same epoch again each time. There is
        no ``loader.sampler``: Lightning would take it for a ``DataLoader``'s and inspect it.
        """
        return EpochHook(EpochSetter(self))

    def plan(self, epoch: int | None = None) -> EpochPlan:
        """Return the reading plan of ``epoch`` (default: the current one) on this rank."""
        epoch = self._epoch if epoch is None else epoch
        if epoch not in self._plans:  # one epoch kept: every rank reads its epochs in turn
            self._plans = {
                epoch: plan_epoch(
                    self.selection,
                    seed=self.seed,
                    epoch=epoch,
                    rank=self.rank,
                    world_size=self.world_size,
                    shuffle=self.shuffle,
                    buffer_chunks=self.buffer_chunks,
                    batch_size=self.batch_size,
                    drop_last=self.drop_last,
                    layout=self._layouts.get(epoch),
                )
            }
        return self._plans[epoch]

    def _check_serves(self) -> None:
        """Refuse, before the first batch, a loader whose every epoch would be empty.

        Bad rank, world size or chunk combinations raise here too (:meth:`plan`).

        Raises:
            ValueError: ``drop_last`` with ``batch_size`` larger than the samples of a rank.
        """
        if self.num_batches() == 0:
            n = len(self.plan().order)
            raise ValueError(
                f"batch_size {self.batch_size} is larger than the {n} samples rank {self.rank} "
                f"of {self.world_size} gets an epoch, and drop_last=True leaves out that "
                "smaller batch: every epoch would be empty; a smaller batch_size, or "
                "drop_last=False"
            )

    def num_batches(self, epoch: int | None = None) -> int:
        """Return the number of batches of ``epoch`` (default: the current one) on this rank."""
        return self.plan(epoch).batches(self.batch_size, self.drop_last)

    def __len__(self) -> int:
        """Number of batches of the current epoch (the same on every rank)."""
        return self.num_batches()

    def __getitem__(self, index: object) -> NoReturn:
        """Refuse indexing: what ``torch.utils.data.DataLoader`` does to a map-style dataset.

        Raises:
            TypeError: Always, saying to iterate the loader itself.
        """
        raise TypeError(
            f"{type(self).__name__} is a loader, not a Dataset: iterate it directly (for batch in "
            "loader); it batches, shuffles, shards by rank and reads ahead itself, so "
            "torch.utils.data.DataLoader cannot wrap it"
        )

    def __reduce__(self) -> NoReturn:
        """Refuse pickling (a spawned process, a DataLoader worker, ``copy.deepcopy``).

        Raises:
            TypeError: Always, saying to make the loader in each process.
        """
        raise TypeError(
            f"a {type(self).__name__} cannot be pickled (it holds open files, threads and "
            "buffers): make one in each process from the store and the same options (with "
            "seed, rank and world_size it serves the same batches there)"
        )

    def batch_generator(self, epoch: int, batch: int) -> torch.Generator:
        """Return the generator of ``batch`` of ``epoch``: augment and mixup draw from it.

        Seeded by :func:`loaders.batching.order.batch_seed` of (seed, epoch, rank, batch), so a
        resumed run draws exactly what an uninterrupted one would.
        """
        gen = torch.Generator(device=self.device)
        gen.manual_seed(batch_seed(self.seed, epoch, self.rank, batch))
        return gen

    def _begin_pass(self) -> tuple[int, int, int]:
        """Start an iteration; return (epoch, first batch, batches in the epoch).

        The first batch is 0, or the saved one right after :meth:`load_state_dict` (once).
        An iteration broken off (batches of the epoch served, no resume pending) ended its
        epoch: the new one serves the next epoch, as a new iteration of a shuffling
        ``DataLoader`` draws a new order, never the same first batches again. An epoch with
        nothing left to serve is a complete pass at once (the epoch advances).
        """
        self._check_rank()
        self._pass += 1  # an iteration still live serves nothing more (_superseded)
        if self._batch and not self._resume:  # the last pass broke off: its epoch is over
            self._epoch, self._batch = epoch_after(self._epoch, 1, 1)
        epoch, start = self._epoch, self._resume
        self._batch, self._resume = start, 0
        total = self.num_batches(epoch)
        if start >= total:
            self._mark_served(epoch, start, total)
        return epoch, start, total

    def _superseded(self, mine: int) -> bool:
        """Whether iteration ``mine`` (its ``_pass``) was followed by a newer one.

        Or by a :meth:`set_epoch` or :meth:`load_state_dict`: it then ends without serving,
        so a broken-off iteration resumed later never serves an epoch the state has left.
        """
        return mine != self._pass

    def _check_rank(self) -> None:
        """Refuse to serve when torch.distributed disagrees with the rank found at creation.

        A loader made before ``init_process_group`` (without torchrun's ``RANK`` and
        ``WORLD_SIZE``, e.g. under ``mp.spawn``) took itself for rank 0 of 1: every process
        would serve every sample, each epoch ``world_size`` times over, without a sign.

        Raises:
            LoaderError: The process group has another rank or world size.
        """
        if self._rank_given or not (
            torch.distributed.is_available() and torch.distributed.is_initialized()
        ):
            return
        now = torch.distributed.get_rank(), torch.distributed.get_world_size()
        if now != (self.rank, self.world_size):
            raise LoaderError(
                f"this loader was made as rank {self.rank} of {self.world_size}, but "
                f"torch.distributed now says rank {now[0]} of {now[1]}: it was made before "
                "init_process_group. Make it after init_process_group, or pass rank= and "
                "world_size="
            )

    def _mark_served(self, epoch: int, served: int, total: int) -> None:
        """Record that ``served`` of the ``total`` batches of ``epoch`` were handed out.

        The last batch completes the pass before it is handed out: a loop that takes
        ``len()`` batches and then calls ``iter()`` again gets the next epoch.
        """
        self._epoch, self._batch = epoch_after(epoch, served, total)

    def _identity(self) -> dict[str, Any]:
        """What a saved state must match to be resumed by this loader.

        The world size and batch size are not among them: a state resumes on another world
        size (:func:`loaders.selection.resume.resumed_layout`).
        """
        settings = {k: getattr(self, k) for k in SETTINGS_KEYS if k not in ELASTIC_KEYS}
        return {
            **settings,
            "order": ORDER_VERSION,
            "selection": self.selection.digest(),
            **self._data_identity(),
        }

    def _layout(self, epoch: int) -> tuple[int, int]:
        """``(world size, batch size)`` ``epoch`` is cut for."""
        return self._layouts.get(epoch, (self.world_size, self.batch_size))

    def state_dict(self) -> dict[str, Any]:
        """Return ``{epoch, batch, rank, ...}``: the epoch, the batches served of it, identity.

        Taken mid-iteration (e.g. in a checkpoint after batch ``b``), a loader that loads it
        serves the rest of that epoch exactly as this one would, on this world size or on
        another that keeps the global batch; after the last batch of an epoch it is
        ``{epoch + 1, 0}``. ``order_world`` and ``order_batch`` are the world size and batch
        size the epoch is cut for (this loader's, unless it resumed the epoch from another).
        """
        world, batch = self._layout(self._epoch)
        return {
            "epoch": self._epoch,
            "batch": self._batch,
            "rank": self.rank,
            "world_size": self.world_size,
            "batch_size": self.batch_size,
            "order_world": world,
            "order_batch": batch,
            **self._identity(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state``'s epoch and batch on the next iteration.

        A state saved on another world size resumes too: at an epoch's start on any, mid-epoch
        with the global batch (``world_size * batch_size``) kept; the rest of the epoch is then
        every remaining sample once, in the same global batches
        (:mod:`loaders.selection.elastic`), and the epochs after it are cut for this world.

        Raises:
            LoaderError: ``state`` came from a loader with other settings (seed, shuffle,
                order, samples) or other data (another rank's state is fine: see
                :func:`check_state`), mid-epoch on a world size that does not keep its global
                batch (naming the sizes that do), lacks its epoch or batch, or its batch is
                outside its epoch.
        """
        missing = [k for k in ("epoch", "batch") if k not in state]
        if missing:
            raise LoaderError(f"state lacks {missing}: not a loader state_dict(): {dict(state)}")
        check_state(state, self._identity())
        try:  # whole numbers only: an epoch of 1.7 or "x" is not quietly made one
            epoch = check_int("state epoch", state["epoch"], 0, EPOCH_MOST)
            batch = check_int("state batch", state["batch"], 0, EPOCH_MOST)
        except ValueError as exc:
            raise LoaderError(str(exc)) from None
        saved_layout(state)  # integers, or refused naming them
        layout = resumed_layout(state, batch, self.world_size, self.batch_size)
        self._layouts = {} if layout is None else {epoch: layout}
        self._plans = {}
        total = self.num_batches(epoch)
        if not 0 <= batch <= total:
            raise LoaderError(f"state batch {batch} outside [0, {total}] of epoch {epoch}")
        self._epoch, self._batch = epoch_after(epoch, batch, total) if total else (epoch, 0)
        self._resume = self._batch
        self._pass += 1

    def close(self) -> None:
        """Release what the loader holds open (idempotent; it can still be iterated after)."""

    def __enter__(self: _Loader) -> _Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

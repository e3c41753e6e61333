"""Which samples each epoch serves, in which order, on which rank: one layer under every loader.

Pure functions of (seed, epoch, selection, world), as MosaicML Streaming's partitions are:
``StoreLoader``, the DALI loaders and, through ``StoreLoader``, ``loaders.tf`` and ``loaders.jax``
ask :func:`plan_epoch` for each epoch's plan (``ContractLoader.plan``) and never derive an order
themselves. The parts, in the order a plan is made (design note: ``docs/loaders.md``,
"Choosing samples"):

* :mod:`~loaders.selection.choice`: the user's options, parsed once (:class:`Choice`);
* :mod:`~loaders.selection.table`, :mod:`~loaders.selection.resolve`: each store's samples and
  weights (:class:`Pool`): subset, split, weights, class balance, repeat factors;
* :mod:`~loaders.selection.draws`: how often each sample is served in an epoch;
* :mod:`~loaders.selection.mixture`: several stores in proportions, each on its own epochs;
* :mod:`~loaders.selection.epoch`: the epoch's sequence, its partitions and a rank's plan;
* :mod:`~loaders.selection.elastic`, :mod:`~loaders.selection.resume`: an epoch resumed on
  another world size, its global batches kept.

Nothing here reads a chunk or imports torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from loaders.selection.choice import Choice
from loaders.selection.draws import Pool
from loaders.selection.epoch import plan_epoch
from loaders.selection.mixture import Selection
from loaders.selection.resolve import resolve_pool
from loaders.selection.table import SampleTable
from precompute.splits import Split

__all__ = ["Choice", "Pool", "SampleTable", "Selection", "Split", "plan_epoch", "select"]


def select(
    choice: Choice,
    tables: Sequence[SampleTable],
    num_samples: int,
    chunk_samples: int,
    slots: Sequence[npt.NDArray[np.int64]],
) -> Selection:
    """Resolve ``choice`` against each store's table: the :class:`Selection` plans are made of.

    Args:
        choice: The options.
        tables: One per store.
        num_samples: Slots of the loader's sample space (the stores side by side).
        chunk_samples: Samples per chunk of that space.
        slots: Per store, the sample space's slot of each of its own slots.

    Raises:
        ValueError: A refusal of the choice in a store, proportions that do not match the
            stores, or repeat factors or a weight array over several stores.
    """
    if len(tables) == 1:
        if choice.proportions is not None and len(choice.proportions) != 1:
            raise ValueError(f"proportions {choice.proportions} given for one store")
        pool = resolve_pool(choice, tables[0])
        return Selection((pool,), num_samples, chunk_samples)
    if choice.repeat_factor is not None:
        raise ValueError("repeat_factor serves each store by its own factors: not in a mixture")
    if choice.weights is not None:
        raise ValueError(
            "weights= gives one weight per slot of one store; a mixture takes balance=, subset= "
            "or split=, which apply to each of its stores"
        )
    own = dataclasses.replace(choice, samples_per_epoch=None, proportions=None)
    pools = []
    for table, where in zip(tables, slots, strict=True):
        pool = resolve_pool(own, table)
        pools.append(dataclasses.replace(pool, members=where[pool.members], plain=False))
    proportions = choice.proportions or tuple(
        p.length / sum(q.length for q in pools) for p in pools
    )
    if len(proportions) != len(pools):
        raise ValueError(
            f"proportions {list(proportions)} name {len(proportions)} stores; the mixture has "
            f"{len(pools)}"
        )
    return Selection(
        tuple(pools), num_samples, chunk_samples, tuple(proportions), choice.mix,
        choice.samples_per_epoch,
    )  # fmt: skip

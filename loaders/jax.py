"""loaders.jax: a nostall store as batches of ``jax.Array``, optionally sharded.

A :class:`~loaders.torch_loader.StoreLoader` serves the batches, so the order, augmentation,
mixup, ranks and exact resume are the loader's. Each entry goes to JAX by DLPack: on the
loader's device, without a copy when JAX can alias the buffer (a CPU tensor whose data starts
on a 64-byte boundary: the loader's batch buffers do; the loader reuses a buffer only once JAX
dropped it). A dtype JAX canonicalises (``int64`` labels and indices become ``int32`` unless
``jax_enable_x64``) is cast by torch first (a copy); JAX copies an unaligned start.
``bfloat16`` (``TrainAugment(dtype="bfloat16")``) arrives as JAX's ``bfloat16``. With
``sharding`` each entry is then placed by ``jax.make_array_from_process_local_data``: each
process (rank) loads its own slice of the global batch. ``key`` (``keys=True``) stays a list
of strings. Importing this module imports JAX (``pip install 'nostall[jax]'``); ``import
loaders`` does not.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

from loaders.frameworks import Forwarding, check_epochs, epoch_batches, require
from loaders.torch_loader import StoreLoader

jax = require("jax", "jax")

__all__ = ["Batches", "batches", "to_jax"]


def to_jax(value: torch.Tensor, sharding: Any = None) -> Any:
    """Return a batch entry as a ``jax.Array`` (DLPack), placed with ``sharding`` if given.

    A dtype JAX canonicalises (64-bit without ``jax_enable_x64``) is cast by torch first, on the
    loader's device: JAX would copy it anyway, at a higher cost per call.

    Raises:
        ValueError: ``sharding`` does not divide the entry's shape (JAX's message).
    """
    canonical = _canonical(value.dtype, bool(jax.config.jax_enable_x64))
    if canonical != value.dtype:
        value = value.to(canonical)
    local = jax.dlpack.from_dlpack(value)
    if sharding is None:
        return local
    return jax.make_array_from_process_local_data(sharding, local)


@functools.cache
def _canonical(dtype: torch.dtype, x64: bool) -> torch.dtype:
    """The torch dtype JAX makes of ``dtype`` (``int64`` -> ``int32`` without x64)."""
    if dtype == torch.bfloat16:  # JAX's own (ml_dtypes'); NumPy has none, torch none to give
        return dtype
    stored = torch.empty(0, dtype=dtype).numpy().dtype
    canonical = jax.dtypes.canonicalize_dtype(stored)
    return dtype if canonical == stored else torch.from_numpy(np.empty(0, canonical)).dtype


def _numpy(value: torch.Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor; ``bfloat16`` as JAX's ``bfloat16`` (the same 16 bits)."""
    if value.dtype == torch.bfloat16:
        return value.view(torch.int16).numpy().view(jax.numpy.bfloat16)
    return value.numpy()


def _host_views(batch: Mapping[str, torch.Tensor | list[str]]) -> dict[str, np.ndarray]:
    """NumPy views of a batch's CPU tensors, in JAX's canonical dtypes (cast by torch first)."""
    x64 = bool(jax.config.jax_enable_x64)
    return {
        k: _numpy(v.to(_canonical(v.dtype, x64)))
        for k, v in batch.items()
        if isinstance(v, torch.Tensor) and v.device.type == "cpu"
    }


class Batches(Forwarding):
    """Batches of a :class:`StoreLoader` as dicts of ``jax.Array``; see :func:`batches`.

    Iterating serves one iteration (:func:`~loaders.frameworks.epoch_batches`); the loader's
    :meth:`state_dict`, :meth:`load_state_dict`, :meth:`set_epoch`, ``epoch`` and ``len`` are
    forwarded, so a state saved after batch ``b`` resumes exactly after it.

    Args:
        loader: The loader that serves the batches.
        sharding: A ``jax.sharding.Sharding`` of the global batch (its leading axis), or None.
        epochs: Epochs per iteration (None: one, the next each time).
    """

    def __init__(self, loader: StoreLoader, sharding: Any, epochs: int | None) -> None:
        self.loader, self.sharding, self.epochs = loader, sharding, check_epochs(epochs)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in epoch_batches(self.loader, self.epochs):
            yield self._place(batch)

    def _place(self, batch: Mapping[str, torch.Tensor | list[str]]) -> dict[str, Any]:
        """The batch's entries as ``jax.Array``; host entries in one ``jax.device_put``.

        One call for every CPU tensor costs less than a DLPack import per entry; JAX aliases
        each NumPy view as DLPack does (a 64-byte-aligned start), holding the view and so the
        loader's buffer. A sharded or non-CPU entry goes by :func:`to_jax`.
        """
        host = {} if self.sharding is not None else _host_views(batch)
        placed = dict(zip(host, jax.device_put(list(host.values())), strict=True))
        return {k: placed[k] if k in placed else self._one(v) for k, v in batch.items()}

    def _one(self, value: torch.Tensor | list[str]) -> Any:
        return value if isinstance(value, list) else to_jax(value, self.sharding)


def _pieces(sharding: Any) -> int:
    """How many pieces ``sharding`` cuts a batch's leading axis into (a label is 1-D).

    The pieces divide the sharding's device count, so a batch of that many rows splits
    evenly; a sharding that cannot say (``shard_shape`` refuses a 1-D shape) counts as 1:
    its placing then says what is wrong, as before.
    """
    whole = len(sharding.device_set)
    try:
        return whole // int(sharding.shard_shape((whole,))[0])
    except (ValueError, TypeError, NotImplementedError):
        return 1


def _check_split(loader: StoreLoader, sharding: Any) -> None:
    """Refuse, before the first batch, a batch size the sharding cannot split evenly.

    Raises:
        ValueError: ``batch_size``, or the last batch of ``drop_last=False``, is not a multiple
            of the pieces the sharding cuts the batch axis into.
    """
    pieces = _pieces(sharding)
    n, size = len(loader.plan().order), loader.batch_size
    last = 0 if loader.drop_last else n % size
    for got, what in ((size, f"batch_size {size}"), (last, f"the last batch of {last}")):
        if got % pieces:
            raise ValueError(
                f"the sharding splits each batch over {pieces} devices, and {what} is not a "
                f"multiple of {pieces} (this rank serves {n} samples an epoch, "
                f"drop_last={loader.drop_last}): a batch_size that {pieces} divides, and "
                "drop_last=True where the samples are not a multiple of it"
            )


def batches(
    store: Any,
    batch_size: int,
    *,
    sharding: Any = None,
    epochs: int | None = None,
    **options: Any,
) -> Batches:
    """Return the batches of a store as dicts of ``jax.Array`` (a :class:`StoreLoader`'s).

    Args:
        store: What :class:`StoreLoader` opens: a path, an ``s3://`` URL, a cache reference.
        batch_size: Samples per batch loaded by this process (with ``sharding`` over several
            processes, the global batch is ``batch_size`` times the process count).
        sharding: A ``jax.sharding.Sharding`` (e.g. ``NamedSharding(mesh, P("data"))``) that
            splits the leading, batch axis; every entry is placed with it. A ``jax.Device``
            places each batch on that device. None: on the loader's device, as DLPack gives.
        epochs: None: each iteration serves the loader's next epoch. An integer: one
            iteration serves every epoch until the loader's epoch reaches it.
        **options: Every other keyword of :class:`StoreLoader` (``shuffle``, ``seed``,
            ``drop_last``, ``augment``, ``mixup``, ``device``, ``dtype``: images and audio
            as floats, :mod:`loaders.transfer.dtype`, ...). ``rank`` and
            ``world_size`` default to ``jax.process_index()`` and ``jax.process_count()``
            when JAX runs several processes.

    Raises:
        ValueError: A setting is out of range, or ``sharding`` cannot split a batch evenly
            (``batch_size``, or with ``drop_last=False`` the last batch of an epoch).
    """
    if isinstance(sharding, jax.Device):
        sharding = jax.sharding.SingleDeviceSharding(sharding)
    if "rank" not in options and "world_size" not in options and jax.process_count() > 1:
        options.update(rank=jax.process_index(), world_size=jax.process_count())
    loader = StoreLoader(store, batch_size, **options)
    try:
        if sharding is not None:
            _check_split(loader, sharding)
        return Batches(loader, sharding, epochs)
    except BaseException:
        loader.close()
        raise

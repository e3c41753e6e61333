"""Contract checks of a loader's epochs and state: the rules of ``loaders.contract``.

:class:`LoaderStateContract` is part of :class:`tests.contracts.loader_contract.LoaderContract`
(every loader runs it); it needs the same ``make_loader`` factory and the ``store`` fixture.

* ``epoch`` is read-only; ``set_epoch`` takes a non-negative integer; settings that are not
  integers in range raise ``ValueError`` naming the setting and the value.
* An iteration broken off ends its epoch: the next iteration serves the next epoch (a new order,
  as a shuffling ``DataLoader`` draws on each iteration); only ``load_state_dict`` resumes
  mid-epoch, and ``set_epoch`` restarts one explicitly.
* A state is plain JSON: ``epoch``, ``batch``, ``rank``, the settings and the data identity; a
  state differing in any setting or in the data, or lacking its position, is refused naming it;
  one of another world size resumes at an epoch's start, and mid-epoch with its global batch
  kept (``loaders.selection.resume``).
* ``mixup(images, labels, generator)`` draws from a generator seeded by
  :func:`loaders.batching.order.batch_seed` of (seed, epoch, rank, batch), so resumed runs draw
  the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from loaders.batching.order import batch_seed
from loaders.errors import LoaderError
from tests.contracts.index_store import NUM_CLASSES, LoaderFactory, cat, collect

__all__ = ["LoaderStateContract"]

SETTINGS = {"seed", "world_size", "batch_size", "shuffle", "drop_last", "buffer_chunks"}
ELASTIC = {"world_size", "batch_size", "order_world", "order_batch"}  # resumed/elastic.py


def _draw_mixup(images: Any, labels: Any, gen: torch.Generator) -> tuple[Any, Any]:
    """A mixup that shows what it got: each target row is (label, one draw of ``gen``)."""
    draws = torch.rand(len(labels), generator=gen, dtype=torch.float64, device=gen.device)
    return images, torch.stack([labels.to(draws.device, torch.float64), draws], 1)


def _changed(value: Any) -> Any:
    """Return a value of the same kind as ``value`` but different from it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return f"other-{value}"


class LoaderStateContract:
    """Epoch and state checks every loader must pass; see the module docstring."""

    make_loader: ClassVar[LoaderFactory]
    # the mixup the suite passes: ``mixup(images, labels, generator)``; a fields store's suite
    # passes one with ``apply_fields`` that does the same with the ``label`` field
    MIXUP: ClassVar[Any] = staticmethod(_draw_mixup)
    # the loader offers Lightning's hook, ``batch_sampler.sampler.set_epoch`` (a JAX or Keras
    # loop never calls it: their suites say False and set the epoch on the loader alone)
    LIGHTNING_HOOK: ClassVar[bool] = True

    def _epoch(self, path: Path, epoch: int = 0, **kw: Any) -> list[dict[str, Any]]:
        loader = self.make_loader(path, **{"batch_size": 8, "seed": 0, **kw})
        loader.set_epoch(epoch)
        return collect(loader)

    def test_breaking_off_ends_the_epoch_and_the_next_iteration_serves_the_next(
        self, store: Path
    ) -> None:
        # `for b in loader: ... break` each epoch used to serve the same first batches forever
        loader = self.make_loader(store, batch_size=8, seed=0)
        loader.set_epoch(2)
        head = collect(loader, limit=3)
        assert (loader.epoch, loader.state_dict()["batch"]) == (2, 3)  # a checkpoint here
        again = collect(loader)  # a new iteration: epoch 2 ended when it broke off
        np.testing.assert_array_equal(cat(again, "index"), cat(self._epoch(store, 3), "index"))
        np.testing.assert_array_equal(
            cat(head, "index"), cat(self._epoch(store, 2), "index")[: 3 * 8]
        )
        assert loader.epoch == 4
        loader.set_epoch(2)  # an explicit restart still serves epoch 2 from its start
        np.testing.assert_array_equal(cat(collect(loader, limit=3), "index"), cat(head, "index"))

    def test_set_epoch_of_the_loaded_epoch_keeps_the_resume(self, store: Path) -> None:
        # the DistributedSampler habit: load the checkpoint, then set_epoch(e) at the top of
        # every epoch; resetting there served the saved epoch's first batches a second time
        first = self.make_loader(store, batch_size=8, seed=0)
        first.set_epoch(2)
        collect(first, limit=3)
        resumed = self.make_loader(store, batch_size=8, seed=0)
        resumed.load_state_dict(first.state_dict())
        resumed.set_epoch(2)
        if self.LIGHTNING_HOOK:
            resumed.batch_sampler.sampler.set_epoch(2)  # as Lightning calls it, each epoch
            assert not hasattr(resumed, "sampler")  # Lightning would inspect it as a DataLoader's
        whole = cat(self._epoch(store, 2), "index")
        np.testing.assert_array_equal(cat(collect(resumed), "index"), whole[3 * 8 :])
        other = self.make_loader(store, batch_size=8, seed=0)
        other.load_state_dict(first.state_dict())
        hook = other.batch_sampler.sampler if self.LIGHTNING_HOOK else other
        hook.set_epoch(5)  # another epoch: a fresh start of it
        np.testing.assert_array_equal(
            cat(collect(other), "index"), cat(self._epoch(store, 5), "index")
        )

    @pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
    def test_set_epoch_takes_a_non_negative_integer(self, store: Path, bad: Any) -> None:
        loader = self.make_loader(store, batch_size=8, seed=0)
        with pytest.raises(ValueError, match=f"epoch must be an integer >= 0, got {bad!r}"):
            loader.set_epoch(bad)
        assert loader.epoch == 0

    def test_epoch_is_read_only(self, store: Path) -> None:
        loader = self.make_loader(store, batch_size=8, seed=0)
        with pytest.raises(AttributeError):
            loader.epoch = 3
        assert loader.epoch == 0

    @pytest.mark.parametrize(
        ("name", "value"), [("batch_size", 0), ("seed", -1), ("batch_size", 2.0), ("seed", True)]
    )
    def test_bad_settings_raise_naming_the_value(self, store: Path, name: str, value: Any) -> None:
        kw = {"batch_size": 8, "seed": 0, name: value}
        with pytest.raises(ValueError, match=f"{name} must be an integer >= .*got {value!r}"):
            self.make_loader(store, **kw)

    def test_state_is_json_with_settings_and_data_identity(self, store: Path) -> None:
        loader = self.make_loader(store, batch_size=8, seed=4, rank=1, world_size=2)
        loader.set_epoch(1)
        collect(loader, limit=2)
        state = loader.state_dict()
        assert json.loads(json.dumps(state)) == state
        assert {
            "epoch": 1,
            "batch": 2,
            "rank": 1,
            "seed": 4,
            "world_size": 2,
            "batch_size": 8,
            "shuffle": True,
            "drop_last": True,
        }.items() <= state.items()
        assert set(state) - {"epoch", "batch", "rank"} > SETTINGS  # + the data identity

    def test_a_state_differing_in_any_setting_or_the_data_is_refused(self, store: Path) -> None:
        loader = self.make_loader(store, batch_size=8, seed=4)
        state = loader.state_dict()
        for key in sorted(set(state) - {"epoch", "batch", "rank", *ELASTIC}):
            with pytest.raises(LoaderError, match=f"'{key}': \\("):
                loader.load_state_dict({**state, key: _changed(state[key])})
        # another world size: mid-epoch only with the global batch kept (resumed elsewhere)
        mid = {**state, "batch": 2, "world_size": 2, "order_world": 2}
        with pytest.raises(LoaderError, match=r"global batch of 16; .* batch_size=16 keeps it"):
            loader.load_state_dict(mid)
        loader.load_state_dict({**mid, "batch": 0})  # an epoch's start: cut for this world
        for key in ("epoch", "batch"):
            with pytest.raises(LoaderError, match=f"state lacks \\['{key}'\\]"):
                loader.load_state_dict({k: v for k, v in state.items() if k != key})
        with pytest.raises(LoaderError, match=r"state batch 99 outside \[0, 12\] of epoch 0"):
            loader.load_state_dict({**state, "batch": 99})
        loader.load_state_dict(state)  # the unchanged state still resumes
        assert (loader.epoch, len(collect(loader))) == (0, 12)

    def test_mixup_draws_from_the_batch_generator(self, store: Path) -> None:
        kw = {"batch_size": 8, "seed": 6, "rank": 1, "world_size": 2, "mixup": self.MIXUP}
        loader = self.make_loader(store, **kw)
        loader.set_epoch(3)
        batches = collect(loader)
        assert batches and all("label" not in b for b in batches)
        for number, b in enumerate(batches):
            gen = torch.Generator().manual_seed(batch_seed(6, 3, 1, number))
            want = torch.rand(len(b["index"]), generator=gen, dtype=torch.float64).numpy()
            np.testing.assert_array_equal(b["target"][:, 1], want)
            np.testing.assert_array_equal(b["target"][:, 0], b["index"] % NUM_CLASSES)
        first = self.make_loader(store, **kw)
        first.set_epoch(3)
        collect(first, limit=2)
        resumed = self.make_loader(store, **kw)
        resumed.load_state_dict(first.state_dict())
        tail = collect(resumed)
        np.testing.assert_array_equal(cat(tail, "target"), cat(batches[2:], "target"))

    def test_close_is_idempotent_and_the_loader_a_context_manager(self, store: Path) -> None:
        with self.make_loader(store, batch_size=8, seed=0) as loader:
            head = collect(loader, limit=2)
        loader.close()  # again: nothing left to release
        want = self._epoch(store, 0)
        np.testing.assert_array_equal(cat(head, "index"), cat(want[:2], "index"))
        again = cat(collect(loader), "index")  # still iterable: the next epoch (0 broke off)
        np.testing.assert_array_equal(again, cat(self._epoch(store, 1), "index"))

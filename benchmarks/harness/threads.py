"""How many intra-op threads torch runs on the training thread while the harness measures.

torch's default pool is one thread per core. Beside loader threads (StoreLoader's readers) or
worker processes that already take the cores, every small torch op of the training thread (a
store loader's augmentation on the CPU, the model step) wakes a pool that has no core to run
on, and waits for it: on a busy 2-core host a row ran 10-20 times slower with the default than
with one thread, which inverted the ranking of the strategies. So the harness sizes the pool
to the cores the loaders leave: ``max(1, usable cores - loader workers/threads)``, which is 1
whenever the loaders get every core (the default ``--workers``). ``--torch-threads N`` sets it
instead; a pool larger than the cores left is named in the report as a possible slowdown.
The pool is set for the run and restored after it (the process's own setting is not kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["TorchThreads", "torch_threads_of"]


@dataclass(frozen=True)
class TorchThreads:
    """The training thread's torch pool for a run.

    Attributes:
        threads: Intra-op threads.
        given: Whether ``--torch-threads`` set it (else the default policy).
        cores: Usable cores.
        loaders: Loader workers/threads (``--workers``).
    """

    threads: int
    given: bool
    cores: int
    loaders: int

    @classmethod
    def choose(cls, given: int | None, cores: int, loaders: int) -> TorchThreads:
        """``given`` (``--torch-threads``), or the cores the loaders leave, at least 1."""
        if given is not None:
            return cls(int(given), True, cores, loaders)
        return cls(max(1, cores - loaders), False, cores, loaders)

    @property
    def text(self) -> str:
        """How the pool was chosen, for the report."""
        if self.given:
            return f"--torch-threads {self.threads}"
        return (
            f"default: the {self.cores} usable cores less the {self.loaders} loader "
            "workers/threads, at least 1"
        )

    @property
    def oversubscribed(self) -> bool:
        """Whether the pool is larger than the cores the loaders leave it."""
        return self.threads > max(1, self.cores - self.loaders)

    def caveat(self) -> str | None:
        """What a pool larger than the cores left may do to the rows (None: it is not)."""
        if not self.oversubscribed:
            return None
        return (
            f"torch ran {self.threads} intra-op threads on the training thread beside "
            f"{self.loaders} loader workers/threads on {self.cores} cores: a row whose "
            "training thread runs torch ops (a store loader's augmentation on the CPU, the "
            "model step) may be slowed by waiting for them, not only by other processes or "
            "the model; rerun with `--torch-threads 1` (the default here would be "
            f"{max(1, self.cores - self.loaders)}) to check."
        )


@contextmanager
def torch_threads_of(threads: int) -> Iterator[None]:
    """Run torch's intra-op pool at ``threads`` while inside; restore its size after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)

"""Diagnose your own training loop: is it data-bound, and what to change.

Wrap any iterable of batches (your existing DataLoader, a StoreLoader, a DALI loader, a
``loaders.jax`` iterator, a ``tf.data`` dataset)::

    loader = Diagnose(loader)
    for epoch in range(epochs):
        for images, labels in loader:
            train_step(images, labels)
    loader.report().print()

Keras ``fit`` takes ``Diagnose(ds).keras()``, a ``tf.data.Dataset`` whose every iteration is
timed (``model.fit(diag.keras(), epochs=E)``, then ``diag.report()``). A JAX step returns before
its work is done: give ``sync`` (e.g. ``lambda: jax.block_until_ready(state)``) so each step
ends when its work does, as ``torch.cuda.synchronize`` does for CUDA.

The wrapper times the data wait (time blocked in ``next``, and in making the iterator for a
pass's first step) and the compute (time between one yield and the next request), measures the
CPU of the work that loads (the training thread inside ``next``, the worker processes or the
loader's threads: see :mod:`loaders.diagnostics.evidence`), samples utilisation with
:class:`~loaders.diagnostics.monitor.Monitor` (the GPU through pynvml when there is one), and
prints a verdict against the usual targets plus advice about the wrapped loader's own settings,
with the measured reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from loaders.diagnostics.advice import advise
from loaders.diagnostics.analysis import verdict
from loaders.diagnostics.evidence import CpuReading, gather
from loaders.diagnostics.loader_info import JAX, describe_loader
from loaders.diagnostics.monitor import Monitor, MonitorResult
from loaders.diagnostics.report import Diagnosis
from precompute.checks import check_integer
from precompute.runtime.raylocal import available_cpus as usable_cores  # the one affinity count

__all__ = ["Diagnose", "Diagnosis", "usable_cores"]

T = TypeVar("T")
Clock = Callable[[], float]


def _batch_len(batch: Any) -> int | None:
    first = batch
    if isinstance(batch, dict):
        first = next(iter(batch.values()), None)
    elif isinstance(batch, (tuple, list)) and batch:
        first = batch[0]
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


def _mean(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


class Diagnose(Generic[T]):
    """Wraps an iterable of batches and measures data wait vs compute while you iterate.

    Args:
        iterable: Your loader (re-iterable for several epochs, like a DataLoader).
        warmup_steps: Steps at the start excluded from the figures.
        interval: Monitor sampling interval in seconds.
        cores: Cores the loader may use (default: this process's CPU affinity); give it where
            a container's CPU quota is lower than the cores it sees.
        clock: Wall clock in seconds (default ``time.perf_counter``).
        thread_clock: CPU clock of the calling thread (default ``time.thread_time``).
        sync: Called when a step ends, before the next batch is asked for: waits for the
            step's asynchronous work (JAX, CUDA) so that it counts as the step's.
    """

    def __init__(
        self,
        iterable: Iterable[T],
        *,
        warmup_steps: int = 2,
        interval: float = 0.1,
        cores: int | None = None,
        clock: Clock = time.perf_counter,
        thread_clock: Clock = time.thread_time,
        sync: Callable[[], Any] | None = None,
    ) -> None:
        warmup_steps = check_integer("warmup_steps", warmup_steps, 0)
        if cores is not None:
            cores = check_integer("cores", cores, 1)
        self.iterable = iterable
        self.warmup_steps = warmup_steps
        self.cores = cores or usable_cores()
        self.monitor = Monitor(interval)
        self.steps: list[tuple[float, float]] = []
        self.wait_cpu: list[float] = []
        self.samples: list[int | None] = []
        self.passes = 0
        self.pass_starts: list[int] = []  # the step index each pass began at
        self.sync = sync
        self._clock, self._thread_clock = clock, thread_clock
        self._window: list[CpuReading] = []
        self._started = False
        self._result: MonitorResult | None = None

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:  # set_epoch, sampler, dataset, ...
        if name == "iterable":
            raise AttributeError(name)
        return getattr(self.iterable, name)

    def __iter__(self) -> Iterator[T]:
        if not self._started:
            self.monitor.start()
            self._started = True
        self.passes += 1
        self.pass_starts.append(len(self.steps))
        it: Iterator[T] | None = None  # made inside the first step's wait: it is data wait
        pending: tuple[float, float, float] | None = None  # (wait, wait cpu, yield time)
        try:
            while True:
                if pending is not None and self.sync is not None:
                    self.sync()
                t0, c0 = self._clock(), self._thread_clock()
                if pending is not None:
                    self._record(pending[0], pending[1], t0 - pending[2])
                if len(self.steps) >= self.warmup_steps and not self._window:
                    self._window.append(self._read_cpu(t0, c0))
                try:
                    it = iter(self.iterable) if it is None else it
                    item = next(it)
                except StopIteration:
                    return
                t1, c1 = self._clock(), self._thread_clock()
                self.samples.append(_batch_len(item))
                pending = (t1 - t0, c1 - c0, t1)
                yield item
        finally:
            if self._window:
                self._window[1:] = [self._read_cpu(self._clock(), self._thread_clock())]

    def _read_cpu(self, t: float, thread_s: float) -> CpuReading:
        own, children, monitor = self.monitor.cpu_split()
        return CpuReading(t, thread_s, own, children, monitor, self.monitor.storage_bytes())

    def _record(self, wait: float, wait_cpu: float, compute: float) -> None:
        self.steps.append((wait, compute))
        self.wait_cpu.append(wait_cpu)
        self.monitor.record_step(wait, compute)

    def keras(self) -> Any:
        """A ``tf.data.Dataset`` Keras ``fit`` accepts, each iteration one timed pass.

        For a wrapped ``tf.data`` dataset: ``model.fit(diag.keras(), epochs=E)``. Keras makes
        a new iterator of it each epoch, and so a new one of the wrapped dataset: that cost
        is measured as the first step's wait, as in the loop Keras runs without the diagnosis.

        Raises:
            TypeError: The wrapped loader is not a ``tf.data`` dataset.
        """
        from loaders.diagnostics.frameworks import keras_dataset

        if not hasattr(self.iterable, "element_spec"):
            raise TypeError(
                f"keras() wraps a tf.data dataset; {type(self.iterable).__name__} is not one "
                "(iterate the Diagnose wrapper in your own loop instead)"
            )
        return keras_dataset(self.__iter__, self.iterable)

    def __enter__(self) -> Diagnose[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> MonitorResult | None:
        """Stop the monitor (idempotent) and return what it saw."""
        if self._started and self._result is None:
            self._result = self.monitor.stop()
        return self._result

    def report(self) -> Diagnosis:
        """Stop measuring and return the :class:`Diagnosis`."""
        res = self.close()
        steady = self.steps[self.warmup_steps :]
        n = [s for s in self.samples[self.warmup_steps : len(self.steps)] if s is not None]
        secs = sum(w + c for w, c in steady)
        sps = sum(n) / secs if secs > 0 and len(n) == len(steady) and n else None
        cpu_mean = _mean(res.series("cpu_percent")) if res else None
        machine = _mean(res.series("machine_cpu_percent")) if res else None
        has_gpu = bool(res and res.has_gpu)
        other = None if cpu_mean is None or machine is None else max(0.0, machine - cpu_mean)
        info = describe_loader(self.iterable)
        window = (self._window[0], self._window[-1]) if len(self._window) == 2 else None
        ev = gather(
            steady,
            self.wait_cpu[self.warmup_steps :],
            info,
            window,
            cores=self.cores,
            has_gpu=has_gpu,
            other_cpu_percent=other,
            passes=self.passes,
            pass_starts=[i - self.warmup_steps for i in self.pass_starts[1:]],
        )
        v = verdict(steady, res.series("gpu_util") if res and has_gpu else None)
        return Diagnosis(
            len(steady),
            sps,
            ev.share,
            ev.step_cv,
            cpu_mean,
            machine,
            v,
            advise(ev, info),
            "\n  ".join(n for n in (res.note if res else "", self._async_note(info)) if n),
            ev.wait_period_steps,
            evidence=ev,
            loader=info,
        )

    def _async_note(self, info: Any) -> str:
        """Say so when a JAX loop's steps were not waited for (their work may show as wait)."""
        if info.kind != JAX or self.sync is not None:
            return ""
        return (
            "JAX runs a step asynchronously: without Diagnose(..., sync=lambda: "
            "jax.block_until_ready(state)) its compute can show up as data wait."
        )

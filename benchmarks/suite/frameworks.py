"""``loaders.tf`` and ``loaders.jax`` against ``StoreLoader`` on the same store, in one run.

Run: ``.venv/bin/python -m benchmarks.suite.frameworks [--sizes 128,32] [--runs 5]``

Rows, per store (random pixels, ``--samples`` images of each side in ``--sizes``, page cache
warm), each draining one whole epoch per round, rows taking turns (:mod:`benchmarks.runner`):

* ``StoreLoader``: the batches as torch tensors, the reference;
* ``loaders.tf``: the same loader's batches through a ``tf.data.Dataset`` (DLPack), iterated
  eagerly, as Keras ``fit`` pulls them;
* ``loaders.tf (x, y)``: the same, as Keras pairs (``inputs="image", target="label"``);
* ``loaders.tf (graph)``: the pairs taken inside a ``tf.function`` (a graph loop over the
  dataset, a new iterator each epoch), as Keras ``fit`` takes them (its train function pulls
  ``next(iterator)`` in graph, ``steps_per_execution`` steps per call); the sleep of a step is
  a ``py_function`` there;
* ``loaders.tf (graph, 1 iter)``: the same, but one iterator for the whole run over a dataset
  of every epoch (``epochs=``), each round pulling one epoch's steps in a ``tf.function``, as
  Keras ``fit(ds, epochs=E, steps_per_epoch=len(loader))`` keeps one iterator;
* ``loaders.jax``: the same loader's batches as ``jax.Array``, each batch waited for
  (``jax.block_until_ready``), so JAX's asynchronous dispatch hides nothing;
* on the stores without a step, two floors with no loader at all, one epoch's count of the
  first batch's arrays over and over: ``floor: tf.data`` (a ``from_generator`` yielding them,
  one iterator, pulled in a ``tf.function`` as above) and ``floor: jax.device_put`` (placed
  and waited for): what the framework alone costs per batch, the most the bridges can reach.

Then, on the first store: each batch followed by a simulated training step (``--step-ms`` of
``time.sleep``: a GPU step leaves the host free, so what the bridges do on their own threads
overlaps it; what they do on the training thread does not), and ``TrainAugment`` on the CPU
(training-ready float batches).
Reported: batches/s and CPU ms per batch, and each bridge's batches/s over StoreLoader's (the
goal: at least 0.90). Setup (stores, loaders, TF and JAX imports) happens outside the timing.
Results are printed, not committed.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks.environment import environment_line
from benchmarks.image_data import random_store
from benchmarks.runner import Bench, Line, Row, Run, add_json_argument, ratio

__all__ = ["main"]

REFERENCE = "StoreLoader"
BRIDGES = (
    "loaders.tf",
    "loaders.tf (x, y)",
    "loaders.tf (graph)",
    "loaders.tf (graph, 1 iter)",
    "loaders.jax",
)
FLOORS = ("floor: tf.data", "floor: jax.device_put")
FOREVER = 2**62  # epochs= of a dataset iterated once for the whole run


def _count(batches: Iterable[Any], step_s: float) -> int:
    n = 0
    for _ in batches:
        n += 1
        if step_s:
            time.sleep(step_s)
    return n


def _count_jax(batches: Iterable[Any], step_s: float) -> int:
    import jax

    n = 0
    for batch in batches:
        jax.block_until_ready(batch)  # type: ignore[no-untyped-call]
        n += 1
        if step_s:
            time.sleep(step_s)
    return n


def _graph_drain(dataset: Any, step_s: float) -> Callable[[], int]:
    """A compiled loop over ``dataset`` counting its elements, as Keras ``fit`` consumes it."""
    import tensorflow as tf

    def step() -> None:
        time.sleep(step_s)

    @tf.function  # type: ignore[untyped-decorator]
    def drain() -> Any:
        n = tf.constant(0)
        for _ in dataset:
            if step_s:
                tf.py_function(step, [], [])
            n += 1
        return n

    return lambda: int(drain())


def _graph_steps(dataset: Any, steps: int, step_s: float) -> Callable[[], int]:
    """``steps`` elements of one iterator kept across calls, pulled in a ``tf.function``.

    As Keras ``fit`` with ``steps_per_epoch`` pulls them: one iterator for every epoch (made
    here, outside the timing; it starts in the warm-up round).
    """
    import tensorflow as tf

    iterator = iter(dataset)

    def step() -> None:
        time.sleep(step_s)

    @tf.function  # type: ignore[untyped-decorator]
    def pull() -> Any:
        n = tf.constant(0)
        for _ in tf.range(steps):
            tf.nest.map_structure(tf.identity, next(iterator))
            if step_s:
                tf.py_function(step, [], [])
            n += 1
        return n

    return lambda: int(pull())


def _floor_rows(loader: Any, keys: list[str]) -> list[Row]:
    """The frameworks alone: the loader's first batch, one epoch's count over and over."""
    import jax
    import numpy as np
    import tensorflow as tf

    batch = next(iter(loader))
    arrays = [np.ascontiguousarray(batch[k].numpy()) for k in keys]
    steps = len(loader)
    spec = tuple(tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype)) for a in arrays)

    def same() -> Any:
        while True:
            yield tuple(arrays)

    generated = tf.data.Dataset.from_generator(same, output_signature=spec)
    placed = [a.astype(np.int32) if a.dtype == np.int64 else a for a in arrays]

    def put() -> int:
        for _ in range(steps):
            jax.block_until_ready(jax.device_put(placed))  # type: ignore[no-untyped-call]
        return steps

    return [_row(FLOORS[0], _graph_steps(generated, steps, 0.0)), _row(FLOORS[1], put)]


def _row(name: str, drain: Callable[[], int]) -> Row:
    def body(run: Run) -> int:
        return drain()

    return Row(name, body, unit="batch", show=("rate", "cpu_ms"))


def rows(
    store: Path, batch: int, step_s: float = 0.0, floors: bool = False, **options: Any
) -> list[Row]:
    """The bridges' rows over ``store``, each with its own loader of the same settings.

    ``step_s``: seconds the consumer sleeps after each batch, as a training step on a GPU
    leaves the host free; 0 drains the batches as fast as they come. ``floors``: add the
    frameworks' rows without a loader (:func:`_floor_rows`).
    """
    import loaders

    kw = {"seed": 0, "device": "cpu", **options}
    xy = {"inputs": "image", "target": _target(options)}
    reference = loaders.StoreLoader(store, batch, **kw)
    dataset = loaders.tf.dataset(store, batch, **kw)
    pairs = loaders.tf.dataset(store, batch, **xy, **kw)
    graph = loaders.tf.dataset(store, batch, **xy, **kw)
    state = loaders.tf.LoaderState()
    kept = loaders.tf.dataset(store, batch, epochs=FOREVER, state=state, **xy, **kw)
    jax_batches = loaders.jax.batches(store, batch, **kw)
    steps = len(reference)
    out = [
        _row(REFERENCE, lambda: _count(reference, step_s)),
        _row(BRIDGES[0], lambda: _count(dataset, step_s)),
        _row(BRIDGES[1], lambda: _count(pairs, step_s)),
        _row(BRIDGES[2], _graph_drain(graph, step_s)),
        _row(BRIDGES[3], _graph_steps(kept, steps, step_s)),
        _row(BRIDGES[4], lambda: _count_jax(jax_batches, step_s)),
    ]
    if floors:
        out += _floor_rows(loaders.StoreLoader(store, batch, **kw), list(xy.values()))
    return out


def _target(options: dict[str, Any]) -> str:
    return "target" if options.get("mixup") is not None else "label"


def lines(floors: bool = False) -> list[Line]:
    """Each bridge's batches/s over StoreLoader's, against the goal; the floors' too."""
    out = [
        ratio(f"{name} / {REFERENCE}: batches/s", name, REFERENCE, note="(goal >= 0.90)")
        for name in BRIDGES
    ]
    return out + [
        ratio(f"{name} / {REFERENCE}: batches/s", name, REFERENCE, note="(no loader)")
        for name in FLOORS
        if floors
    ]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=2048, help="images per store")
    p.add_argument("--sizes", default="128,32", help="stored side lengths, one store each")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--augment-size", type=int, default=96, help="TrainAugment's output side")
    p.add_argument("--step-ms", type=float, default=5.0, help="the simulated training step")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--workdir", type=Path, default=None)
    add_json_argument(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Build the stores, measure every row and print the ratios."""
    import jax
    import tensorflow as tf

    from loaders.augment import TrainAugment

    args = _parse(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    bench = Bench("frameworks", args.json)
    with bench, tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        bench.note(
            f"# frameworks  {environment_line()}",
            f"# tensorflow={tf.__version__} jax={jax.__version__} samples={args.samples} "
            f"batch={args.batch} runs={args.runs}",
        )
        root = Path(tmp)
        stores = {s: random_store(root / str(s), args.samples, s, npy=False)[0] for s in sizes}
        for size, store in stores.items():
            title = f"[{size}] {size}x{size}x3 uint8, batch {args.batch}, no augment"
            _measure(bench, title, rows(store, args.batch, floors=True), args.runs, floors=True)
        title = (
            f"[{sizes[0]}+step] a {args.step_ms:g} ms step after each batch (time.sleep, as a "
            "GPU step leaves the host free)"
        )
        _measure(bench, title, rows(stores[sizes[0]], args.batch, args.step_ms / 1e3), args.runs)
        augment = TrainAugment(size=args.augment_size)
        title = f"[{sizes[0]}+augment] TrainAugment(size={args.augment_size}) on the CPU"
        _measure(bench, title, rows(stores[sizes[0]], args.batch, augment=augment), args.runs)


def _measure(bench: Bench, title: str, made: list[Row], runs: int, floors: bool = False) -> None:
    """Measure ``made``, then drop them: the kept tf.data iterators end while Python runs."""
    bench.measure(title, made, runs=runs, lines=lines(floors))
    made.clear()
    gc.collect()


if __name__ == "__main__":
    main()

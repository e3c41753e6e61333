"""``loaders.tf`` and ``loaders.jax`` against ``StoreLoader`` on the same store, in one run.

Run: ``.venv/bin/python -m benchmarks.suite.frameworks [--sizes 128,32] [--runs 5]``

Rows, per store (random pixels, ``--samples`` images of each side in ``--sizes``, page cache
warm), each draining one whole epoch per round, rows taking turns (:mod:`benchmarks.runner`):

* ``StoreLoader``: the batches as torch tensors, the reference;
* ``loaders.tf``: the same loader's batches through a ``tf.data.Dataset`` (DLPack), iterated
  eagerly, as Keras ``fit`` pulls them;
* ``loaders.tf (x, y)``: the same, as Keras pairs (``inputs="image", target="label"``);
* ``loaders.jax``: the same loader's batches as ``jax.Array`` (DLPack), each batch waited for
  (``jax.block_until_ready``), so JAX's asynchronous dispatch hides nothing.

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
BRIDGES = ("loaders.tf", "loaders.tf (x, y)", "loaders.jax")


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


def _row(name: str, drain: Callable[[], int]) -> Row:
    def body(run: Run) -> int:
        return drain()

    return Row(name, body, unit="batch", show=("rate", "cpu_ms"))


def rows(store: Path, batch: int, step_s: float = 0.0, **options: Any) -> list[Row]:
    """The four rows over ``store``, each with its own loader of the same settings.

    ``step_s``: seconds the consumer sleeps after each batch, as a training step on a GPU
    leaves the host free; 0 drains the batches as fast as they come.
    """
    import loaders

    kw = {"seed": 0, "device": "cpu", **options}
    reference = loaders.StoreLoader(store, batch, **kw)
    dataset = loaders.tf.dataset(store, batch, **kw)
    pairs = loaders.tf.dataset(store, batch, inputs="image", target=_target(options), **kw)
    jax_batches = loaders.jax.batches(store, batch, **kw)
    return [
        _row(REFERENCE, lambda: _count(reference, step_s)),
        _row(BRIDGES[0], lambda: _count(dataset, step_s)),
        _row(BRIDGES[1], lambda: _count(pairs, step_s)),
        _row(BRIDGES[2], lambda: _count_jax(jax_batches, step_s)),
    ]


def _target(options: dict[str, Any]) -> str:
    return "target" if options.get("mixup") is not None else "label"


def lines() -> list[Line]:
    """Each bridge's batches/s over StoreLoader's, against the goal."""
    return [
        ratio(f"{name} / {REFERENCE}: batches/s", name, REFERENCE, note="(goal >= 0.90)")
        for name in BRIDGES
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
            bench.measure(title, rows(store, args.batch), runs=args.runs, lines=lines())
        title = (
            f"[{sizes[0]}+step] a {args.step_ms:g} ms step after each batch (time.sleep, as a "
            "GPU step leaves the host free)"
        )
        step_rows = rows(stores[sizes[0]], args.batch, args.step_ms / 1e3)
        bench.measure(title, step_rows, runs=args.runs, lines=lines())
        augment = TrainAugment(size=args.augment_size)
        title = f"[{sizes[0]}+augment] TrainAugment(size={args.augment_size}) on the CPU"
        bench.measure(
            title,
            rows(stores[sizes[0]], args.batch, augment=augment),
            runs=args.runs,
            lines=lines(),
        )


if __name__ == "__main__":
    main()

"""Where a sample's time goes on the CPU fast path, step by step, per output dtype and format.

Run: ``.venv/bin/python -m benchmarks.suite.augment_steps [--batch 64] [--runs 15] [--threads 2]``

Setup (not timed): a random uint8 batch of ``--store-size`` px and its crop boxes, drawn as
``TrainAugment`` draws them. Timed, each step on its own over the whole batch, the steps taking
turns run by run (:mod:`benchmarks.runner`); printed is the thread CPU time per sample
(``time.thread_time``, so time the thread spent descheduled on a busy host does not count),
min / median / max over ``--runs`` in milliseconds:

* ``crop copy``: each crop copied out dense (mirrored when flipped);
* ``resize``: torch's uint8 bilinear kernel on the dense crops, into the thread's buffer;
* ``normalise <dtype> <format>``: the fast path's converter on a resized sample still in cache,
  into a reused output batch; for half types also ``of which rounding``: the one copy that
  rounds the float32 result into the output;
* ``call <dtype> <format>, N thr``: one ``TrainAugment`` call (box draw included) at 1 and
  ``--threads`` threads: wall time and process CPU per sample. CPU above the steps' sum is
  Python and dispatch overhead; wall x threads above CPU is time the threads waited.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from benchmarks.runner import Bench, Row, Run, add_json_argument
from loaders.augment import TrainAugment
from loaders.augment.crop import random_crops
from loaders.augment.image.color import normalize_converter
from loaders.augment.image.resample import _resize_one
from loaders.augment.image.threads import scratch
from loaders.augment.outbuf import output_batch

__all__ = ["main"]

FORMATS = [(d, cl) for d in ("float32", "bfloat16", "float16") for cl in (True, False)]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224, help="output side")
    p.add_argument("--store-size", type=int, default=256)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    add_json_argument(p)
    return p.parse_args(argv)


def _name(dtype: str, channels_last: bool) -> str:
    return f"{dtype} {'channels_last' if channels_last else 'planar'}"


def steps(images: torch.Tensor, aug: TrainAugment) -> list[Row]:
    """Return one row per step over the batch, timed by the thread's CPU clock."""
    b = images.shape[0]
    extents = torch.tensor([[0, 0, images.shape[1], images.shape[2]]] * b, dtype=torch.int32)
    crops, _ = random_crops(extents, torch.Generator().manual_seed(0), aug.policy)
    rows = torch.stack([crops.top, crops.left, crops.height, crops.width, crops.flip.long()], 1)
    boxes = [
        (images[i, t : t + h, left : left + w], bool(f))
        for i, (t, left, h, w, f) in enumerate(rows.tolist())
    ]
    dense = [c.flip(1) if f else c.contiguous() for c, f in boxes]
    convert = normalize_converter(aug.normalize)

    def crop_copy(run: Run) -> int:
        for c, f in boxes:
            c.flip(1) if f else c.contiguous()
        return b

    def resize(run: Run) -> int:
        for d in dense:
            _resize_one(d, aug.size, False)
        return b

    def normalise(dtype: torch.dtype, channels_last: bool, rounding: bool) -> Callable[[Run], int]:
        out = output_batch(b, aug.size, dtype, channels_last)

        def body(run: Run) -> int:
            for i, d in enumerate(dense):
                with run.untimed():  # in cache, as the path leaves it
                    x = _resize_one(d, aug.size, False)
                if rounding:  # the rounding copy alone, from the float32 result
                    work = scratch("normalised", (aug.size[0], 3 * aug.size[1]), torch.float32)
                    out[i].permute(1, 2, 0).view_as(work).copy_(work)
                else:
                    convert(x, i, out[i])
            return b

        return body

    timed = [Row("crop copy", crop_copy, "thread"), Row("resize", resize, "thread")]
    for dtype, cl in FORMATS:
        body = normalise(getattr(torch, dtype), cl, False)
        timed.append(Row(f"normalise {_name(dtype, cl)}", body, "thread"))
        if cl and dtype != "float32":
            body = normalise(getattr(torch, dtype), cl, True)
            timed.append(Row(f"  of which rounding to {dtype}", body, "thread"))
    return [Row(r.name, r.body, r.clock, show=("cpu_ms",)) for r in timed]


def whole_calls(images: torch.Tensor, augs: dict[str, TrainAugment]) -> list[Row]:
    """One row per policy: a whole call on the batch (box draw included), process CPU."""
    b, s = images.shape[0], images.shape[1]
    extents = torch.tensor([[0, 0, s, s]] * b, dtype=torch.int32)

    def call(aug: TrainAugment) -> Callable[[Run], int]:
        def body(run: Run) -> int:
            aug(images, extents, torch.Generator().manual_seed(run.index))
            return b

        return body

    return [Row(name, call(aug), show=("ms", "cpu_ms")) for name, aug in augs.items()]


def main(argv: list[str] | None = None) -> None:
    """Time every step, then whole calls, and print milliseconds per sample."""
    a = _args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    shape = (a.batch, a.store_size, a.store_size, 3)
    images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)
    base = TrainAugment(size=a.size, path="fast", threads=1)
    with Bench("augment_steps", a.json) as bench:
        title = (
            f"thread CPU per sample, batch {a.batch}, {a.store_size} px -> {a.size} px, 1 thread"
        )
        timed = steps(images, base)
        bench.measure(title, timed, runs=a.runs, warmup=0)
        # the steps' closures hold an output batch per dtype and format: dropped, so that the
        # whole calls below reuse pooled outputs (three per dtype) as a training loop does
        del timed
        augs = {
            f"call {_name(dtype, cl)}, {threads} thr": TrainAugment(
                size=a.size, path="fast", threads=threads, dtype=dtype, channels_last=cl
            )
            for dtype, cl in FORMATS
            if dtype != "float16"
            for threads in sorted({1, a.threads})
        }
        title = "whole TrainAugment calls, wall (ms/sample) and process CPU per sample"
        bench.measure(title, whole_calls(images, augs), runs=a.runs)


if __name__ == "__main__":
    main()

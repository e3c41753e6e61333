"""TensorFlow for the diagnosis: what a ``tf.data`` pipeline is made of, and a dataset Keras fits.

:func:`tf_pipeline` walks a dataset's stages (``Dataset._inputs()``, from the last stage to the
source): whether a ``loaders.tf`` dataset is at its root (``dataset`` marks the one it returns),
how many ``map`` stages it has and how many of them run in parallel, and whether the last
stage prefetches. Only datasets the caller made are read; TensorFlow is never imported here.

:func:`keras_dataset` is what ``Diagnose(ds).keras()`` returns: a ``tf.data.Dataset`` Keras
``fit`` accepts, whose every iteration is one pass of the diagnosis over ``ds`` (each of its
batches timed, and the new iterator Keras makes each epoch with them). Its options turn off
what would run it ahead of Keras's step (autotuning, injected prefetch, parallel maps), so the
wait and the step are measured where Keras takes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["keras_dataset", "tf_pipeline"]

MAPS = ("Map", "ParallelMap", "MapAndBatch", "ParallelInterleave", "Interleave")


def _stage(ds: Any) -> str:
    name = type(ds).__name__.strip("_")
    return name[: -len("Dataset")] if name.endswith("Dataset") else name


def _inputs(ds: Any) -> list[Any]:
    try:
        return list(ds._inputs())
    except Exception:  # not a dataset TensorFlow can walk: its stages are unknown
        return []


def tf_pipeline(ds: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(what loaders.tf recorded, or None; the stages)`` of the ``tf.data`` dataset ``ds``.

    The stages: ``tf_stages`` (names, last first), ``tf_maps`` (map-like stages),
    ``tf_parallel_maps`` (those with ``num_parallel_calls``), ``tf_prefetch`` (the last stage,
    options aside, is a prefetch).
    """
    made: dict[str, Any] | None = None
    names: list[str] = []
    parallel = 0
    todo = [ds]
    while todo:
        d = todo.pop(0)
        made = made or getattr(d, "nostall", None)
        names.append(_stage(d))
        if names[-1] in MAPS and getattr(d, "_num_parallel_calls", None) is not None:
            parallel += 1
        todo += _inputs(d)
    shown = [n for n in names if n != "Options"]
    stages = {
        "tf_stages": " < ".join(shown),
        "tf_maps": sum(n in MAPS for n in shown),
        "tf_parallel_maps": parallel,
        "tf_prefetch": bool(shown) and shown[0] == "Prefetch",
    }
    return made, stages


def keras_dataset(iterate: Callable[[], Iterator[Any]], source: Any) -> Any:
    """A ``tf.data.Dataset`` of ``iterate()``'s elements, with ``source``'s element spec.

    Each iteration of it (Keras: one per epoch) calls ``iterate`` anew.
    """
    import tensorflow as tf  # the caller's: ``source`` is a tf.data dataset

    ds = tf.data.Dataset.from_generator(iterate, output_signature=source.element_spec)
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    options.experimental_optimization.map_parallelization = False
    return ds.with_options(options)

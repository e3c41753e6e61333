"""Known-answer loops of TensorFlow, Keras and JAX (and DALI decoding): the right advice for each.

Each loop runs a real loader through :class:`Diagnose`: a ``loaders.tf`` dataset iterated once
per epoch (as Keras ``fit`` does) or once for every epoch, Keras ``fit`` itself, a ``tf.data``
pipeline decoding real JPEG/PNG files, ``loaders.jax`` batches, and DALI's ``JpegLoader``. The
step is scripted (:class:`~tests.benchmarks.scripted.OffsetClock`) where its length decides the
answer; the loaders' costs are real.
"""

from __future__ import annotations

from typing import Any

import pytest

from loaders.diagnose import Diagnose
from precompute.sources.classes import list_source
from tests.benchmarks.scripted import OffsetClock

tf = pytest.importorskip("tensorflow")
ITERATOR = "each pass over the dataset starts a new tf.data iterator"


def loop(diag: Diagnose[Any], epochs: int, step_s: float, clock: OffsetClock) -> Any:
    for _ in range(epochs):
        for _batch in diag:
            clock.step(step_s, real=min(step_s, 0.005))
    return diag.report()


def test_a_loaders_tf_dataset_iterated_each_epoch_is_told_one_iterator(tiny_store: Any) -> None:
    from loaders import tf as ltf

    clock = OffsetClock()
    ds = ltf.dataset(tiny_store, 8, inputs="image", target="label")  # epochs=None
    res = loop(Diagnose(ds, clock=clock, cores=2), 4, 0.002, clock)
    assert res.loader.kind == "loaders.tf" and res.loader.settings["epochs"] is None
    assert res.loader.settings["prefetch"] == 2 and res.loader.settings["num_threads"] == 2
    first = res.recommendation[0]
    assert first.startswith(ITERATOR), res.text()
    assert "loaders.tf.dataset(..., epochs=E, state=state)" in first
    assert "steps_per_epoch=len(state.loader)" in first
    said = " ".join(res.recommendation)
    assert "precompute a store" not in said  # it reads one already (issue 43's wrong advice)
    assert "stall" not in said  # the stalls are the new iterators, said once
    assert "slow shard" not in res.text() and "chunk reads" not in res.text()  # the iterators


def test_one_iterator_for_every_epoch_behind_a_long_step_needs_no_change(tiny_store: Any) -> None:
    from loaders import tf as ltf

    clock = OffsetClock()
    ds = ltf.dataset(tiny_store, 8, inputs="image", target="label", epochs=3)
    res = loop(Diagnose(ds, clock=clock, cores=2), 1, 0.05, clock)
    assert res.loader.kind == "loaders.tf" and res.loader.settings["epochs"] == 3
    assert res.steps == 3 * 6 - 2
    assert res.bound == "compute"
    assert res.recommendation == [res.recommendation[0]]
    assert "no data-loading change needed" in res.recommendation[0]


def test_keras_fit_takes_the_diagnosed_dataset_and_is_told_steps_per_epoch(
    tiny_store: Any,
) -> None:
    import keras

    from loaders import tf as ltf

    ds = ltf.dataset(tiny_store, 8, inputs="image", target="label")
    model = keras.Sequential([keras.Input((3, 32, 32)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])  # fmt: skip
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    diag = Diagnose(ds, cores=2)
    history = model.fit(diag.keras(), epochs=3, verbose=0)
    res = diag.report()
    assert len(history.history["loss"]) == 3
    assert diag.passes == 3 and res.steps == 3 * 6 - 2  # every batch of every epoch, timed
    assert res.loader.kind == "loaders.tf"
    advice = " ".join(res.recommendation)
    assert ITERATOR in advice and "(Keras fit makes one every epoch)" in advice, res.text()
    with pytest.raises(TypeError, match=r"keras\(\) wraps a tf\.data dataset; list is not one"):
        Diagnose([1, 2]).keras()


def _decoding_pipeline(tiny_data: Any, parallel: bool) -> Any:
    src = list_source(str(tiny_data))
    paths = [src.locate(k) for k, _ in src.items]

    def load(path: Any) -> Any:
        img = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        return tf.image.resize(img, [32, 32])

    ds = tf.data.Dataset.from_tensor_slices(paths)
    if not parallel:
        return ds.map(load).batch(4)
    return ds.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(4).prefetch(tf.data.AUTOTUNE)


def test_a_serial_tf_data_pipeline_is_told_parallel_maps_and_prefetch(tiny_data: Any) -> None:
    diag = Diagnose(_decoding_pipeline(tiny_data, parallel=False), cores=2)
    for _ in range(2):
        for _batch in diag:
            pass
    res = diag.report()
    assert res.loader.kind == "tf.data" and res.bound == "data"
    assert res.loader.settings["tf_stages"] == "Batch < Map < TensorSlice"
    said = [r.split(" ", 3)[:3] for r in res.recommendation]  # each one's first words
    maps = said.index(["give", "its", "1"])
    assert res.recommendation[maps].startswith(
        "give its 1 map stage(s) num_parallel_calls=tf.data.AUTOTUNE: data wait is"
    )
    assert said[maps + 1] == ["end", "the", "pipeline"]
    assert res.recommendation[maps + 1].startswith("end the pipeline with .prefetch(")
    assert "then loaders.tf.dataset" in res.recommendation[maps + 2]


def test_a_parallel_tf_data_pipeline_that_still_waits_is_told_a_store(tiny_data: Any) -> None:
    diag = Diagnose(_decoding_pipeline(tiny_data, parallel=True), cores=2)
    for _ in range(2):
        for _batch in diag:
            pass
    res = diag.report()
    assert res.loader.settings["tf_parallel_maps"] == 1 and res.loader.settings["tf_prefetch"]
    store = [r for r in res.recommendation if r.startswith("precompute a store")]
    assert store and "with the maps parallel and a prefetch already" in store[0], res.text()
    assert not any("num_parallel_calls" in r for r in res.recommendation)


def test_a_jax_loop_reading_on_its_own_thread_is_told_prefetch(tiny_store: Any) -> None:
    from loaders import jax as ljax

    with ljax.batches(tiny_store, 8, prefetch=0, num_threads=1) as batches:
        diag = Diagnose(batches, cores=2)
        for _ in range(2):
            for _batch in diag:
                pass
        res = diag.report()
    assert res.loader.kind == "loaders.jax" and res.bound == "data"
    assert res.recommendation[0].startswith("set prefetch=2 in loaders.jax.batches(...) (now 0):")
    assert "without Diagnose(..., sync=" in res.text()  # its steps were not waited for


def test_a_jax_loop_with_sync_behind_a_long_step_keeps_up(tiny_store: Any) -> None:
    import jax
    import jax.numpy as jnp

    from loaders import jax as ljax

    step = jax.jit(lambda x: jnp.tanh(x.astype(jnp.float32)).mean())
    box: dict[str, Any] = {}
    clock = OffsetClock()
    # Compiled before the timed loop, and scripted steps long beside the real waits of a loaded
    # machine: the real part of each step (compile, scheduling) must not read as step time varying.
    with ljax.batches(tiny_store, 8) as warm:
        step(next(iter(warm))["image"]).block_until_ready()
    with ljax.batches(tiny_store, 8) as batches:
        diag = Diagnose(batches, cores=2, clock=clock, sync=lambda: box["out"].block_until_ready())
        for _ in range(2):
            for batch in diag:
                box["out"] = step(batch["image"])
                clock.step(0.5)
        res = diag.report()
    assert res.loader.kind == "loaders.jax" and res.bound == "compute"
    assert "no data-loading change needed" in res.recommendation[0]
    assert "sync=" not in res.text()


@pytest.mark.dali
def test_dali_decoding_on_every_cpu_thread_is_told_a_store(tiny_data: Any) -> None:
    from loaders.dali import JpegLoader

    loader = JpegLoader(str(tiny_data), 8, 24, device="cpu", num_threads=2)
    diag = Diagnose(loader, cores=2)
    for _ in range(2):
        for _batch in diag:
            pass
    res = diag.report()
    assert res.loader.kind == "dali" and res.loader.settings["decodes"] is True
    assert res.recommendation[0].startswith("precompute a store"), res.text()
    assert "JpegLoader decodes every file on its 2 CPU threads" in res.recommendation[0]

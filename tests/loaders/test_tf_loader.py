"""loaders.tf: StoreLoader's batches as a tf.data.Dataset, fed to real Keras training.

The contract suite runs against the dataset and its :class:`LoaderState` (order, ranks, holes,
resume, state); the rest checks what the bridge adds: the same values as StoreLoader with
augment and mixup, DLPack without a copy and kept batches never overwritten, Keras-ready
elements, Keras ``fit`` on an image store and an audio log-mel store seeing every sample once
per epoch in a new order each epoch, and a Keras run stopped mid-epoch and resumed from a
``tf.train.Checkpoint`` ending with exactly the weights of an uninterrupted run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch

import loaders
from loaders import StoreLoader
from loaders.augment import Mixup, TrainAugment
from loaders.errors import LoaderError
from loaders.frameworks import Forwarding
from tests.contracts.index_store import collect, decode_index, make_index_store
from tests.contracts.loader_contract import LoaderContract
from tests.lazymodule import LazyModule
from tests.loaders.frameworks_data import AUDIO_CLIPS, CLASSES, IMAGES, audio_store, image_store
from tests.processes import REPO

if TYPE_CHECKING:
    import tensorflow as tf
    from tensorflow import keras
else:  # imported by the first test that uses them, not at collection (2 s of CPU a worker)
    tf = LazyModule("tensorflow")
    keras = LazyModule("keras")


class TfFeed(Forwarding):
    """A dataset and its LoaderState, shaped as the contract's loader (iterating the dataset)."""

    def __init__(self, store: Any, **kw: Any) -> None:
        self.state = loaders.tf.LoaderState()
        self.dataset = loaders.tf.dataset(store, state=self.state, **kw)
        assert self.state.loader is not None
        self.loader: StoreLoader = self.state.loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.dataset)

    def state_dict(self) -> dict[str, Any]:  # the state of the batch the consumer took last
        return self.state.state_dict()

    def load_state_dict(self, state: Any) -> None:
        self.state.load_state_dict(state)


class TestTfContract(LoaderContract):
    LIGHTNING_HOOK = False  # Keras never calls Lightning's batch_sampler hook

    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> TfFeed:
        return TfFeed(store_path, device="cpu", **kw)

    def test_corrupted_chunk_raises_naming_the_shard(self, tmp_path: Path) -> None:
        # tf.data turns a generator's exception into a tf.errors.UnknownError that keeps the
        # loader's error type and message (the shard file) in its own message
        path = make_index_store(tmp_path / "c", 64)
        shard = path / "image" / "c" / "2" / "0" / "0" / "0"
        data = bytearray(shard.read_bytes())
        data[100] ^= 0xFF  # inside the first inner chunk's pixels
        shard.write_bytes(bytes(data))
        ds = loaders.tf.dataset(path, 8, seed=0)
        with pytest.raises(tf.errors.UnknownError, match="CorruptChunkError: image: shard file"):
            collect(ds)


@pytest.fixture(scope="module")
def index_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("tf") / "s", 64)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return image_store(tmp_path_factory.mktemp("tf_images"))


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return audio_store(tmp_path_factory.mktemp("tf_audio"))


def test_batches_have_store_loaders_keys_values_augment_and_mixup(index_store: Path) -> None:
    # channels_last: a non-contiguous NCHW tensor, made contiguous for TF
    kw = {"seed": 4, "augment": TrainAugment(size=12, channels_last=True), "mixup": Mixup(7)}
    want = collect(StoreLoader(index_store, 8, **kw))
    ds = loaders.tf.dataset(index_store, 8, **kw)
    assert ds.element_spec["image"] == tf.TensorSpec((None, 3, 12, 12), tf.float32)
    assert ds.element_spec["target"] == tf.TensorSpec((None, 7), tf.float32)
    assert ds.element_spec["index"] == tf.TensorSpec((None,), tf.int64)
    got = collect(ds)
    assert len(got) == len(want) == 8
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys() == {"image", "target", "index", "is_pad"}
        for key in w:
            np.testing.assert_array_equal(g[key], w[key], err_msg=key)


def test_dlpack_shares_the_tensor_and_a_kept_batch_is_never_overwritten(
    index_store: Path,
) -> None:
    tensor = torch.zeros(4, 16, dtype=torch.uint8)
    shared = loaders.tf.to_tf(tensor)
    spec = tf.TensorSpec((None, 16), tf.uint8)  # the dataset's way: a view through the generator
    generated = tf.data.Dataset.from_generator(
        lambda: iter([loaders.tf.to_host(tensor)]), output_signature=spec
    )
    viewed = next(iter(generated))
    tensor[0, 0] = 9  # TF's tensors are the same memory: no copy was made
    assert int(shared.numpy()[0, 0]) == int(viewed.numpy()[0, 0]) == 9
    ds = loaders.tf.dataset(index_store, 8, seed=1, buffer_chunks=1, prefetch=1)
    kept = [(b["image"], b["index"].numpy().copy()) for b in ds]  # buffers TF still holds
    for image, index in kept:
        np.testing.assert_array_equal(decode_index(image.numpy()), index)


def test_bfloat16_batches_arrive_bit_for_bit(index_store: Path) -> None:
    # NumPy has no bfloat16 of its own: the bridge views the bits as TF's bfloat16 type
    kw = {"seed": 2, "augment": TrainAugment(size=12, dtype="bfloat16")}
    want = [b["image"].view(torch.int16) for b in StoreLoader(index_store, 8, **kw)]
    ds = loaders.tf.dataset(index_store, 8, **kw)
    assert ds.element_spec["image"] == tf.TensorSpec((None, 3, 12, 12), tf.bfloat16)
    got = [tf.bitcast(b["image"], tf.int16).numpy() for b in ds]
    assert len(got) == len(want) == 8
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w.numpy())


def test_keys_come_as_strings(images: Path) -> None:
    ds = loaders.tf.dataset(images, 16, seed=0, keys=True)
    assert ds.element_spec["key"] == tf.TensorSpec((None,), tf.string)
    batch = next(iter(ds))
    keys = [k.decode() for k in batch["key"].numpy()]
    assert len(keys) == 16 and all(k.endswith((".jpg", ".png")) for k in keys)


def test_inputs_and_target_make_keras_pairs_weighted_off_the_repeats(index_store: Path) -> None:
    pairs = loaders.tf.dataset(index_store, 8, inputs="image", target="label", seed=0)
    x, y = next(iter(pairs))
    np.testing.assert_array_equal(decode_index(x.numpy()) % 7, y.numpy())
    # 64 samples on 3 ranks: 22 each, 2 repeats in all, weighted 0
    kw = {"inputs": ("image", "is_pad"), "target": "label", "drop_last": False, "world_size": 3}
    zeros = 0
    for rank in range(3):
        elements = list(loaders.tf.dataset(index_store, 8, rank=rank, **kw))
        assert set(elements[0][0]) == {"image", "is_pad"}
        weights = np.concatenate([w.numpy() for _, _, w in elements])
        is_pad = np.concatenate([x["is_pad"].numpy() for x, _, _ in elements])
        assert weights.dtype == np.float32 and len(weights) == 22
        np.testing.assert_array_equal(weights, (~is_pad).astype(np.float32))
        zeros += int((weights == 0).sum())
    assert zeros == 2


def test_one_rank_without_drop_last_makes_pairs_and_class_weight_weighs_them(
    index_store: Path,
) -> None:
    # one rank serves every sample once, no repeats: nothing to weigh off, so plain pairs,
    # which Keras's own class_weight takes (beside sample weights it refuses to)
    kw = {"inputs": "image", "target": "label", "drop_last": False, "seed": 0}
    assert len(loaders.tf.dataset(index_store, 10, **kw).element_spec) == 2
    weights = {0: 0.5, 3: 2.0, 6: 0.0}  # a class not named weighs 1
    got = list(loaders.tf.dataset(index_store, 10, class_weight=weights, **kw))
    assert len(got) == 7  # 64 samples, the last batch of 4
    for x, y, w in got:
        want = [weights.get(int(label), 1.0) for label in y.numpy()]
        np.testing.assert_array_equal(w.numpy(), np.float32(want))
        np.testing.assert_array_equal(decode_index(x.numpy()) % 7, y.numpy())
    # over several ranks the repeats weigh 0 too: times the class weights
    kw = {**kw, "inputs": ("image", "is_pad"), "world_size": 3, "class_weight": weights}
    for rank in range(3):
        for x, y, w in loaders.tf.dataset(index_store, 8, rank=rank, **kw):
            want = [weights.get(int(label), 1.0) for label in y.numpy()] * ~x["is_pad"].numpy()
            np.testing.assert_array_equal(w.numpy(), np.float32(want))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"inputs": "pixels", "target": "label"}, r"no 'pixels': their keys are \['image'"),
        ({"class_weight": {0: 1.0}}, "class_weight must be a non-empty .* with target="),
        ({"inputs": "image", "target": "label", "class_weight": {}}, "non-empty"),
        ({"inputs": "image", "target": "label", "class_weight": {-1: 1.0}}, "class_weight class"),
        ({"inputs": "image", "target": "label", "class_weight": {0: -1}}, r"class_weight\[0\]"),
        ({"inputs": "image", "target": "label", "class_weight": {0: "2"}}, r"class_weight\[0\]"),
        (  # mixup: soft targets, no label
            {"inputs": "image", "target": "label", "augment": TrainAugment(8), "mixup": Mixup(7)},
            r"no 'label': their keys are \['image', 'index', 'is_pad', 'target'\]",
        ),
        ({"target": "label"}, "needs inputs="),
        ({"epochs": 0}, "epochs"),
        ({"ahead": -1}, "ahead"),
        ({"batch_size": 65}, "batch_size 65 is larger than the 64 samples rank 0 of 1 gets"),
    ],
)
def test_bad_settings_are_refused_naming_them(
    index_store: Path, kw: dict[str, Any], message: str
) -> None:
    kw = {"batch_size": 8, **kw}
    with pytest.raises(ValueError, match=message):
        loaders.tf.dataset(index_store, **kw)


@pytest.mark.parametrize(("ahead", "mapped"), [(0, False), (1, False), (5, False), (2, True)])
def test_the_state_counts_what_the_consumer_took_however_far_tf_data_ran_ahead(
    index_store: Path, ahead: int, mapped: bool
) -> None:
    kw = {"seed": 6, "epochs": 2, "ahead": ahead}  # two epochs in one iteration
    loader = StoreLoader(index_store, 8, seed=6)
    whole = collect(loader) + collect(loader)
    got = collect(loaders.tf.dataset(index_store, 8, **kw))
    assert len(got) == len(whole) == 16
    for stop in (3, 8, 11):
        first = TfFeed(index_store, batch_size=8, **kw)
        if mapped:  # a map after the dataset runs as the consumer asks: the state holds
            first.dataset = first.dataset.map(lambda b: {**b, "index": b["index"] + 0})
        head = collect(first, limit=stop)
        state = first.state_dict()
        assert (state["epoch"], state["batch"]) == divmod(stop, 8)
        resumed = TfFeed(index_store, batch_size=8, **kw)
        resumed.load_state_dict(state)
        got = head + collect(resumed)
        for g, w in zip(got, whole, strict=True):
            for key in w:
                np.testing.assert_array_equal(g[key], w[key], err_msg=key)


def test_a_state_serves_one_dataset() -> None:
    state = loaders.tf.LoaderState()
    with pytest.raises(LoaderError, match="no dataset uses this LoaderState"):
        state.state_dict()


def test_a_state_bound_twice_is_refused(index_store: Path) -> None:
    state = loaders.tf.LoaderState()
    loaders.tf.dataset(index_store, 8, state=state)
    with pytest.raises(LoaderError, match="belongs to another dataset"):
        loaders.tf.dataset(index_store, 8, state=state)


def _recorded(ds: Any, x: str, seen: list[np.ndarray]) -> Any:
    """``(x, label)`` pairs of a dict dataset; each batch's ``index`` recorded as Keras takes it."""

    def record(value: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        seen.append(index.numpy())
        return value

    def pair(batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        value = tf.py_function(record, [batch[x], batch["index"]], batch[x].dtype)
        value.set_shape(batch[x].shape)
        return value, batch["label"]

    return ds.map(pair)


def _fit_sees_each_sample_once_an_epoch(
    store: Path,
    x: str,
    model: Any,
    batch_size: int,
    total: int,
    epochs: int,
    one_iterator: bool = False,
) -> list[float]:
    """Fit, checking the samples of each epoch; ``one_iterator``: every epoch in one iteration
    (``epochs=``), which Keras keeps across its epochs when given ``steps_per_epoch``.

    Keras (3.15) warns "Your input ran out of data" at the end of every epoch of a plain fit
    on a dataset of unknown length, each epoch trained on every batch all the same (what
    ``docs/frameworks.md`` says); the one-iterator fit never warns.
    """
    seen: list[np.ndarray] = []
    per_epoch = total // batch_size  # whole batches: total is a multiple of batch_size
    ds = loaders.tf.dataset(store, batch_size, seed=0, epochs=epochs if one_iterator else None)
    steps = per_epoch if one_iterator else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(_recorded(ds, x, seen), epochs=epochs, steps_per_epoch=steps, verbose=0)
    ran_out = sum("Your input ran out of data" in str(w.message) for w in caught)
    assert ran_out == 0 if one_iterator else ran_out in (0, epochs)  # 0: a Keras that fixed it
    orders = [np.concatenate(seen[e * per_epoch : (e + 1) * per_epoch]) for e in range(epochs)]
    assert len(seen) == epochs * per_epoch
    for order in orders:
        assert sorted(order.tolist()) == list(range(total))
    assert len({tuple(order.tolist()) for order in orders}) == epochs  # a new order each epoch
    return [float(v) for v in history.history["loss"]]


def _classifier(shape: tuple[int, ...], dtype: str, scale: float, offset: float) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input(shape, dtype=dtype),
            keras.layers.Rescaling(scale, offset),
            keras.layers.Flatten(),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.003),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


@pytest.mark.parametrize("one_iterator", [False, True])
def test_keras_fits_an_image_store(images: Path, one_iterator: bool) -> None:
    model = _classifier((16, 16, 3), "uint8", 1 / 127.5, -1.0)
    losses = _fit_sees_each_sample_once_an_epoch(
        images, "image", model, 16, IMAGES, 8, one_iterator
    )
    assert losses[-1] < 0.25 * losses[0], losses


def test_tf_data_autotuning_is_off_after_a_map_too(index_store: Path) -> None:
    # the autotuning thread now and then held an iterator's end 20-30 ms (each epoch's)
    ds = loaders.tf.dataset(index_store, 8, seed=0)
    for each in (ds, ds.map(lambda b: b)):
        assert each.options().autotune.enabled is False


def test_keras_fits_an_audio_logmel_store(audio: Path) -> None:
    ds = loaders.tf.dataset(audio, 8, seed=0)
    assert ds.element_spec["audio"] == tf.TensorSpec((None, 32, 51), tf.float16)
    model = _classifier((32, 51), "float16", 1 / 32, 0.5)  # log-mel dB: about -72 to 38
    losses = _fit_sees_each_sample_once_an_epoch(audio, "audio", model, 8, AUDIO_CLIPS, 6)
    assert losses[-1] < 0.25 * losses[0], losses


def test_dtype_hands_keras_float32_batches_without_augmentation(audio: Path, images: Path) -> None:
    stored = next(iter(loaders.tf.dataset(audio, 8, seed=0)))["audio"]
    assert not np.isfinite(float(tf.reduce_mean(stored)))  # a float16 sum overflows
    ds = loaders.tf.dataset(audio, 8, seed=0, dtype="float32")
    assert ds.element_spec["audio"] == tf.TensorSpec((None, 32, 51), tf.float32)
    assert ds.element_spec["label"] == tf.TensorSpec((None,), tf.int64)
    got, want = collect(ds), collect(StoreLoader(audio, 8, seed=0))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g["audio"], w["audio"].astype(np.float32))
    assert np.isfinite(float(tf.reduce_mean(next(iter(ds))["audio"])))
    x, _ = next(
        iter(loaders.tf.dataset(images, 16, inputs="image", target="label", dtype="float32"))
    )
    assert x.dtype == tf.float32 and 0 <= float(tf.reduce_min(x)) <= float(tf.reduce_max(x)) <= 1


def _moved(model: Any, ds: Any, **fit: Any) -> bool:
    """Whether ``model.fit(ds, **fit)`` changed any of the model's weights."""
    before = [w.copy() for w in model.get_weights()]
    model.fit(ds, verbose=0, **fit)
    return any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


@pytest.mark.parametrize("where", ["fit", "dataset"])
def test_keras_class_weight_trains_with_drop_last_false(images: Path, where: str) -> None:
    # fit's class_weight on one rank; the dataset's over several (sample weights of the repeats)
    ranks = {"rank": 0, "world_size": 5} if where == "dataset" else {}
    kw = {"inputs": "image", "target": "label", "drop_last": False, "seed": 0, **ranks}
    for weight, moves in ((0.0, False), (1.0, True)):  # all weights 0: nothing is learned
        cw = dict.fromkeys(range(CLASSES), weight)
        given = {"class_weight": cw} if where == "dataset" else {}
        ds = loaders.tf.dataset(images, 20, **kw, **given)
        taken = {"class_weight": cw} if where == "fit" else {}
        assert _moved(_sgd_model(), ds, epochs=2, **taken) == moves


def _sgd_model() -> Any:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 3), dtype="uint8"),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Flatten(),
            keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(  # plain SGD: the weights are the whole training state
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _stop_at(epoch: int, batch: int, save: Callable[[], None]) -> Any:
    """A Keras callback that stops training after ``batch`` of ``epoch``, calling ``save`` first."""

    class StopAt(keras.callbacks.Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.epoch = 0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, done: int, logs: Any = None) -> None:
            if (self.epoch, done) == (epoch, batch):
                save()
                self.model.stop_training = True

    return StopAt()


@pytest.mark.parametrize("restore_first", [True, False])
def test_keras_resumed_mid_epoch_from_a_checkpoint_ends_with_the_uninterrupted_weights(
    images: Path, tmp_path: Path, restore_first: bool
) -> None:
    kw = {"inputs": "image", "target": "label", "seed": 3}
    start = _sgd_model().get_weights()
    whole = _sgd_model()
    whole.set_weights(start)
    whole.fit(loaders.tf.dataset(images, 16, **kw), epochs=3, verbose=0)

    first, state = _sgd_model(), loaders.tf.LoaderState()
    first.set_weights(start)
    path = str(tmp_path / "ckpt")

    def save() -> None:
        tf.train.Checkpoint(data=state).write(path)

    first.fit(
        loaders.tf.dataset(images, 16, state=state, **kw),
        epochs=3,
        verbose=0,
        callbacks=[_stop_at(1, 2, save)],  # after 3 batches of epoch 1
    )
    assert state.state_dict()["epoch"] == 1 and state.state_dict()["batch"] == 3

    second, resumed = _sgd_model(), loaders.tf.LoaderState()
    second.set_weights(first.get_weights())
    if restore_first:  # restored before its dataset exists: resumed when it is made
        tf.train.Checkpoint(data=resumed).read(path).assert_consumed()
        ds = loaders.tf.dataset(images, 16, state=resumed, **kw)
    else:  # restored into a dataset already made
        ds = loaders.tf.dataset(images, 16, state=resumed, **kw)
        tf.train.Checkpoint(data=resumed).read(path).assert_consumed()
    # Keras takes the step count of a dataset of unknown length from its first epoch, so the
    # rest of the interrupted epoch is fitted on its own, then the whole epochs after it
    second.fit(ds, initial_epoch=1, epochs=2, verbose=0)
    second.fit(ds, initial_epoch=2, epochs=3, verbose=0)
    for got, want in zip(second.get_weights(), whole.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(whole.get_weights()[0], start[0])


def test_a_state_read_while_the_next_batch_is_made_is_the_consumed_batchs(
    images: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a prefetch buffer tf.data makes the fourth batch only when it is asked for: the
    # loader is then past it while the generator, paused, has not yet noted it (the window a
    # checkpoint written from another thread could fall into)
    made, release = threading.Event(), threading.Event()
    real = loaders.tf.epoch_batches

    def paused(loader: StoreLoader, epochs: int | None) -> Iterator[dict[str, Any]]:
        for i, batch in enumerate(real(loader, epochs)):
            if i == 3:
                made.set()
                assert release.wait(30)
            yield batch

    monkeypatch.setattr(loaders.tf, "epoch_batches", paused)
    state = loaders.tf.LoaderState()
    it = iter(loaders.tf.dataset(images, 16, seed=3, state=state, ahead=0))
    for _ in range(3):
        next(it)
    fourth = threading.Thread(target=next, args=(it,))
    fourth.start()
    assert made.wait(30)
    try:
        got = state.state_dict()
    finally:
        release.set()
        fourth.join(30)
    assert (got["epoch"], got["batch"]) == (0, 3)  # the three batches taken, not the one made


_LEFT_OPEN = """
import sys
import tensorflow as tf
import loaders.tf

store, batch = sys.argv[1], int(sys.argv[2])
default = iter(loaders.tf.dataset(store, batch, seed=1))  # ahead=0
next(default)
for _ in loaders.tf.dataset(store, batch, seed=2, ahead=2):
    break  # the for loop's iterator is garbage; its prefetch thread has run ahead meanwhile
eager = iter(loaders.tf.dataset(store, batch, seed=3, ahead=2, epochs=1000))
next(eager), next(eager)
forever = iter(loaders.tf.dataset(store, batch, seed=4, ahead=2, epochs=1000))


@tf.function
def pull():
    for _ in tf.range(3):
        next(forever)


pull()
print("left open", flush=True)
"""


@pytest.mark.slow
def test_a_process_that_leaves_iterators_mid_epoch_exits(tmp_path: Path) -> None:
    """tf.data's prefetch thread in the generator's Python as the interpreter finalized hung
    the exit for ever (3 runs in 3 before ``loaders.tf._quiesce``); 60 s is ten times a run.

    Batches of 256 at 224 px take milliseconds to make: the exit comes while one is made.
    """
    from benchmarks.image_data import random_store

    store, _ = random_store(tmp_path / "s", 512, 224, npy=False)
    script = tmp_path / "left_open.py"  # a file: AutoGraph reads the source of tf.functions
    script.write_text(_LEFT_OPEN)
    proc = subprocess.run(
        [sys.executable, str(script), str(store), "256"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == "left open\n", proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr

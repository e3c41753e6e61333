"""loaders.jax: StoreLoader's batches as jax.Array, sharded on request, trained on.

The contract suite runs against ``loaders.jax.batches`` (order, ranks, holes, resume, state);
the rest checks what the bridge adds: the same values as StoreLoader with augment and mixup,
batches the caller keeps never overwritten, a plain JAX model that learns an image store with
every sample once per epoch, and batches sharded over two host devices (a subprocess: the device
count is fixed when JAX starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import loaders
from loaders import StoreLoader
from loaders.augment import Mixup, TrainAugment
from tests.contracts.index_store import collect, decode_index, make_index_store
from tests.contracts.loader_contract import LoaderContract
from tests.loaders.frameworks_data import CLASSES, image_store
from tests.processes import REPO


class TestJaxContract(LoaderContract):
    LIGHTNING_HOOK = False  # a JAX loop never calls Lightning's batch_sampler hook

    @pytest.fixture(autouse=True)
    def x64(self) -> Iterator[None]:
        """64-bit JAX: the suite's float64 mixup draws and int64 labels arrive unchanged."""
        jax.config.update("jax_enable_x64", True)
        yield
        jax.config.update("jax_enable_x64", False)

    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> loaders.jax.Batches:
        return loaders.jax.batches(store_path, device="cpu", **kw)


@pytest.fixture(scope="module")
def index_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("jax") / "s", 64)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return image_store(tmp_path_factory.mktemp("jax_images"))


def test_batches_are_jax_arrays_with_store_loaders_values_augment_and_mixup(
    index_store: Path,
) -> None:
    kw = {"seed": 4, "augment": TrainAugment(size=12, channels_last=True), "mixup": Mixup(7)}
    want = collect(StoreLoader(index_store, 8, **kw))
    got = list(loaders.jax.batches(index_store, 8, **kw))
    assert len(got) == len(want) == 8
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys() == {"image", "target", "index", "is_pad"}
        assert all(isinstance(v, jax.Array) for v in g.values())
        assert g["image"].shape == (8, 3, 12, 12) and g["image"].dtype == jnp.float32
        assert g["index"].dtype == jnp.int32  # int64 -> int32: JAX without jax_enable_x64
        for key in w:
            np.testing.assert_array_equal(np.asarray(g[key]), w[key], err_msg=key)


@pytest.mark.parametrize("placed", [False, True])
def test_bfloat16_batches_arrive_as_jax_bfloat16_with_store_loaders_values(
    index_store: Path, placed: bool
) -> None:
    # the README's TrainAugment(dtype="bfloat16"): NumPy has no bfloat16 to go through
    kw = {"seed": 4, "augment": TrainAugment(size=12, dtype="bfloat16"), "mixup": Mixup(7)}
    sharding = jax.devices()[0] if placed else None
    got = list(loaders.jax.batches(index_store, 8, sharding=sharding, **kw))
    want = [b["image"].float().numpy() for b in StoreLoader(index_store, 8, **kw)]
    assert len(got) == len(want) == 8
    for g, w in zip(got, want, strict=True):
        assert g["image"].dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(g["image"].astype(jnp.float32)), w)


def test_dtype_hands_out_float_pixels_without_augmentation(index_store: Path) -> None:
    got = list(loaders.jax.batches(index_store, 8, seed=4, dtype="bfloat16"))
    loader = StoreLoader(index_store, 8, seed=4, dtype="bfloat16")
    want = [(b["image"].float().numpy(), b["label"].numpy()) for b in loader]
    assert len(got) == len(want) == 8
    for g, (image, label) in zip(got, want, strict=True):
        assert g["image"].dtype == jnp.bfloat16 and g["label"].dtype == jnp.int32
        pixels = np.asarray(g["image"].astype(jnp.float32))
        np.testing.assert_array_equal(pixels, image)
        np.testing.assert_array_equal(np.asarray(g["label"]), label)
        assert pixels.min() >= 0 and 0 < pixels.max() <= 1


def test_a_device_places_every_entry_on_it(index_store: Path) -> None:
    device = jax.devices()[0]
    batch = next(iter(loaders.jax.batches(index_store, 8, seed=0, sharding=device)))
    for value in batch.values():
        assert value.sharding == jax.sharding.SingleDeviceSharding(device)


def test_dlpack_shares_the_tensor_and_a_kept_batch_is_never_overwritten(
    index_store: Path,
) -> None:
    tensor = torch.zeros(4, 16, dtype=torch.uint8)
    shared = loaders.jax.to_jax(tensor)
    tensor[0, 0] = 9  # JAX aliases the buffer: no copy was made
    assert int(shared[0, 0]) == 9
    feed = loaders.jax.batches(index_store, 8, seed=1, buffer_chunks=1, prefetch=1)
    kept = []
    for batch in feed:  # the loader reuses buffers nobody refers to: not these
        kept.append((batch["image"], np.asarray(batch["index"]).copy()))
    for image, index in kept:
        np.testing.assert_array_equal(decode_index(np.asarray(image)), index)


def test_epochs_serves_up_to_an_epoch_and_resumes_into_it(index_store: Path) -> None:
    loader = StoreLoader(index_store, 8, seed=2)
    epochs = [collect(loader) for _ in range(3)]  # epochs 0, 1, 2
    whole = [b for epoch in epochs for b in epoch]
    feed = loaders.jax.batches(index_store, 8, seed=2, epochs=3)
    head = collect(feed, limit=11)  # into epoch 1
    state = feed.state_dict()
    assert (state["epoch"], state["batch"]) == (1, 3)
    resumed = loaders.jax.batches(index_store, 8, seed=2, epochs=3)
    resumed.load_state_dict(state)
    tail = collect(resumed)
    assert resumed.epoch == 3 and collect(resumed) == []  # epochs reached: nothing more
    got = head + tail
    assert len(got) == len(whole) == 24
    for g, w in zip(got, whole, strict=True):
        for key in w:
            np.testing.assert_array_equal(g[key], w[key], err_msg=key)


@pytest.mark.parametrize("epochs", [0, -1, 1.5, True])
def test_a_bad_epochs_is_refused_naming_it(index_store: Path, epochs: Any) -> None:
    with pytest.raises(ValueError, match="epochs"):
        loaders.jax.batches(index_store, 8, epochs=epochs)


def _init(key: jax.Array, pixels: int) -> dict[str, jax.Array]:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (pixels, 32)) * 0.05,
        "b1": jnp.zeros(32),
        "w2": jax.random.normal(k2, (32, CLASSES)) * 0.05,
        "b2": jnp.zeros(CLASSES),
    }


def _loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))


@jax.jit
def _step(
    params: dict[str, jax.Array], image: jax.Array, label: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    x = image.reshape(image.shape[0], -1).astype(jnp.float32) / 255.0 - 0.5
    loss, grads = jax.value_and_grad(_loss)(params, x, label)
    return loss, jax.tree.map(lambda p, g: p - 0.5 * g, params, grads)


def test_a_plain_jax_model_learns_the_image_store_seeing_each_sample_once_an_epoch(
    images: Path,
) -> None:
    feed = loaders.jax.batches(images, 16, seed=0)
    valid = int(feed.loader.source.valid.sum())
    params = _init(jax.random.key(0), 16 * 16 * 3)
    losses, orders = [], []
    for _ in range(8):
        epoch_losses, seen = [], []
        for batch in feed:
            loss, params = _step(params, batch["image"], batch["label"])
            epoch_losses.append(float(loss))
            seen.append(np.asarray(batch["index"]))
        losses.append(float(np.mean(epoch_losses)))
        orders.append(np.concatenate(seen))
    for order in orders:
        assert sorted(order.tolist()) == list(range(valid)) and valid == 96
    assert len({tuple(order.tolist()) for order in orders}) == len(orders)  # a new order each
    assert losses[-1] < 0.5 * losses[0], losses


_SHARDED = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import loaders
from loaders import StoreLoader
from tests.contracts.index_store import collect

store = sys.argv[1]
mesh = Mesh(np.array(jax.devices()), ("data",))
sharding = NamedSharding(mesh, P("data"))
want = collect(StoreLoader(store, 8, seed=5))
feed = loaders.jax.batches(store, 8, seed=5, sharding=sharding)
rows, same, placed = [], True, True
params = jax.device_put(jnp.zeros(16 * 16 * 3), NamedSharding(mesh, P()))

@jax.jit
def step(w, image, label):
    x = image.reshape(image.shape[0], -1).astype(jnp.float32) / 255.0
    loss = lambda w: jnp.mean((x @ w - label.astype(jnp.float32) / 7.0) ** 2)
    value, grad = jax.value_and_grad(loss)(w)
    return value, w - 0.01 * grad

losses = []
for got, ref in zip(feed, want, strict=True):
    for key, value in got.items():
        placed &= value.sharding.is_equivalent_to(sharding, value.ndim)
        shards = sorted(value.addressable_shards, key=lambda s: s.device.id)
        rows.append([s.data.shape[0] for s in shards])
        same &= bool(np.array_equal(np.asarray(value), ref[key]))
    loss, params = step(params, got["image"], got["label"])
    losses.append(float(loss))
refused = []  # each before a batch: not at the first or the last batch, the state moved on
for batch, kw in ((7, {}), (2, {"drop_last": False, "world_size": 5, "rank": 0})):
    try:
        loaders.jax.batches(store, batch, sharding=sharding, **kw)
        refused.append(None)
    except ValueError as exc:
        refused.append(str(exc))
kept = len(loaders.jax.batches(store, 2, sharding=sharding, world_size=5, rank=0).loader)
print(json.dumps({"devices": jax.device_count(), "rows": rows, "same": same,
                  "placed": placed, "batches": len(want), "losses": losses,
                  "refused": refused, "kept": kept}))
"""


def test_batches_shard_over_two_host_devices(index_store: Path) -> None:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SHARDED), str(index_store)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2 and out["batches"] == 8
    assert out["placed"] and out["same"]
    assert out["rows"] == [[4, 4]] * 4 * 8  # every entry: 4 rows on each device
    assert out["losses"][-1] < out["losses"][0]
    first, last = out["refused"]
    assert "splits each batch over 2 devices, and batch_size 7 is not a multiple of 2" in first
    assert "the last batch of 1 is not a multiple of 2 (this rank serves 13 samples" in last
    assert out["kept"] == 6  # drop_last=True: 6 whole batches of 2 on that rank


@pytest.mark.gpu
def test_a_cuda_loader_hands_every_sample_to_jax_on_the_gpu(index_store: Path) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch shares the GPU
    gpu = jax.devices("gpu")[0]
    seen: list[int] = []
    for batch in loaders.jax.batches(index_store, 8, seed=1, device="cuda", drop_last=False):
        assert all(value.devices() == {gpu} for value in batch.values())
        index = np.asarray(batch["index"])
        np.testing.assert_array_equal(decode_index(np.asarray(batch["image"])), index)
        seen.extend(index.tolist())
    assert sorted(seen) == list(range(64))

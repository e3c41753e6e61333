"""StoreLoader beyond the shared contract: augmentation hooks, randomness, errors, threads."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from loaders import StoreLoader
from loaders.batching.order import batch_seed
from loaders.errors import ChunkReadError, LoaderError, StoreOpenError
from precompute.format.layout import open_store_info
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec
from tests.contracts.loader_contract import collect, decode_index, make_index_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("tl") / "s", 90, holes=(5, 6))


def noisy_flip(images: torch.Tensor, extents: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A tiny stand-in augment: per-sample random flip and noise, from the generator only."""
    assert images.dtype == torch.uint8 and extents.shape == (len(images), 4)
    flip = torch.rand(len(images), generator=gen, device=images.device) < 0.5
    out = torch.where(flip[:, None, None, None], images.flip(2), images).float()
    return out + torch.rand(out.shape, generator=gen, device=images.device)


def soft_mix(
    images: torch.Tensor, labels: torch.Tensor, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    lam = torch.rand((), generator=gen, device=images.device)
    target = torch.nn.functional.one_hot(labels, 7).float()
    return lam * images + (1 - lam) * images.flip(0), lam * target + (1 - lam) * target.flip(0)


def test_augment_gets_device_batch_extents_and_a_seeded_generator(store: Path) -> None:
    seen = []

    def spy(images: torch.Tensor, extents: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        seen.append((extents.clone(), gen.initial_seed()))
        return images

    loader = StoreLoader(store, 8, seed=4, augment=spy, rank=0, world_size=1)
    loader.set_epoch(3)
    batches = collect(loader)
    assert len(seen) == len(batches)
    for number, (extents, seed) in enumerate(seen):
        assert seed == batch_seed(4, 3, 0, number)
        assert extents.dtype == torch.int32 and (extents == torch.tensor([0, 0, 16, 16])).all()


def test_augmentation_randomness_resumes_exactly(store: Path) -> None:
    kw = {"batch_size": 8, "seed": 2, "augment": noisy_flip}
    want = collect(StoreLoader(store, **kw))
    first = StoreLoader(store, **kw)
    head = collect(first, limit=4)
    resumed = StoreLoader(store, **kw)
    resumed.load_state_dict(first.state_dict())
    got = head + collect(resumed)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g["image"], w["image"])
    again = collect(StoreLoader(store, **kw))
    np.testing.assert_array_equal(again[0]["image"], want[0]["image"])
    plain = collect(StoreLoader(store, 8, seed=2))
    assert not np.array_equal(want[0]["image"], plain[0]["image"])


def test_mixup_replaces_label_with_target(store: Path) -> None:
    batch = next(iter(StoreLoader(store, 8, mixup=soft_mix)))
    assert set(batch) == {"image", "target", "index", "is_pad"}
    assert batch["target"].shape == (8, 7)
    torch.testing.assert_close(batch["target"].sum(1), torch.ones(8))


def test_variant_extents_are_those_of_the_served_variant(tmp_path: Path) -> None:
    extents = np.zeros((24, 2, 4), np.int32)
    extents[:, 0] = (0, 0, 16, 16)
    extents[:, 1] = (2, 0, 12, 16)  # variant 1 is letterboxed
    images = np.zeros((24, 2, 16, 16, 3), np.uint8)
    images[..., 2] = np.arange(2).reshape(1, 2, 1, 1)
    write_store_from_arrays(
        tmp_path / "e",
        images,
        np.arange(24) % 3,
        BuildSpec(size=16, chunk_samples=4, shard_samples=8, variants=2),
        extents=extents,
    )
    for epoch in range(2):
        seen = []
        loader = StoreLoader(
            tmp_path / "e", 8, augment=lambda im, ext, g, seen=seen: seen.append(ext) or im
        )
        loader.set_epoch(epoch)
        served = collect(loader)
        variant = loader.variant(epoch)
        assert {int(v) for b in served for v in b["image"][:, 0, 0, 2]} == {variant}
        want = torch.tensor(extents[0, variant])
        assert all((e == want).all() for e in seen) and len(seen) == 3


def test_breaking_off_ends_the_epoch_and_stops_threads(store: Path) -> None:
    loader = StoreLoader(store, 8)
    it = iter(loader)
    next(it)
    next(it)
    assert loader.state_dict()["batch"] == 2
    del it
    gc.collect()
    assert not [t for t in threading.enumerate() if t.name.startswith("nostall-read")]
    again = next(iter(loader))
    want = StoreLoader(store, 8)
    want.set_epoch(1)
    np.testing.assert_array_equal(again["index"], next(iter(want))["index"])
    assert loader.epoch == 1


def test_a_new_iteration_ends_the_live_one_so_the_state_stays_true(store: Path) -> None:
    # two live iterators of one loader: the older one used to go on serving its epoch and
    # moving the state back, so a checkpoint then would serve batches twice on resume
    loader = StoreLoader(store, 8, seed=3)
    first = iter(loader)
    next(first)
    second = iter(loader)  # breaks epoch 0 off: this one serves epoch 1
    head = next(second)
    assert list(first) == []  # superseded: nothing more, and no state change
    assert (loader.epoch, loader.state_dict()["batch"]) == (1, 1)
    rest = list(second)
    want = StoreLoader(store, 8, seed=3)
    want.set_epoch(1)
    served = np.concatenate([b["index"] for b in [head, *rest]])
    np.testing.assert_array_equal(served, np.concatenate([b["index"] for b in want]))
    stale = iter(loader)
    next(stale)
    loader.load_state_dict(want.state_dict())  # a resume supersedes a live iteration too
    assert list(stale) == [] and loader.state_dict()["epoch"] == want.epoch


def test_a_policy_class_or_a_string_is_refused_naming_what_to_give(store: Path) -> None:
    from loaders.augment import Mixup, TrainAugment

    with pytest.raises(TypeError, match=r"augment=TrainAugment is the class: give an instance"):
        StoreLoader(store, 8, augment=TrainAugment)
    with pytest.raises(TypeError, match=r"mixup=Mixup is the class: give an instance"):
        StoreLoader(store, 8, mixup=Mixup)
    with pytest.raises(TypeError, match=r"augment must be a policy such as .*, got 'train'"):
        StoreLoader(store, 8, augment="train")


def test_worker_io_error_reaches_the_training_thread(tmp_path: Path) -> None:
    path = make_index_store(tmp_path / "w", 64)
    loader = StoreLoader(path, 8, shuffle=False)  # opened sound: the open-time checks pass
    shard = path / "image" / "c" / "3" / "0" / "0" / "0"
    shard.unlink()
    shard.mkdir()  # reading it fails with EISDIR on the reader thread
    got = []
    with pytest.raises(ChunkReadError, match="image/c/3/0/0/0") as info:
        for batch in loader:
            got.append(batch["index"])
    assert isinstance(info.value.__cause__, OSError)
    served = np.concatenate(got)
    np.testing.assert_array_equal(served, np.arange(len(served)))  # in store order, before
    # windows of 8 chunks x 4 samples: the window of chunks 8-15 holds shard 3 (samples
    # 48-63) and fails whole, so exactly the first window's 32 samples were served
    assert len(served) == 32


def test_rank_and_world_from_torchrun_env(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    from_env = StoreLoader(store, 4)
    explicit = StoreLoader(store, 4, rank=2, world_size=3)
    assert (from_env.rank, from_env.world_size) == (2, 3)
    np.testing.assert_array_equal(from_env.plan().order, explicit.plan().order)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"rank": 1}, "both rank and world_size"),
        ({"rank": 3, "world_size": 3}, "0 <= rank < world_size"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1"),
        ({"prefetch": -1}, "prefetch must be an integer >= 0"),
        ({"buffer_chunks": 0}, "buffer_chunks"),
        ({"seed": -1}, "seed must be"),
        # past what numpy indexes: a clear error, not an OverflowError from the plan
        ({"batch_size": 10**5000}, r"batch_size must be an integer in \[1, 2147483647\], got <an"),
        ({"num_threads": 2**40}, r"num_threads must be an integer in \[1, 2147483647\]"),
        ({"seed": 10**5000}, r"seed must be an integer in \[0, 18446744073709551615\]"),
    ],
)
def test_bad_arguments(store: Path, kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StoreLoader(store, **{"batch_size": 4, **kw})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda_is_a_clear_error(store: Path) -> None:
    with pytest.raises(LoaderError, match="CUDA is not available"):
        StoreLoader(store, 4, device="cuda")


def test_state_from_another_loader_is_refused(store: Path) -> None:
    state = StoreLoader(store, 8, seed=1).state_dict()
    with pytest.raises(LoaderError, match="seed"):
        StoreLoader(store, 8, seed=2).load_state_dict(state)
    with pytest.raises(LoaderError, match="outside"):
        StoreLoader(store, 8, seed=1).load_state_dict({**state, "batch": 999})


def test_store_info_and_missing_path(store: Path, tmp_path: Path) -> None:
    loader = StoreLoader(open_store_info(store), 8, drop_last=False)
    assert sum(len(b["index"]) for b in collect(loader)) == 88
    with pytest.raises(StoreOpenError, match=r"nothing: does not exist"):
        StoreLoader(tmp_path / "nothing", 8)
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreOpenError, match=r"no zarr\.json"):
        StoreLoader(tmp_path / "empty", 8)


@pytest.mark.gpu
def test_cuda_batches_match_cpu_batches(store: Path) -> None:
    cpu = collect(StoreLoader(store, 8, seed=9))
    gpu_loader = StoreLoader(store, 8, seed=9, device="cuda")
    gpu = []
    for batch in gpu_loader:
        assert batch["image"].is_cuda
        gpu.append({k: v.cpu().numpy() for k, v in batch.items()})
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(c["image"], g["image"])
        np.testing.assert_array_equal(c["index"], g["index"])


def test_real_augment_and_mixup_policies_resume_exactly(store: Path) -> None:
    from loaders import augment

    kw = {
        "batch_size": 8,
        "seed": 1,
        "augment": augment.TrainAugment(size=(12, 12), dtype="float32"),
        "mixup": augment.Mixup(num_classes=7),
    }
    want = collect(StoreLoader(store, **kw))
    first = StoreLoader(store, **kw)
    head = collect(first, limit=3)
    resumed = StoreLoader(store, **kw)
    resumed.load_state_dict(first.state_dict())
    got = head + collect(resumed)
    assert len(got) == len(want) == 11
    for g, w in zip(got, want, strict=True):
        assert g["image"].shape == (8, 3, 12, 12) and g["target"].shape == (8, 7)
        np.testing.assert_allclose(g["target"].sum(1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(g["image"], w["image"])
        np.testing.assert_array_equal(g["target"], w["target"])


def test_more_ranks_than_samples_is_refused_before_the_first_batch(tmp_path: Path) -> None:
    path = make_index_store(tmp_path / "tiny", 10)  # 3 chunks of 4 samples
    with pytest.raises(ValueError, match="12 ranks share 10 samples"):
        StoreLoader(path, 2, rank=0, world_size=12)
    padded = [
        collect(StoreLoader(path, 2, rank=r, world_size=12, drop_last=False)) for r in range(12)
    ]  # evaluation: one sample a rank, the last two repeats
    assert [b["is_pad"].tolist() for [b] in padded] == [[False]] * 10 + [[True]] * 2
    assert sorted(int(b["index"][0]) for [b] in padded[:10]) == list(range(10))


def test_close_drops_shard_mappings_and_the_loader_still_reads(store: Path) -> None:
    with StoreLoader(store, 8, io="mmap") as loader:
        first = [b["index"].clone() for b in loader]
        maps = loader.source.image._maps
        assert maps is not None and maps.mapped_bytes > 0
    assert maps.mapped_bytes == 0  # closed: nothing kept mapped
    loader.set_epoch(0)
    again = [b["index"] for b in loader]  # maps lazily again
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_io_auto_maps_a_store_that_fits_the_budget_and_preads_one_that_does_not(
    store: Path,
) -> None:
    image_bytes = sum(f.stat().st_size for f in (store / "image").rglob("*") if f.is_file())
    fits = StoreLoader(store, 8, seed=1)  # io="auto", map_bytes 512 MiB: this store fits
    small_budget = StoreLoader(store, 8, seed=1, map_bytes=image_bytes // 2)
    assert fits.source.image.io == "mmap" and small_budget.source.image.io == "pread"
    assert StoreLoader(store, 8, io="pread").source.image.io == "pread"  # explicit stays
    served = [[b[k].clone() for k in ("image", "label", "index")] for b in fits]
    other = [[b[k] for k in ("image", "label", "index")] for b in small_budget]
    assert len(served) == len(other) > 0  # the same bytes either way
    for a, b in zip(served, other, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("epoch", [1.7, "x", -1, True, 2**64])
def test_a_hostile_saved_epoch_is_a_loader_error_naming_it(store: Path, epoch: object) -> None:
    loader = StoreLoader(store, 8)
    state = {**loader.state_dict(), "epoch": epoch}
    with pytest.raises(LoaderError, match=r"state epoch must be an integer"):
        loader.load_state_dict(state)  # never quietly epoch 1 for 1.7


def test_numpy_integers_are_integers(store: Path) -> None:
    loader = StoreLoader(store, np.int64(8), seed=np.uint32(3))
    assert (loader.batch_size, loader.seed) == (8, 3) and type(loader.batch_size) is int
    uninterrupted = StoreLoader(store, 8, seed=3)
    uninterrupted.set_epoch(2)
    want = collect(uninterrupted)
    first = StoreLoader(store, 8, seed=3)
    first.set_epoch(2)
    head = collect(first, limit=2)
    saved = {**first.state_dict(), "epoch": np.int64(2), "batch": np.int64(2)}
    loader.load_state_dict(saved)  # numpy integers, as a checkpoint may hold them
    got = head + collect(loader)
    assert len(got) == len(want) > 2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g["index"], w["index"])
        np.testing.assert_array_equal(g["image"], w["image"])
    far = StoreLoader(store, 8, seed=3)
    far.set_epoch(2**40)  # epochs are not sizes: far past 2**31
    assert far.state_dict()["epoch"] == 2**40 and len(collect(far)) == len(want)


def test_one_chunk_store_on_three_ranks_trains_on_every_sample(tmp_path: Path) -> None:
    # drop_last=True used to leave out the tail of the one chunk: samples 9 never trained on
    path = make_index_store(tmp_path / "one", 10, chunk_samples=16, shard_samples=16)
    served: set[int] = set()
    loaders = [StoreLoader(path, 3, seed=4, rank=r, world_size=3) for r in range(3)]
    for epoch in range(12):
        indices = []
        for loader in loaders:
            loader.set_epoch(epoch)
            for b in collect(loader):
                assert np.array_equal(b["index"], decode_index(b["image"]))
                indices += b["index"].tolist()
        assert len(indices) == len(set(indices)) == 9
        served |= set(indices)
    assert served == set(range(10))


def test_state_saved_under_another_sample_order_is_refused(store: Path) -> None:
    state = StoreLoader(store, 8, seed=1).state_dict()
    old = {k: v for k, v in state.items() if k != "order"}  # saved before order version 2
    with pytest.raises(LoaderError, match="sample order differs: start the epoch afresh"):
        StoreLoader(store, 8, seed=1).load_state_dict(old)


_AFTER_MAIN = """
import sys, threading
from loaders import StoreLoader
from loaders.augment import TrainAugment

loader = StoreLoader(sys.argv[1], 16, seed=0, num_threads=3, augment=TrainAugment(size=16))
served = []


def train():
    for epoch in range(2):
        loader.set_epoch(epoch)
        served.extend(i for batch in loader for i in batch["index"].tolist())
    print(len(served), len(set(served)), flush=True)


threading.Thread(target=train).start()  # not a daemon: Python waits for it after main returns
"""


def test_a_thread_still_training_after_the_main_thread_returned_gets_every_batch(
    tmp_path: Path,
) -> None:
    """``concurrent.futures`` takes no new work once the main thread returned: the loader's read
    and augment pools then refused theirs ("cannot schedule new futures after shutdown", a
    ``WorkerError`` in the training thread); the work is now done on the calling thread."""
    import subprocess
    import sys

    from tests.processes import REPO

    images = np.random.default_rng(0).integers(0, 256, (64, 24, 24, 3), dtype=np.uint8)
    write_store_from_arrays(
        tmp_path / "s",
        images,
        np.arange(64) % 4,
        BuildSpec(size=24, chunk_samples=4, shard_samples=16),
    )
    proc = subprocess.run(
        [sys.executable, "-c", _AFTER_MAIN, str(tmp_path / "s")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout == "128 64\n", proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr


def test_a_loader_is_neither_pickled_nor_wrapped_in_a_dataloader_but_says_what_to_do(
    store: Path,
) -> None:
    """A spawned process or a DataLoader worker used to fail on a lock; DataLoader(loader) with
    "not subscriptable": each now names the loader and the way that works."""
    import copy
    import pickle

    loader = StoreLoader(store, 4, seed=0)
    for share in (pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match=r"a StoreLoader cannot be pickled .* make one in each"):
            share(loader)
    wrapped = torch.utils.data.DataLoader(loader, batch_size=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"StoreLoader is a loader, not a Dataset: iterate it"):
        next(iter(wrapped))
    assert sum(len(b["index"]) for b in loader) == len(loader) * 4  # itself, it serves

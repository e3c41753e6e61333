"""Scripted training loops with known answers: the diagnosis must give the right verdict and advice.

Each loop runs a real loader (a torch DataLoader decoding real JPEG/PNG files with Pillow, a
StoreLoader over a real store, a DALI loader) through :class:`Diagnose`. Where the wall clock
would make the answer depend on this machine's load, the decode cost, the I/O latency, the stalls
and the step are injected through scripted clocks instead of sleeps.
"""

import contextlib
import hashlib
import threading

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from loaders.diagnose import Diagnose
from precompute.sources.classes import list_source
from tests.benchmarks.scripted import OffsetClock, ScriptedTime


class JpegDataset(Dataset):
    """Decode + resize real image files with Pillow; ``on_item(index)`` scripts its cost."""

    def __init__(self, paths, length=None, on_item=None):
        self.paths, self.length, self.on_item = paths, length or len(paths), on_item

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.on_item is not None:
            self.on_item(index)
        with Image.open(self.paths[index % len(self.paths)]) as im:
            img = im.convert("RGB").resize((24, 24))
        return torch.from_numpy(np.asarray(img).copy()), index


@pytest.fixture(scope="module")
def paths(tiny_data):
    src = list_source(str(tiny_data))
    return [src.locate(k) for k, _ in src.items]


def scripted_loop(loader, clock, step_s, epochs=1):
    diag = Diagnose(loader, clock=clock.wall, thread_clock=clock.cpu, cores=2)
    for _ in range(epochs):
        for _batch in diag:
            clock.advance(step_s, step_s)
    return diag.report()


def checks(res):
    return {c["name"]: c["ok"] for c in res.verdict["checks"]}


@contextlib.contextmanager
def spinning_thread():
    """A thread that keeps a core busy, like the training step's idle-spinning intra-op threads.

    It hashes in C with the GIL released (``hashlib`` does so over 2 KiB), as those threads run
    outside the interpreter: a spinning Python thread held the GIL and made the loop 20 times
    slower.
    """
    stop = threading.Event()
    block = bytes(1 << 20)

    def spin() -> None:
        while not stop.is_set():
            hashlib.sha256(block).digest()

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_decoding_in_the_main_process_advises_workers_up_to_the_cores(paths):
    clock = ScriptedTime()
    ds = JpegDataset(paths, on_item=lambda i: clock.advance(0.005, 0.005))  # 5 ms decode each
    with spinning_thread():  # a busy machine must not hide the idle core from the advice
        res = scripted_loop(DataLoader(ds, batch_size=4), clock, 0.001, epochs=2)
    assert res.bound == "data" and checks(res)["data_wait"] is False
    first = res.recommendation[0]
    assert first.startswith("raise num_workers from 0 to 2, persistent_workers=True:")
    assert "decodes each batch itself (100% of the wait is CPU work)" in first
    assert not any("cannot help" in r for r in res.recommendation)


def test_io_latency_in_the_main_process_advises_more_workers_than_cores(paths):
    clock = ScriptedTime()
    ds = JpegDataset(paths, on_item=lambda i: clock.advance(0.008, 0.0002))  # waits on storage
    res = scripted_loop(DataLoader(ds, batch_size=4), clock, 0.001)
    assert res.bound == "data"
    assert res.recommendation[0].startswith("raise num_workers from 0 to 4:")
    assert "(I/O latency)" in res.recommendation[0]


def test_periodic_stalls_behind_a_long_step_get_stall_advice(paths):
    clock = ScriptedTime()
    # 0.5 s stall every 10th batch of 2, behind a 200 ms step (issue 17, case 3)
    ds = JpegDataset(
        paths, length=120, on_item=lambda i: clock.advance(0.5) if i % 20 == 0 else None
    )
    res = scripted_loop(DataLoader(ds, batch_size=2), clock, 0.2)
    assert res.bound == "compute"
    assert checks(res) == {"gpu_util": None, "data_wait": True, "step_cv": False}
    assert res.wait_period_steps == 10
    advice = " ".join(res.recommendation)
    assert "stalls of about 500 ms recur every 10 steps" in advice
    assert "the dataset stalls on the training thread every 10 batches" in advice
    assert (
        "set num_workers >= 1 with num_workers x prefetch_factor >= 4: 4 batches ahead absorbs "
        in advice
    )
    assert "no data-loading change needed" not in advice
    assert "finish their batches together" not in res.text()  # no workers here


def test_mixed_loop_says_how_much_removing_the_wait_gains(paths):
    clock = ScriptedTime()
    ds = JpegDataset(paths, on_item=lambda i: clock.advance(0.01, 0.01))  # 40 ms per batch
    res = scripted_loop(DataLoader(ds, batch_size=4), clock, 0.06)
    assert res.bound == "data" and res.data_wait_share == pytest.approx(0.4)
    assert "steps up to 1.7x faster without it" in res.recommendation[0]
    assert res.recommendation[0].startswith("raise num_workers from 0 to 2:")


def test_compute_bound_with_workers_needs_no_change(paths):
    clock = OffsetClock()
    loader = DataLoader(JpegDataset(paths), batch_size=4, num_workers=2, persistent_workers=True)
    diag = Diagnose(loader, clock=clock, cores=2)
    for _batch in diag:
        clock.step(0.2, real=0.02)  # a 200 ms step, 20 ms of it real so the workers run
    res = diag.report()
    assert res.bound == "compute" and checks(res)["data_wait"] is True
    assert "no data-loading change needed" in res.recommendation[0]
    assert len(res.recommendation) == 1  # nothing else: persistent_workers is already set


def test_fewer_workers_than_cores_advises_as_many_workers_as_cores(paths):
    loader = DataLoader(JpegDataset(paths, length=192), batch_size=4, num_workers=1)
    diag = Diagnose(loader, cores=2, interval=0.02)  # samples the worker before it exits
    for _batch in diag:  # no compute: the loop waits for the one worker all the time
        pass
    res = diag.report()
    assert res.bound == "data"
    assert res.evidence.helper_cores > 0  # the worker process's CPU is measured
    assert res.recommendation[0].startswith("raise num_workers from 1 to 2:")
    assert not any("already match" in r or "cannot help" in r for r in res.recommendation)


def test_storeloader_reading_on_the_training_thread_advises_prefetch(tiny_store):
    from loaders import StoreLoader

    with StoreLoader(tiny_store, 8, prefetch=0, num_threads=1) as loader:
        diag = Diagnose(loader, cores=2)
        for _batch in diag:
            pass
        res = diag.report()
    assert res.bound == "data" and res.loader.kind == "storeloader"
    assert res.recommendation[0].startswith("set prefetch=2 (now 0):")
    # io="auto" maps a store this small (it fits in map_bytes): the resolved mode is shown
    assert "loader: StoreLoader (storeloader): prefetch=0, num_threads=1, io=mmap" in res.text()
    assert "worker" not in " ".join(res.recommendation)


def test_storeloader_reading_from_ram_is_never_told_that_it_waits_on_storage(tiny_store):
    """The seg review's loop: ``io="ram"`` read as ``pread``, and more threads each time."""
    from loaders import StoreLoader

    with StoreLoader(tiny_store, 8, num_threads=4, io="ram") as loader:
        diag = Diagnose(loader, cores=2)
        for _ in range(3):
            for _batch in diag:  # no step: data-bound by construction
                pass
        res = diag.report()
    assert res.loader.settings["io"] == "ram", res.text()
    assert "loader: StoreLoader (storeloader): prefetch=2, num_threads=4, io=ram" in res.text()
    said = " ".join(res.recommendation)
    assert res.bound == "data"
    assert "raise num_threads" not in said and "they wait on storage" not in said, said
    assert "faster disk" not in said


def test_storeloader_behind_a_long_step_keeps_up(tiny_store):
    from loaders import StoreLoader

    clock = OffsetClock()
    with StoreLoader(tiny_store, 8) as loader:
        diag = Diagnose(loader, clock=clock, cores=2)
        for _ in range(2):
            for _batch in diag:
                clock.step(0.1)
        res = diag.report()
    assert res.bound == "compute" and res.steps == 10
    assert "no data-loading change needed" in res.recommendation[0]


@pytest.mark.dali
def test_dali_loop_with_fewer_threads_than_cores_advises_threads(tiny_data):
    from loaders.dali import JpegLoader

    loader = JpegLoader(str(tiny_data), 8, 24, device="cpu", num_threads=1, prefetch=2)
    diag = Diagnose(loader, cores=2)
    for _ in range(2):
        for _batch in diag:
            pass
    res = diag.report()
    assert res.bound == "data" and res.loader.kind == "dali"
    assert res.loader.settings["prefetch"] == 2
    assert res.recommendation[0].startswith("raise num_threads from 1 to 2:")

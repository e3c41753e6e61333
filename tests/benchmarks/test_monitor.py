import subprocess
import sys
import time

import pytest
import torch

from loaders.monitor import GpuProbe, Monitor, Sample


def test_monitor_degrades_without_gpu_and_reports_cpu_figures():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with Monitor(interval=0.02) as mon:
        x = 0
        end = time.process_time() + 0.3  # 0.3 s of CPU however busy the machine is
        while time.process_time() < end:
            x += 1
        mon.record_step(0.01, 0.02)
    res = mon.result()
    assert res.gpu is None and not res.has_gpu
    assert res.note.startswith("no GPU: CPU metrics only")
    assert "NVML" in res.note or "pynvml" in res.note
    assert len(res.samples) >= 2  # periodic samples plus the final one (timing-independent)
    assert all(
        s.gpu_util is None and s.gpu_mem_bytes is None and s.gpu_power_w is None
        for s in res.samples
    )
    assert res.peak_rss_bytes > 10 * 2**20
    assert res.cpu_s >= 0.28  # the busy loop's 0.3 s of CPU (to the tick)
    assert res.steps == [(0.01, 0.02)]
    d = res.to_dict()
    assert set(d["series"]) == set(Sample.__dataclass_fields__)
    assert d["series"]["gpu_util"] == [None] * len(res.samples)


def test_storage_bytes_count_reads_from_a_disk_and_not_from_the_page_cache(tmp_path):
    """The evidence that a loader waited on storage: the kernel's count of fetched bytes."""
    import os
    import threading

    path = tmp_path / "blob"
    path.write_bytes(os.urandom(8 << 20))
    os.sync()  # written back, so the cache can drop it
    mon = Monitor(interval=0.05)

    def read_in_a_thread(cold):
        if cold:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        before = mon.storage_bytes()
        reader = threading.Thread(target=path.read_bytes)  # a reader thread, as a loader's
        reader.start()
        reader.join()
        return mon.storage_bytes() - before

    if mon.storage_bytes() is None:
        pytest.skip("this platform does not count the bytes read from storage")
    cold = read_in_a_thread(cold=True)
    if cold == 0:
        pytest.skip("this filesystem keeps its files in memory (nothing is fetched)")
    assert cold >= 8 << 20
    assert read_in_a_thread(cold=False) < 1 << 20  # the page cache serves it


def test_gpu_probe_reports_the_real_nvml_error():
    probe = GpuProbe()
    if probe.available:
        pytest.skip("NVML works here")
    assert probe.read() == (None, None, None)
    assert "NVML" in probe.reason


def test_monitor_without_pynvml_installed(tmp_path):
    code = (
        "import sys; sys.modules['pynvml'] = None\n"  # makes `import pynvml` raise ImportError
        "from loaders.monitor import Monitor\n"
        "with Monitor(0.02) as m: pass\n"
        "r = m.result()\n"
        "assert r.gpu is None, r.gpu\n"
        "print(r.note)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "no GPU: CPU metrics only (ModuleNotFoundError: import of pynvml" in out.stdout


# A child that burns ``seconds`` of CPU, says so, and waits for its stdin to close before it exits.
BURN = (
    "import sys, time\nt=time.process_time()\nwhile time.process_time()-t<{seconds}: pass\n"
    "print('burnt', flush=True)\nsys.stdin.read()\n"
)


def _burn_and_read(mon: Monitor, seconds: float, read):
    """Run a :data:`BURN` child under ``mon``; ``read()`` while it is alive, then let it exit.

    No sleep gives the sampler time to see the child: ``read`` lists the children afresh.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", BURN.format(seconds=seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "burnt\n"
        value = read()
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    return value


def test_monitor_counts_cpu_of_child_processes():
    with Monitor(interval=0.05, refresh_s=0.05) as mon:
        _burn_and_read(mon, 0.4, mon.cpu_seconds)
    res = mon.result()
    assert res.cpu_s >= 0.35  # the child's 0.4 s of CPU (+ interpreter start-up)


def test_monitor_rejects_bad_interval_and_double_start():
    with pytest.raises(ValueError, match="interval"):
        Monitor(0)
    mon = Monitor(0.05).start()
    with pytest.raises(RuntimeError, match="already started"):
        mon.start()
    mon.stop()


@pytest.mark.gpu
def test_monitor_samples_the_gpu():
    with Monitor(0.05) as mon:
        a = torch.randn(4096, 4096, device="cuda")
        for _ in range(50):
            a = a @ a
            a = a / a.norm()
        torch.cuda.synchronize()
    res = mon.result()
    assert res.has_gpu and res.note == ""
    assert any(s.gpu_util is not None for s in res.samples)
    assert any((s.gpu_mem_bytes or 0) > 0 for s in res.samples)


def test_cpu_split_tells_child_processes_from_this_process():
    with Monitor(interval=0.02, refresh_s=0.02) as mon:
        own0, children0, sampler0 = mon.cpu_split()
        alive = _burn_and_read(mon, 0.3, mon.cpu_split)[1]  # read while the child runs
        own1, children1, sampler1 = mon.cpu_split()
    # its busy loop, kept after it exited: read live from /proc in clock ticks (10 ms), then
    # from the reaped children's rusage, so the two readings may differ by a tick
    assert children1 >= alive - 0.01 and alive - children0 >= 0.3 - 0.01
    assert sampler1 > sampler0  # the sampling thread's own CPU is measured apart
    # this process only waited for the child; its sampling thread is counted in `own`
    assert (own1 - own0) - (sampler1 - sampler0) < children1 - children0

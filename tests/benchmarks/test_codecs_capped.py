"""The codecs benchmark's slow link: a capped network namespace, and the run behind it.

The link is tc's token bucket on the loopback of a network namespace the run makes
(``unshare -n``): these tests need what it needs (root or user namespaces, iproute2), and say
so where it is missing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.suite.codecs.capped import _probe, netns_command

_SEND = """
import socket, threading, time
n = int(10e6)
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def serve():
    c, _ = srv.accept(); c.sendall(b"x" * n); c.close()
threading.Thread(target=serve, daemon=True).start()
cli = socket.create_connection(srv.getsockname())
t0, got = time.perf_counter(), 0
while got < n:
    got += len(cli.recv(1 << 20))
print(n / (time.perf_counter() - t0))
"""


def _needs_netns(cap: float) -> None:
    why = _probe(cap)
    if why is not None:
        pytest.skip(f"no capped network namespace here: {why}")


def test_the_namespace_loopback_carries_the_cap() -> None:
    cap = 20e6
    _needs_netns(cap)
    done = subprocess.run(
        netns_command([sys.executable, "-c", _SEND], cap),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rate = float(done.stdout.strip())
    assert 0.5 * cap < rate < 1.1 * cap  # 10 MB at 20 MB/s: half a second, not a few ms


@pytest.mark.slow
def test_the_capped_run_reads_both_stores_behind_the_link(tmp_path: Path) -> None:
    from benchmarks.suite.codecs.bench import _stores, photo_crops

    cap = 20e6
    _needs_netns(cap)
    _stores(tmp_path, photo_crops(256, 64))
    argv = [sys.executable, "-m", "benchmarks.suite.codecs.capped", str(tmp_path)]
    argv += ["--cap", str(cap), "--runs", "1", "--threads", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "behind a 20 MB/s link (tc tbf on the loopback of a network namespace" in out
    for row in ("raw", "jpeg:90", "jpeg:90 local disk"):
        assert re.search(rf"^  {re.escape(row)} +samples/s", out, re.M), out
    gets = re.findall(r"^  (raw|jpeg:90) +gets +(\d+)", out, re.M)
    assert {name: int(n) for name, n in gets} == {"raw": 8, "jpeg:90": 8}  # 256 / 32: one per chunk
    raw_mb_s = float(re.search(r"^raw MB/s read .*: (\d+)", out, re.M).group(1))  # type: ignore[union-attr]
    assert raw_mb_s <= 1.2 * 20  # held to the cap (+ the bucket's 256 KiB burst, of 3 MB)
    assert re.search(r"^jpeg:90 / raw, samples/s: \d+\.\d+x \(goal >= 5x\)", out, re.M)
    assert re.search(r"^jpeg:90 loader's busy cores: \d+\.\d+ of \d+ usable$", out, re.M)

"""The codecs benchmark's slow link: raw and JPEG stores read from object storage at 150 MB/s.

``python -m benchmarks.suite.codecs.capped FOLDER [--cap B/s] [--threads N] [--runs N]`` serves
``FOLDER/served/<store>`` as ``s3://served/<store>`` (:mod:`benchmarks.suite.objstore.rangeserver`)
and reads each store with ``StoreLoader`` (uint8 batches of 64 on the CPU, ``N`` read threads:
the GETs in flight, and the threads that decode), the stores taking turns epoch by epoch
(:mod:`benchmarks.runner`): samples/s, host CPU of the loader's process, GETs, mean bytes per
GET and MB/s read, then JPEG over raw. Beside them, in the same turns, the JPEG store read from
its folder (no link at all, the page cache hot): what decoding alone allows on this machine, so
the run says whether the link or the decode set the JPEG store's pace.

The cap, so that neither side pays for it in CPU per byte or per request:

* ``tc`` (preferred): the run re-executes itself in a network namespace of its own
  (``unshare -n``: root, or user namespaces) whose loopback carries tc's token bucket filter
  (``tbf``) at the cap; the kernel paces every packet and the server sends each body with one
  ``sendall``. The server and the loader see 127.0.0.1 as usual.
* ``bucket`` (where no namespace or tc is at hand, said so): the server's own token bucket,
  64 KiB pieces under one rate for the whole server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["capped_run", "main", "netns_command"]

CAP = 150e6  # bytes/s of the slow link
STORES = ("raw", "jpeg90")  # the stores under FOLDER/served, as bench.py writes them
LOCAL = "jpeg:90 local disk"  # the JPEG store read from its folder: the decode's own pace
_TBF = "burst 256kb latency 50ms"  # a burst above loopback's 64 KiB packets; a queue of 50 ms


def netns_command(argv: list[str], cap: float) -> list[str]:
    """``argv`` run in a new network namespace whose loopback is capped at ``cap`` bytes/s."""
    setup = (
        f"ip link set lo up && tc qdisc add dev lo root tbf rate {int(cap * 8)}bit {_TBF} && "
        'exec "$@"'
    )
    return ["unshare", "-n", "--", "sh", "-c", setup, "sh", *argv]


def _probe(cap: float) -> str | None:
    """Why a capped namespace cannot be made here (None: it can)."""
    missing = [t for t in ("unshare", "ip", "tc") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not found"
    try:
        done = subprocess.run(
            netns_command(["true"], cap), capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or "unshare -n failed")


def capped_run(folder: Path, *, cap: float = CAP, threads: int = 4, runs: int = 5) -> str:
    """Run the measurement in a capped namespace (else with the server's bucket); the method.

    The child prints its tables to this process's stdout.
    """
    argv = [sys.executable, "-m", "benchmarks.suite.codecs.capped", str(folder)]
    argv += ["--cap", str(cap), "--threads", str(threads), "--runs", str(runs)]
    why = _probe(cap)
    method = "tc" if why is None else "bucket"
    cmd = netns_command([*argv, "--method", "tc"], cap) if why is None else [*argv, "--method",
                                                                             "bucket"]  # fmt: skip
    if why is not None:
        print(f"(no capped network namespace here: {why}; the server's token bucket caps instead)")
    sys.stdout.flush()
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return method


def _server(folder: Path, rate: float | None) -> tuple[subprocess.Popen[bytes], str]:
    """The range server of ``folder`` on a free port (with its token bucket at ``rate``)."""
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "benchmarks.suite.objstore.rangeserver", str(folder), str(port)]
    proc = subprocess.Popen(argv + ([] if rate is None else [str(rate)]))
    for _ in range(600):  # its package imports torch first: slow on a busy machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the range server did not start")


def _rows(loaders: dict[str, Any]) -> list[Any]:
    """One epoch of each loader per call, with its GETs and mean KiB per GET."""
    from benchmarks.runner import Row, Run

    def row(name: str) -> Any:
        loader = loaders[name]
        store = loader.source.image.store

        def body(run: Run) -> int:
            r0, b0, n = getattr(store, "requests", 0), getattr(store, "bytes_read", 0), 0
            for batch in loader:
                n += int(batch["index"].shape[0])
            gets = getattr(store, "requests", 0) - r0
            run.record("gets", gets)
            run.record("kib_per_get", (getattr(store, "bytes_read", 0) - b0) / max(gets, 1) / 1024)
            return n

        return Row(name, body, show=("rate", "cpu_ms", "gets", "kib_per_get"))

    return [row(name) for name in loaders]


def _lines(sample_bytes: dict[str, float], cap: float) -> list[Any]:
    from benchmarks.runner import Line, ratio

    raw = "raw"

    def read_mb_s(name: str) -> Any:
        return lambda r: r[name].median("rate") * sample_bytes[name] / 1e6

    lines = [
        Line(f"{n} MB/s read (stored {b / 1024:.1f} KiB/sample):", read_mb_s(n), "{:.0f}")
        for n, b in sample_bytes.items()
    ]
    bound = cap / sample_bytes[raw]
    lines.append(Line("raw samples/s the cap allows:", lambda r: bound, "{:.0f}"))
    lines.append(ratio("jpeg:90 / raw, samples/s:", "jpeg:90", raw, note="(goal >= 5x)"))
    cores = len(os.sched_getaffinity(0))

    def busy(r: Any) -> float:  # cores the JPEG loader kept busy: samples/s x CPU s/sample
        return float(r["jpeg:90"].median("rate") * r["jpeg:90"].median("cpu_ms") / 1e3)

    def needed(r: Any) -> float:  # cores 5x the cap's raw rate takes at that CPU per sample
        return float(5 * bound * r["jpeg:90"].median("cpu_ms") / 1e3)

    lines.append(Line("jpeg:90 loader's busy cores:", busy, "{:.2f}", f"of {cores} usable"))
    lines.append(Line("cores 5x raw takes at jpeg:90's CPU per sample:", needed, "{:.2f}"))
    lines.append(
        ratio(
            "jpeg:90 behind the cap / from local disk, samples/s:",
            "jpeg:90",
            LOCAL,
            note="(about 1: decoding, not the link, sets the JPEG store's pace)",
        )
    )
    return lines


def _measure(folder: Path, cap: float, threads: int, runs: int, method: str) -> None:
    from benchmarks.environment import environment_line
    from benchmarks.runner import Bench
    from loaders import StoreLoader

    proc, endpoint = _server(folder, None if method == "tc" else cap)
    os.environ.update(
        {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench",
         "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    )  # fmt: skip
    names = {"raw": "raw", "jpeg90": "jpeg:90"}
    kw: dict[str, Any] = {"device": "cpu", "augment": None, "num_threads": threads, "seed": 0}
    loaders = {}
    try:
        for store in STORES:
            loaders[names[store]] = StoreLoader(f"s3://served/{store}", 64, **kw)
        per = {
            names[s]: _stored_bytes(folder / "served" / s) / loaders[names[s]].num_samples
            for s in STORES
        }
        loaders[LOCAL] = StoreLoader(folder / "served" / "jpeg90", 64, **kw)  # no link at all
        how = (
            "tc tbf on the loopback of a network namespace of its own"
            if method == "tc"
            else "the server's token bucket"
        )
        with Bench("codecs-capped", None) as bench:
            bench.note(environment_line())
            bench.measure(
                f"behind a {cap / 1e6:.0f} MB/s link ({how}; S3 API on 127.0.0.1; "
                f"{threads} read threads, batches of 64)",
                _rows(loaders),
                runs=runs,
                lines=_lines(per, cap),
            )
    finally:
        for loader in loaders.values():
            loader.close()
        proc.kill()
        proc.wait()


def _stored_bytes(store: Path) -> float:
    """Bytes of the store's ``image`` chunks and index (what its GETs fetch per epoch)."""
    return float(sum(p.stat().st_size for p in (store / "image" / "c").rglob("*") if p.is_file()))


def main(argv: list[str] | None = None) -> None:
    """Measure the stores under ``FOLDER/served`` behind the cap (re-executed in a namespace)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--cap", type=float, default=CAP)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--method", choices=("auto", "tc", "bucket"), default="auto")
    args = p.parse_args(argv)
    if args.method == "auto":
        capped_run(args.folder, cap=args.cap, threads=args.threads, runs=args.runs)
        return
    _measure(args.folder, args.cap, args.threads, args.runs, args.method)


if __name__ == "__main__":
    main()

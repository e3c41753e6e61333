"""Hostile inputs (issue 11, items 8-10): FIFOs, devices, huge or stuck reads, bad names.

Each case ends in a clear error naming the file, or a skip with a stable reason; never a hang.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from precompute import InputError, SourceError, fingerprint, list_source
from precompute.errors import DecodeError
from precompute.sources.inputs import read_input
from precompute.stages.decode import decode_bytes
from tests.precompute.conftest import jpeg_bytes


def _write(path: bytes, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A class-folder source with a FIFO, a non-UTF-8 name and a symlink loop among images."""
    root = tmp_path / "src"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            (root / cls / f"{i}.jpg").write_bytes(jpeg_bytes(seed=i))
    os.mkfifo(root / "a" / "fifo.jpg")
    _write(os.fsencode(root / "b") + b"/caf\xe9.jpg", jpeg_bytes())
    os.symlink("loop2", root / "b" / "loop1")
    os.symlink("loop1", root / "b" / "loop2")
    os.symlink("deep", root / "a" / "deep")  # a folder symlink to itself
    return root


def test_folder_listing_records_fifo_bad_name_and_loops(folder: Path) -> None:
    src = list_source(folder)
    assert [k for k, _ in src.items] == [
        "a/0.jpg",
        "a/1.jpg",
        "a/2.jpg",
        "b/0.jpg",
        "b/1.jpg",
        "b/2.jpg",
    ]
    assert dict(src.skipped) == {
        "a/deep": "cannot list: Too many levels of symbolic links",
        "a/fifo.jpg": "not a regular file (a FIFO)",
        "b/caf\\xe9.jpg": "file name is not valid UTF-8; rename it",
        "b/loop1": "cannot list: Too many levels of symbolic links",
        "b/loop2": "cannot list: Too many levels of symbolic links",
    }
    assert fingerprint(src, content_hash=True) == fingerprint(list_source(folder), True)


def test_non_utf8_class_folder_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.jpg").write_bytes(jpeg_bytes())
    os.mkdir(os.fsencode(tmp_path) + b"/\xff\xfe")
    _write(os.fsencode(tmp_path) + b"/\xff\xfe/y.jpg", jpeg_bytes())
    src = list_source(tmp_path)
    assert src.classes == ("a",) and src.items == (("a/x.jpg", 0),)
    assert src.skipped == (("\\xff\\xfe", "file name is not valid UTF-8; rename it"),)


@pytest.mark.timeout(60)
def test_fifo_and_devices_are_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.jpg")
    (tmp_path / "ok.jpg").write_bytes(jpeg_bytes())
    (tmp_path / "m.csv").write_text(f"fifo.jpg,0\n/dev/zero,0\nok.jpg,0\n{tmp_path},0\n")
    src = list_source(tmp_path / "m.csv")
    reasons = {}
    for key, _ in src.items:
        try:
            src.read_bytes(key)
        except InputError as exc:
            assert str(exc).startswith(src.locate(key) + ": ")
            reasons[key] = exc.reason
    assert reasons == {
        "fifo.jpg": "not a regular file (a FIFO)",
        "/dev/zero": "not a regular file (a character device)",
        str(tmp_path): "not a regular file (a folder)",
    }
    # the content-hash fingerprint streams regular files only: no hang on the FIFO either
    assert len(fingerprint(src, content_hash=True)) == 64


@pytest.mark.timeout(60)
def test_manifest_that_is_a_fifo_or_a_device_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "m.csv")
    with pytest.raises(SourceError, match=r"m\.csv: cannot read manifest: .*a FIFO"):
        list_source(tmp_path / "m.csv")


def test_input_over_max_bytes_is_refused(tmp_path: Path) -> None:
    data = jpeg_bytes(400, 300)
    (tmp_path / "big.jpg").write_bytes(data)
    (tmp_path / "m.csv").write_text("big.jpg,0\n")
    src = list_source(tmp_path / "m.csv")
    assert src.read_bytes("big.jpg", max_bytes=len(data)) == data
    with pytest.raises(InputError, match=f"big.jpg: larger than max_bytes = {len(data) - 1} "):
        src.read_bytes("big.jpg", max_bytes=len(data) - 1)


class _Stall(BaseHTTPRequestHandler):
    release = threading.Event()

    def do_GET(self) -> None:
        self.release.wait(30)

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture()
def stalling_url() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 that accepts requests and never answers."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stall)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/data"
    finally:
        _Stall.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(60)
def test_stuck_read_has_a_deadline(stalling_url: str, tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")  # fsspec's http filesystem
    (tmp_path / "m.csv").write_text(f"{stalling_url}/a.jpg,0\n")
    src = list_source(tmp_path / "m.csv")
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"/a\.jpg: read stuck: no data for 1 s"):
        src.read_bytes(f"{stalling_url}/a.jpg", deadline_s=1.0)
    assert time.monotonic() - t0 < 10
    (tmp_path / "ok.jpg").write_bytes(b"after")  # the stuck reader is not reused
    assert read_input(str(tmp_path / "ok.jpg"), deadline_s=5.0) == b"after"


def test_decode_reasons_carry_no_memory_address() -> None:
    with pytest.raises(DecodeError) as info:
        decode_bytes(b"hello, this is not an image\n" * 4, "text.jpg", 1 << 20)
    assert " at 0x" not in info.value.reason
    assert info.value.reason == (
        "not a readable image (UnidentifiedImageError: cannot identify image file)"
    )


@pytest.mark.timeout(60)
def test_reads_work_in_a_forked_child(tmp_path: Path) -> None:
    """Idle reader threads do not survive a fork; the child starts its own."""
    (tmp_path / "x.jpg").write_bytes(b"data")
    assert read_input(str(tmp_path / "x.jpg")) == b"data"  # leaves an idle reader behind
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: never back into pytest
        code = 1
        try:
            code = 0 if read_input(str(tmp_path / "x.jpg"), deadline_s=5.0) == b"data" else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_small_local_read_allocates_about_its_size(tmp_path: Path) -> None:
    import tracemalloc

    (tmp_path / "tiny.jpg").write_bytes(b"abc")
    tracemalloc.start()
    try:
        assert read_input(str(tmp_path / "tiny.jpg")) == b"abc"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # read(n) allocates n: never max_bytes (256 MiB) for a 3-byte file

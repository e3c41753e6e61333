"""The object reader's hot path over real sockets on 127.0.0.1: kept-alive connections shared by
a process's threads (never by a forked child), a receive that waits in the kernel but not for
ever, and signed URLs reused until the server refuses one.

The server is the benchmark's line-rate server of a local folder
(:mod:`benchmarks.suite.objstore.rangeserver`), run in a thread that counts its connections.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.suite.objstore.rangeserver import _Handler
from precompute.storage import rawget, signed
from precompute.storage.objects import ObjectStore

DATA = bytes(range(256)) * 400  # 102,400 bytes: bucket "b", object "o"


class _Server:
    """The line-rate server of ``root`` on a free port; ``connections`` accepted so far."""

    def __init__(self, root: Path, refuse: str = "") -> None:
        self.connections = 0
        outer = self

        class Handler(_Handler):
            def setup(self) -> None:
                outer.connections += 1
                super().setup()

            def do_GET(self) -> None:
                if refuse and refuse in self.path:  # a signature the server no longer takes
                    self._reply(403, {}, b"<Error><Code>AccessDenied</Code></Error>")
                    return
                super().do_GET()

        Handler.root = root
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "o").write_bytes(DATA)
    served = _Server(tmp_path)
    yield served
    served.close()


def _get(server: _Server, offset: int, size: int) -> bytes:
    url = urllib.parse.urlsplit(f"{server.url}/b/o?x=1")
    out = np.zeros(size, np.uint8)
    status, got, _ = rawget.get_into(
        url, {"Range": f"bytes={offset}-{offset + size - 1}"}, [memoryview(out)]
    )
    assert (status, got) == (206, size)
    return out.tobytes()


def test_threads_of_one_epoch_after_another_share_one_connection(server: _Server) -> None:
    """A loader starts new read threads each epoch: they take up the same kept-alive socket."""
    got: list[bytes] = []
    for i in range(3):  # one thread after another, as the read threads of three epochs
        thread = threading.Thread(target=lambda i=i: got.append(_get(server, 1000 * i, 5000)))
        thread.start()
        thread.join()
    assert got == [DATA[1000 * i : 1000 * i + 5000] for i in range(3)]
    assert server.connections == 1


def test_a_forked_child_opens_its_own_connection(server: _Server) -> None:
    """Two processes on one socket would read each other's answers: a child never does."""
    assert _get(server, 0, 100) == DATA[:100]
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its read got the right bytes
        os._exit(0 if _get(server, 100, 100) == DATA[100:200] else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert _get(server, 200, 100) == DATA[200:300]  # the parent's socket still works
    assert server.connections == 2


def test_a_server_that_stops_mid_body_fails_the_read_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The socket blocks (one receive for the whole body), with a limit on each wait."""
    monkeypatch.setattr(rawget, "_TIMEOUT_S", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def stall() -> None:  # answers 1000 bytes, sends 10, then nothing
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
        stop.wait(30)
        conn.close()

    threading.Thread(target=stall, daemon=True).start()
    url = urllib.parse.urlsplit(f"http://127.0.0.1:{listener.getsockname()[1]}/b/o?x=1")
    start = time.monotonic()
    try:  # said as a timeout naming the host, not as EAGAIN ("Resource temporarily unavailable")
        with pytest.raises(TimeoutError, match=rf"no progress from {url.netloc} in 1 s"):
            rawget.get_into(url, {"Range": "bytes=0-999"}, [memoryview(bytearray(1000))])
    finally:
        stop.set()
        listener.close()
    assert time.monotonic() - start < 10


def test_an_endpoint_nobody_listens_on_is_named_with_the_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """obstore's GenericError alone told nothing; the secret stays out of it."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # closed at once: connections are refused
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nostall-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nostall-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with pytest.raises(OSError) as info:
        ObjectStore(f"s3://nostall-refused-{port}").head("x/zarr.json")
    said = str(info.value)
    assert f"x/zarr.json: HEAD failed (GenericError: connection refused, http://127.0.0.1:{port}"\
        in said  # fmt: skip
    assert "nostall-test-secret" not in said


def _store(server: _Server, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nostall-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nostall-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return ObjectStore("s3://b")


def test_a_signed_url_serves_every_range_of_its_object_for_a_while(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(server, monkeypatch)
    signs: list[str] = []
    real = signed._sign
    monkeypatch.setattr(signed, "_sign", lambda *a: signs.append(a[2]) or real(*a))
    monkeypatch.setattr(signed, "_REUSE_S", 0.0)  # kept for no time: each read signs
    for _ in range(2):
        assert store.read_into("o", [np.zeros(10, np.uint8)], 0) == 10
    assert signs == ["o", "o"]
    monkeypatch.setattr(signed, "_REUSE_S", 30.0)
    for offset in (0, 5000, 90000):
        out = np.zeros(1000, np.uint8)
        assert store.read_into("o", [out], offset) == 1000
        assert out.tobytes() == DATA[offset : offset + 1000]
    assert signs == ["o", "o", "o"]  # signed once more (it covers the host, not the range)


def test_a_reused_url_the_server_refuses_is_signed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials may expire before a reused URL does: a 403 on it is tried once more."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "o").write_bytes(DATA)
    server = _Server(tmp_path, refuse="X-Amz-Signature=stale")
    try:
        store = _store(server, monkeypatch)
        url, _ = signed._signed_get(store._store, "o", fresh=True)
        stale = url._replace(query=url.query.rsplit("=", 1)[0] + "=stale")
        signed._reuse[(id(store._store), "o")] = (time.monotonic() + 60, store._store, stale)
        out = np.zeros(1000, np.uint8)
        assert store.read_into("o", [out], 0) == 1000
        assert out.tobytes() == DATA[:1000]
    finally:
        server.close()


@pytest.mark.parametrize("size", [300_000, 4_816_896, 40 << 20])  # 40 MiB: past the kernel's cap
def test_a_large_body_is_waited_for_whole_and_never_past_its_arrival(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A body of ``_WHOLE_MIN`` or more wakes its reader once it is all in (``SO_RCVLOWAT``);
    one bigger than the kernel allows the mark, or the receive window holds, wakes it early and
    the rest comes as usual: never a wait for bytes that are not coming (each would take
    ``_TIMEOUT_S``)."""
    monkeypatch.setattr(rawget, "_TIMEOUT_S", 5)
    data = np.random.default_rng(size).integers(0, 256, size + 1000, dtype=np.uint8).tobytes()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "o").write_bytes(data)
    server = _Server(tmp_path)
    url = urllib.parse.urlsplit(f"{server.url}/b/o?x=1")
    try:
        start = time.monotonic()
        for offset in (0, 1000, 7, 1000, 0):
            out = np.zeros(size, np.uint8)
            span = {"Range": f"bytes={offset}-{offset + size - 1}"}
            assert rawget.get_into(url, span, [memoryview(out)])[:2] == (206, size)
            assert out.tobytes() == data[offset : offset + size]
        assert time.monotonic() - start < 5
    finally:
        server.close()


def test_a_kept_socket_the_server_closed_is_left_for_a_new_one() -> None:
    """Servers close idle kept-alive connections: the next read opens another at once, instead
    of sending on the closed one, failing and trying again after a pause."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:  # answers one request per connection, then closes it (no keep-alive)
        for _ in range(2):
            conn, _ = listener.accept()
            accepted.append(conn)
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\n\r\nabc")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    url = urllib.parse.urlsplit(f"http://127.0.0.1:{listener.getsockname()[1]}/b/o?x=1")
    try:
        for _ in range(2):
            out = bytearray(3)
            assert rawget.get_into(url, {"Range": "bytes=0-2"}, [memoryview(out)])[:2] == (206, 3)
            assert out == b"abc"
            time.sleep(0.2)  # the server's close reaches the kept socket
    finally:
        listener.close()
    assert len(accepted) == 2

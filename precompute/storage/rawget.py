"""A ranged GET over plain HTTP whose body lands in the caller's buffers with one system call.

The object reader's hot path (:func:`precompute.storage.signed.read_into`): the request goes out
on a kept-alive socket to the host (kept per process, so a reader's threads of the next epoch
reuse the connections of the last), the status line and headers are read without touching the
body (a few KB peeked, then taken exactly), a large body is waited for whole (``SO_RCVLOWAT``
and one ``poll``: the reader wakes once, not at every segment) and then received by one
``recvmsg_into`` straight into the buffers (a batch's rows), as ``preadv`` reads a local file: no
buffer of the client's own, one copy from the kernel, one release of the GIL. Measured on
127.0.0.1 (``docs/scale.md``), the wait for the whole body halves the reader's CPU per 4.8 MB
GET (0.71 to 0.40 ms) and the small peek saves copying 64 KB of body per GET. The socket blocks
(``SO_RCVTIMEO``/``SO_SNDTIMEO`` bound each wait), so ``MSG_WAITALL`` waits in the kernel: one
``recvmsg`` and no ``poll`` per GET, where a socket with a Python timeout took about 4 and 7.

Only what a ranged GET of an object store needs is understood: a ``Content-Length`` body (a
chunked answer raises :class:`NotPlain`, and the caller uses ``http.client``). TLS has no
``MSG_PEEK``: ``https`` goes through ``http.client`` too.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import urllib.parse
from collections.abc import Sequence

__all__ = ["NotPlain", "get_into"]

_TIMEOUT_S = 30  # seconds without progress before a send or receive fails
_HEAD_MAX = 64 << 10  # bytes of a status line and headers
_PEEK = 4096  # bytes looked at per peek for their end (a peek copies them: not the body)
_WHOLE_MIN = 256 << 10  # a body this long or longer is waited for whole (_arrived)
_lock = threading.Lock()
_idle: dict[str, list[socket.socket]] = {}  # netloc -> kept-alive sockets no thread holds


def _forget() -> None:
    """In a forked child: none of the parent's sockets, and a lock no parent thread holds.

    Dropping the child's copies closes them in the child only: the parent's stay open.
    """
    global _lock, _idle
    _lock, _idle = threading.Lock(), {}


os.register_at_fork(after_in_child=_forget)


def _take(netloc: str) -> socket.socket | None:
    """An idle kept-alive socket to ``netloc`` (left by any thread) still open, or None.

    One the server closed while it was idle (its keep-alive time ran out) is dropped here,
    so the request goes out on another instead of failing and being retried after a pause.
    """
    while True:
        with _lock:
            idle = _idle.get(netloc)
            sock = idle.pop() if idle else None
        if sock is None or _open(sock):
            return sock
        sock.close()


def _open(sock: socket.socket) -> bool:
    """Whether the server has neither closed ``sock`` nor sent on it unasked (a peek)."""
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)  # b"": closed; bytes: not ours
    except BlockingIOError:
        return True  # nothing to read: open and idle
    except OSError:
        return False
    return False


def _give(netloc: str, sock: socket.socket) -> None:
    """Keep ``sock`` for the next request to ``netloc``, by whichever thread sends it."""
    with _lock:
        _idle.setdefault(netloc, []).append(sock)


class NotPlain(OSError):
    """An answer this reader does not take apart (chunked): send it another way."""


def _socket(url: urllib.parse.SplitResult, fresh: bool) -> socket.socket:
    """A kept-alive socket to the host (a new one with ``fresh``), blocking with time limits.

    Blocking, so that a ``MSG_WAITALL`` receive waits in the kernel for the whole body (a
    socket with a Python timeout is non-blocking underneath: every receive would return what
    has arrived so far, after a ``poll``); ``SO_RCVTIMEO``/``SO_SNDTIMEO`` bound each wait.
    """
    sock = _take(url.netloc)
    if sock is not None and fresh:
        sock.close()
        sock = None
    if sock is None:
        sock = socket.create_connection((url.hostname or "", url.port or 80), _TIMEOUT_S)
        sock.settimeout(None)
        limit = struct.pack("ll", _TIMEOUT_S, 0)  # struct timeval
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _head(sock: socket.socket) -> bytes:
    """The status line and headers, taken off the socket exactly (the body stays there)."""
    taken = b""
    while True:
        peek = sock.recv(_PEEK, socket.MSG_PEEK)
        if not peek:
            raise ConnectionResetError("the server closed the connection")
        end = (taken[-3:] + peek).find(b"\r\n\r\n")
        need = len(peek) if end < 0 else end + 4 - len(taken[-3:])
        while need:
            got = sock.recv(need)
            if not got:
                raise ConnectionResetError("the server closed the connection")
            taken += got
            need -= len(got)
        if end >= 0:
            return taken
        if len(taken) > _HEAD_MAX:
            raise ConnectionError("an answer's headers are too long")


def _fields(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    fields = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return status, fields


def _drain(sock: socket.socket, count: int) -> None:
    while count > 0:
        got = sock.recv(min(count, 1 << 20))
        if not got:
            raise ConnectionResetError("the server closed the connection")
        count -= len(got)


def _arrived(sock: socket.socket, count: int) -> None:
    """Sleep until ``count`` more bytes are queued on ``sock`` (or ``_TIMEOUT_S`` passed).

    ``SO_RCVLOWAT`` makes ``poll`` wake once, when the whole body is in, instead of at every
    segment; nothing is copied before (a receive that copied part of it would then sleep
    for bytes that never come). The kernel caps the mark and wakes early where the receive
    window cannot hold the body: the receive after this takes whatever is there and waits
    for the rest as usual.
    """
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, count)
    try:
        waiter = select.poll()
        waiter.register(sock, select.POLLIN)
        waiter.poll(_TIMEOUT_S * 1000)
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)


def _receive(sock: socket.socket, views: list[memoryview], count: int) -> int:
    """Receive ``count`` bytes into ``views`` in order (``recvmsg_into``, ``MSG_WAITALL``).

    A body of ``_WHOLE_MIN`` bytes or more is waited for whole first (:func:`_arrived`).
    """
    left, got = count, 0
    parts = []
    for view in views:
        if left <= 0:
            break
        parts.append(view[:left])
        left -= parts[-1].nbytes
    if count >= _WHOLE_MIN:
        _arrived(sock, count)
    while parts:
        n = sock.recvmsg_into(parts, 0, socket.MSG_WAITALL)[0]
        if not n:
            raise ConnectionResetError("the server closed the connection mid-body")
        got += n
        while parts and n >= parts[0].nbytes:
            n -= parts[0].nbytes
            parts.pop(0)
        if parts and n:
            parts[0] = parts[0][n:]
    return got


def get_into(
    url: urllib.parse.SplitResult,
    headers: dict[str, str],
    views: Sequence[memoryview],
    fresh: bool = False,
) -> tuple[int, int, dict[str, str]]:
    """GET ``url`` (plain ``http``) with ``headers``: ``(status, bytes received, headers)``.

    A 206 answer's body goes into ``views`` (what does not fit is read and dropped); any other
    answer's body is read and dropped.

    Raises:
        NotPlain: A chunked answer.
        TimeoutError: A send or receive made no progress for ``_TIMEOUT_S`` seconds.
        OSError: The connection failed (the socket is closed; a retry opens another).
    """
    sock = _socket(url, fresh)
    try:
        lines = [f"GET {url.path}?{url.query} HTTP/1.1", f"Host: {url.netloc}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status, fields = _fields(_head(sock))
        if "chunked" in fields.get("transfer-encoding", "").lower():
            raise NotPlain("a chunked answer")
        length = int(fields.get("content-length", "0"))
        room = sum(v.nbytes for v in views)
        got = _receive(sock, list(views), min(length, room)) if status == 206 else 0
        _drain(sock, length - got)
    except BlockingIOError as exc:  # SO_RCVTIMEO/SO_SNDTIMEO ran out: EAGAIN, not a timeout
        sock.close()
        raise TimeoutError(f"no progress from {url.netloc} in {_TIMEOUT_S} s") from exc
    except BaseException:
        sock.close()
        raise
    if fields.get("connection", "").lower() == "close":
        sock.close()
    else:
        _give(url.netloc, sock)
    return status, got, fields

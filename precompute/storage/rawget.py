"""A ranged GET over plain HTTP whose body lands in the caller's buffers with one system call.

The object reader's hot path (:func:`precompute.storage.signed.read_into`): the request goes out
on this thread's kept-alive socket to the host, the status line and headers are read without
touching the body (peeked, then taken exactly), and the body is received by one
``recvmsg_into`` with ``MSG_WAITALL`` straight into the buffers (a batch's rows), as ``preadv``
reads a local file: no buffer of the client's own, one copy from the kernel, one release of the
GIL. Only what a ranged GET of an object store needs is understood: a ``Content-Length`` body
(a chunked answer raises :class:`NotPlain`, and the caller uses ``http.client``). TLS has no
``MSG_PEEK``: ``https`` goes through ``http.client`` too.
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
from collections.abc import Sequence

__all__ = ["NotPlain", "get_into"]

_TIMEOUT_S = 30.0
_HEAD_MAX = 64 << 10  # bytes of a status line and headers
_local = threading.local()  # this thread's sockets: netloc -> socket


def _pool() -> dict[str, socket.socket]:
    """This thread's sockets; a forked child starts with none (never its parent's)."""
    if _local.__dict__.get("pid") != os.getpid():
        _local.pid, _local.pool = os.getpid(), {}
    pool: dict[str, socket.socket] = _local.pool
    return pool


class NotPlain(OSError):
    """An answer this reader does not take apart (chunked): send it another way."""


def _socket(url: urllib.parse.SplitResult, fresh: bool) -> socket.socket:
    sock = _pool().pop(url.netloc, None)
    if sock is not None and fresh:
        sock.close()
        sock = None
    if sock is None:
        sock = socket.create_connection((url.hostname or "", url.port or 80), _TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _head(sock: socket.socket) -> bytes:
    """The status line and headers, taken off the socket exactly (the body stays there)."""
    taken = b""
    while True:
        peek = sock.recv(_HEAD_MAX, socket.MSG_PEEK)
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


def _receive(sock: socket.socket, views: list[memoryview], count: int) -> int:
    """Receive ``count`` bytes into ``views`` in order (``recvmsg_into``, ``MSG_WAITALL``)."""
    left, got = count, 0
    parts = []
    for view in views:
        if left <= 0:
            break
        parts.append(view[:left])
        left -= parts[-1].nbytes
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
    except BaseException:
        sock.close()
        raise
    if fields.get("connection", "").lower() == "close":
        sock.close()
    else:
        _pool()[url.netloc] = sock
    return status, got, fields

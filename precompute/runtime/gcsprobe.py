"""Whether a Ray GCS answers at an address, in at most a couple of seconds (no Ray import).

``ray.init`` retries a GCS that does not answer for minutes: a port nobody listens at, one
where something accepts the connection and says nothing, or one that accepts and closes. A Ray
GCS is a gRPC server, so it speaks HTTP/2: given the client's connection preface it answers at
once with its own, a ``SETTINGS`` frame (RFC 9113, section 3.4), before any authentication.
:func:`check_gcs` sends the preface and waits for that frame, so a build learns within
``timeout_s`` whether joining is worth trying. Under ``RAY_USE_TLS`` the connection starts
with Ray's TLS handshake instead, so only the TCP connection is checked.

The budget is kept by a clock the caller may give (``time.monotonic`` by default): each wait on
the socket is for what is left of ``timeout_s`` by that clock, so a clock that says the time is
spent ends the probe at once, whatever the socket would still wait.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

__all__ = ["PROBE_S", "Clock", "check_gcs", "host_port"]

Clock = Callable[[], float]  # seconds, monotonic: how the probe keeps its budget

PROBE_S = 2.0  # a GCS on this machine answers the handshake in milliseconds
# HTTP/2 client connection preface: the magic, then an empty SETTINGS frame
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4  # the frame type the server's preface must start with
_HEADER = 9  # bytes of an HTTP/2 frame header: length (3), type, flags, stream id (4)


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` address; None for ``auto``, ``ray://...``, a host."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _tls() -> bool:
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")  # Ray's own test


def check_gcs(
    address: str, timeout_s: float = PROBE_S, handshake: bool = True, clock: Clock = time.monotonic
) -> None:
    """Check that a GCS answers at ``address`` within ``timeout_s`` (nothing to check: no port).

    Args:
        address: ``host:port``; anything else (``auto``, ``ray://...``) is not checked.
        timeout_s: How long the connection and the answer may take together.
        handshake: Wait for the HTTP/2 answer too; without, an accepted connection is enough
            (a port that refuses is a Ray that is gone).
        clock: The clock that ``timeout_s`` is kept by; each wait for the answer is for what
            is left of it.

    Raises:
        ConnectionError: The port refuses or does not accept in time, or accepts but gives no
            HTTP/2 answer in time (silent, closed, or another protocol); the message says
            which, naming ``host:port``.
    """
    target = host_port(address)
    if target is None:
        return
    where = f"{target[0]}:{target[1]}"
    deadline = clock() + timeout_s
    try:
        sock = socket.create_connection(target, timeout=timeout_s)
    except TimeoutError:
        raise ConnectionError(f"nothing answers at {where} within {timeout_s:g} s") from None
    except (OSError, OverflowError) as exc:  # OverflowError: a port past 65535
        reason = getattr(exc, "strerror", None) or exc
        raise ConnectionError(f"nothing answers at {where} ({reason})") from exc
    with sock:
        if handshake and not _tls():
            _answer(sock, where, timeout_s, lambda: deadline - clock())


def _answer(sock: socket.socket, where: str, timeout_s: float, left: Clock) -> None:
    """Send the HTTP/2 preface on ``sock``; the server's first frame must be its SETTINGS.

    ``left()``: the seconds left of the budget; each blocking call waits that long at most.
    """
    header = b""
    try:
        sock.settimeout(max(left(), 1e-3))
        sock.sendall(_PREFACE)
        while len(header) < _HEADER:
            sock.settimeout(max(left(), 1e-3))
            data = sock.recv(_HEADER - len(header))
            if not data:
                break
            header += data
    except TimeoutError:
        raise ConnectionError(
            f"{where} accepts connections but gave no gRPC (HTTP/2) answer within "
            f"{timeout_s:g} s: not a Ray GCS"
        ) from None
    except OSError:  # reset by the peer: closed, as far as an answer goes
        header = b""
    if len(header) < _HEADER:
        raise ConnectionError(
            f"{where} closed the connection without a gRPC (HTTP/2) answer: not a Ray GCS"
        )
    stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
    if header[3] != _SETTINGS or header[4] & 1 or stream != 0:
        raise ConnectionError(f"{where} answered, but not as gRPC (HTTP/2): not a Ray GCS")

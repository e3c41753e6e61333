"""What obstore does not do, done on URLs it signs: DELETE If-Match, dated reads, reads in place.

obstore (the Rust ``object_store`` crate) does every other object call. Three things it lacks:

- **A precondition on DELETE.** A holder deletes only its own version of a claim or lock
  (``If-Match``).
- **Response headers.** A claim's age is judged by the object store's clock (the response's
  ``Date`` minus the object's ``Last-Modified``), never by a caller's; obstore returns the
  object's metadata only.
- **A ranged read into the caller's buffers.** obstore collects every response body into a
  buffer of its own (which a reader then copies into its batch): measured against a local
  HTTP server sending a 4.8 MB chunk at once, that costs about three times the CPU of
  receiving the body straight into the batch rows (``recv_into``, as ``preadv`` does from a
  file): 1.9 ms against 0.6 ms per chunk (``docs/scale.md``, "Capacity plan").

For these, :func:`obstore.sign` signs a URL with the store's own configured credentials and
the standard library's ``http.client`` sends it, on one kept-alive connection per thread and
host, with ``Range`` and ``If-Match`` added where wanted; a ranged read over plain HTTP goes
through :mod:`precompute.storage.rawget` (the body received by one system call), on a URL
signed once for 30 s of reads of that object (signed again sooner if the server refuses it).
Nothing here reads or logs a credential, and a signed URL never goes into a message. Connection
failures and 5xx answers are retried a few times with backoff, as obstore retries its own.

Signing needs credentials that can sign: S3 keys or a session (any S3-compatible server), a
GCS service-account key, an Azure account key or user delegation. These requests go to the
server directly, never through an HTTP proxy. Where the credentials cannot sign, or a proxy is
configured for the server (``HTTP_PROXY``, ``HTTPS_PROXY``, not bypassed by ``NO_PROXY``),
reads fall back to obstore's own GET (:class:`Declined`), which honours the proxy.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from precompute.storage import rawget

__all__ = ["Declined", "RangeAnswer", "Response", "age_of", "read_into", "send"]

_TRIES = 4  # attempts of a request that failed to connect or got a 5xx
_TIMEOUT_S = 30.0
_VALID = timedelta(minutes=10)  # how long a signed URL is good for
_REUSE_S = 30.0  # a ranged read's signed URL is reused this long (signing costs ~60 us a GET)
_REUSE_MAX = 4096  # signed URLs kept at most (then all are dropped and signed again)
_reuse: dict[tuple[int, str], tuple[float, Any, urllib.parse.SplitResult]] = {}
_local = threading.local()  # this thread's connections: (scheme, host, port) -> connection


def _pool() -> dict[tuple[str, str], http.client.HTTPConnection]:
    """This thread's connections; a forked child starts with none (never its parent's)."""
    if _local.__dict__.get("pid") != os.getpid():
        _local.pid, _local.pool = os.getpid(), {}
    pool: dict[tuple[str, str], http.client.HTTPConnection] = _local.pool
    return pool


class Declined(OSError):
    """This route cannot serve the request: use obstore's own instead.

    The credentials cannot sign, or a proxy stands between this host and the server.
    """


@dataclass(frozen=True)
class Response:
    """The status, headers and body of one signed request."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def header(self, name: str) -> str | None:
        """One header's value, or None."""
        value = self.headers.get(name)
        return None if value is None else str(value)


@dataclass(frozen=True)
class RangeAnswer:
    """What a ranged read into buffers got: the bytes read, the object's size and version."""

    status: int
    got: int
    size: int | None
    etag: str


def _sign(store: Any, method: str, key: str) -> urllib.parse.SplitResult:
    import obstore

    try:
        url = obstore.sign(store, method, key, _VALID)  # type: ignore[call-overload]
    except Exception as exc:  # obstore names what its credentials cannot do
        raise Declined(f"cannot sign a {method} ({type(exc).__name__})") from exc
    return urllib.parse.urlsplit(str(url))


def _signed_get(store: Any, key: str, fresh: bool) -> tuple[urllib.parse.SplitResult, bool]:
    """A signed GET of ``key`` and whether it was signed before (reused for ``_REUSE_S``).

    Only the host is signed (not ``Range`` or ``If-Match``), so one URL serves every range of
    an object; ``fresh`` signs again. The store is kept with its URLs: its ``id`` is not
    reused by another store while they are kept.
    """
    now = time.monotonic()
    kept = None if fresh else _reuse.get((id(store), key))
    if kept is not None and kept[0] > now and kept[1] is store:
        return kept[2], True
    url = _sign(store, "GET", key)
    if len(_reuse) >= _REUSE_MAX:
        _reuse.clear()
    _reuse[(id(store), key)] = (now + _REUSE_S, store, url)
    return url, False


def _connection(url: urllib.parse.SplitResult, fresh: bool) -> http.client.HTTPConnection:
    pool = _pool()
    where = (url.scheme, url.netloc)
    conn = pool.get(where)
    if conn is None or fresh:
        if conn is not None:
            conn.close()
        host, port = url.hostname or "", url.port
        conn = (
            http.client.HTTPSConnection(
                host, port, timeout=_TIMEOUT_S, context=ssl.create_default_context()
            )
            if url.scheme == "https"
            else http.client.HTTPConnection(host, port, timeout=_TIMEOUT_S)
        )
        pool[where] = conn
    return conn


def _drop(url: urllib.parse.SplitResult) -> None:
    conn = _pool().pop((url.scheme, url.netloc), None)
    if conn is not None:
        conn.close()


def _exchange(
    store: Any, method: str, key: str, headers: dict[str, str], body: Any
) -> tuple[urllib.parse.SplitResult, http.client.HTTPResponse, Any]:
    """Send one signed request, retried on connection failures and 5xx.

    ``body(resp)`` reads the answer; its value comes back with it.

    Raises:
        Declined: The credentials cannot sign.
        OSError: No answer came (the message names the method, never the signed URL).
    """
    failure: BaseException | None = None
    for attempt in range(_TRIES):
        if attempt:
            time.sleep(0.1 * 2**attempt)
        url = _sign(store, method, key)
        conn = _connection(url, fresh=attempt > 0)
        try:
            conn.request(method, f"{url.path}?{url.query}", headers=headers)
            resp = conn.getresponse()
            if resp.status >= 500:
                resp.read()
                failure = OSError(f"HTTP {resp.status}")
                _drop(url)
                continue
            value = body(resp)
            if resp.will_close:
                _drop(url)
            return url, resp, value
        except (OSError, http.client.HTTPException) as exc:  # reset, refused, timed out
            failure = exc
            _drop(url)
    reason = f"{type(failure).__name__}: {failure}" if failure else "no answer"
    raise OSError(f"{method} failed ({reason})")


def send(store: Any, method: str, key: str, headers: dict[str, str] | None = None) -> Response:
    """Send ``method`` on ``key`` of the obstore ``store`` by a URL it signs; any status returns.

    Raises:
        Declined: The credentials cannot sign.
        OSError: No answer came.
    """
    _, resp, body = _exchange(store, method, key, dict(headers or {}), lambda r: r.read())
    return Response(resp.status, resp.headers, body)


def read_into(
    store: Any, key: str, buffers: Sequence[Any], offset: int, if_match: str | None = None
) -> RangeAnswer:
    """GET the range of ``key`` at ``offset`` that ``buffers`` hold, received straight into them.

    Answers other than 206 read nothing into the buffers (the caller reports 404, 412, 416).

    Raises:
        Declined: The credentials cannot sign.
        OSError: No answer came.
    """
    views = [memoryview(b).cast("B") for b in buffers]
    total = sum(v.nbytes for v in views)
    headers = {"Range": f"bytes={offset}-{offset + total - 1}"}
    if if_match:
        headers["If-Match"] = if_match
    failure: BaseException | None = None
    for attempt in range(_TRIES):
        if attempt:
            time.sleep(0.1 * 2**attempt)
        url, reused = _signed_get(store, key, fresh=attempt > 0)
        if _proxied(url.scheme, url.hostname or ""):
            raise Declined(f"a proxy is configured for {url.scheme}")
        if url.scheme != "http":
            break
        try:
            status, got, fields = rawget.get_into(url, headers, views, fresh=attempt > 0)
        except rawget.NotPlain:
            break
        except OSError as exc:  # reset, refused, timed out: a fresh connection next
            failure = exc
            continue
        if status >= 500 or (status == 403 and reused):  # 403: its credentials may have expired
            failure = OSError(f"HTTP {status}")
            continue
        return _answer(status, got, fields.get("content-range"), fields.get("etag"))
    else:
        reason = f"{type(failure).__name__}: {failure}" if failure else "no answer"
        raise OSError(f"GET failed ({reason})")
    return _client_read_into(store, key, headers, views)


@functools.lru_cache(maxsize=64)
def _proxied(scheme: str, host: str) -> bool:
    """Whether the environment sends ``scheme`` requests to ``host`` through a proxy."""
    return scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)


def _answer(status: int, got: int, span: str | None, etag: str | None) -> RangeAnswer:
    total = (span or "").rpartition("/")[2]
    return RangeAnswer(status, got, int(total) if total.isdigit() else None, etag or "")


def _client_read_into(
    store: Any, key: str, headers: dict[str, str], views: list[memoryview]
) -> RangeAnswer:
    """:func:`read_into` through ``http.client`` (``https``, or an answer ``rawget`` declines)."""
    views = [memoryview(v).cast("B") for v in views]

    def receive(resp: http.client.HTTPResponse) -> int:
        if resp.status != 206:
            resp.read()
            return 0
        got = 0
        for view in views:
            while view.nbytes:
                n = resp.readinto(view)
                if not n:
                    resp.read()
                    return got
                got += n
                view = view[n:]
        resp.read()  # the rest of a longer answer: the connection stays usable
        return got

    _, resp, got = _exchange(store, "GET", key, headers, receive)
    return _answer(resp.status, got, resp.getheader("Content-Range"), resp.getheader("ETag"))


def age_of(date: str | None, modified: datetime | str | None) -> float | None:
    """Seconds from ``modified`` to ``date`` (an HTTP ``Date``: the server's clock now).

    None when either is missing or unreadable: an odd header never fails a read.
    """
    if not date or modified is None:
        return None
    try:
        now = email.utils.parsedate_to_datetime(date)
        if isinstance(modified, str):
            modified = email.utils.parsedate_to_datetime(modified)
        if now.tzinfo is None:  # "-0000" or no zone: HTTP dates are GMT
            now = now.replace(tzinfo=timezone.utc)
        if modified.tzinfo is None:
            modified = modified.replace(tzinfo=timezone.utc)
        return float((now - modified).total_seconds())
    except (TypeError, ValueError, OverflowError):
        return None

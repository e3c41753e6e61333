"""The test S3 server's wire: hooks on every request it serves, and a clock a test moves.

The tests' S3-compatible server is moto's server mode on 127.0.0.1 (``tests/conftest.py``), over
real HTTP. :class:`WiredMotoServer` is that server with :data:`WIRE` wrapped around its WSGI app,
so a test can act at one exact point of the protocol whatever client sends the request (obstore,
a signed request, boto3, another process):

- :meth:`Wire.hook`: call a function before each request is served; it sees the operation
  (``GetObject``, ``PutObject``, ...), bucket, key and headers, and may drop a header (a server
  that ignores ``If-Match``), refuse the request with a status, or do something first (another
  process's move in a race).
- :meth:`Wire.advance`: move the store's clock forward. Every response's ``Date`` then reads
  that much later, and every object the ``Last-Modified`` the store's clock showed when it was
  written (in ``HEAD``, ``GET`` and ``LIST`` answers), so every object written before reads that
  much older at once. The server's own data is never changed.
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

__all__ = ["WIRE", "Refused", "Wire", "WireRequest", "WiredMotoServer"]

_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.S)
_KEY = re.compile(rb"<Key>(.*?)</Key>", re.S)
_MODIFIED = re.compile(rb"<LastModified>(.*?)</LastModified>")


class Refused(Exception):
    """Raised by a hook: the request is answered with ``status`` and not served."""

    def __init__(self, status: int = 403, code: str = "AccessDenied") -> None:
        super().__init__(code)
        self.status, self.code = status, code


@dataclass
class WireRequest:
    """One request as the server received it (``headers`` by lower-case name)."""

    op: str
    bucket: str
    key: str
    method: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    environ: dict[str, Any] = field(repr=False)

    def drop_header(self, name: str) -> None:
        """Serve the request as if it came without header ``name``."""
        self.headers.pop(name.lower(), None)
        self.environ.pop("HTTP_" + name.upper().replace("-", "_"), None)


def _op(method: str, key: str, query: dict[str, list[str]], headers: dict[str, str]) -> str:
    if method == "GET":
        return "GetObject" if key else "ListObjectsV2"
    if method == "HEAD":
        return "HeadObject" if key else "HeadBucket"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    if method == "POST":
        if "delete" in query:
            return "DeleteObjects"
        return "CompleteMultipartUpload" if "uploadId" in query else "CreateMultipartUpload"
    if method == "PUT" and not key:
        return "CreateBucket"
    return "UploadPart" if "partNumber" in query else "PutObject"


class Wire:
    """Hooks and a clock around the test server's app (see the module docstring)."""

    def __init__(self) -> None:
        self._hooks: list[Callable[[WireRequest], None]] = []
        self._lock = threading.Lock()
        self.offset = 0
        self._written: dict[tuple[str, str], int] = {}  # (bucket, key) -> offset then

    @contextmanager
    def hook(self, fn: Callable[[WireRequest], None]) -> Iterator[None]:
        """Within: call ``fn`` before each request is served (it may raise :class:`Refused`)."""
        with self._lock:
            self._hooks.append(fn)
        try:
            yield
        finally:
            with self._lock:
                self._hooks.remove(fn)

    @contextmanager
    def count(self) -> Iterator[dict[tuple[str, str], int]]:
        """Within: count requests by ``(operation, key)``."""
        seen: dict[tuple[str, str], int] = {}

        def counted(req: WireRequest) -> None:
            with self._lock:
                seen[req.op, req.key] = seen.get((req.op, req.key), 0) + 1

        with self.hook(counted):
            yield seen

    def advance(self, seconds: int) -> None:
        """Move the store's clock ``seconds`` forward (whole seconds, as HTTP dates are)."""
        self.offset += int(seconds)

    def reset_clock(self) -> None:
        """Put the store's clock back to the real one."""
        self.offset = 0
        self._written.clear()

    def now(self) -> float:
        """The store's clock, as Unix time."""
        return time.time() + self.offset

    def app(self, inner: Any) -> Callable[..., Any]:
        """The WSGI app ``inner`` with the hooks and the clock around it."""

        def wired(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            req = self._request(environ)
            try:
                for fn in list(self._hooks):
                    fn(req)
            except Refused as refused:
                body = f"<Error><Code>{refused.code}</Code></Error>".encode()
                start_response(f"{refused.status} Refused", [("Content-Length", str(len(body)))])
                return [body]
            status: list[str] = []

            def start(code: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
                status.append(code)
                self._after(req, int(code.split()[0]))
                return start_response(code, self._headers(req, headers), exc_info)

            body = inner(environ, start)
            if req.op == "ListObjectsV2" and self.offset:
                data = _shift_listing(b"".join(body), lambda k: self._written_at(req.bucket, k))
                return [data]
            return body

        return wired

    def _request(self, environ: dict[str, Any]) -> WireRequest:
        path = urllib.parse.unquote(environ.get("PATH_INFO", ""))
        bucket, _, key = path.lstrip("/").partition("/")
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        headers = {
            k[5:].replace("_", "-").lower(): str(v)
            for k, v in environ.items()
            if k.startswith("HTTP_")
        }
        method = environ.get("REQUEST_METHOD", "GET")
        return WireRequest(
            _op(method, key, query, headers), bucket, key, method, query, headers, environ
        )

    def _after(self, req: WireRequest, status: int) -> None:
        if not 200 <= status < 300:
            return
        with self._lock:
            if req.op in ("PutObject", "CompleteMultipartUpload"):
                self._written[req.bucket, req.key] = self.offset
            elif req.op == "DeleteObject":
                self._written.pop((req.bucket, req.key), None)

    def _written_at(self, bucket: str, key: str) -> int:
        return self._written.get((bucket, key), 0)

    def _headers(self, req: WireRequest, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        shift = self._written_at(req.bucket, req.key)
        if not shift:
            return headers
        out = []
        for name, value in headers:
            if name.lower() == "last-modified":
                when = email.utils.parsedate_to_datetime(value) + timedelta(seconds=shift)
                value = email.utils.format_datetime(when, usegmt=True)
            out.append((name, value))
        return out


def _shift_listing(body: bytes, shift_of: Callable[[str], int]) -> bytes:
    """A LIST answer with each object's ``LastModified`` moved by ``shift_of(key)`` seconds."""

    def contents(found: re.Match[bytes]) -> bytes:
        block = found.group(1)
        key = _KEY.search(block)
        shift = shift_of(key.group(1).decode()) if key else 0
        if not shift:
            return found.group(0)

        def modified(m: re.Match[bytes]) -> bytes:
            when = datetime.strptime(m.group(1).decode(), "%Y-%m-%dT%H:%M:%S.%fZ")
            when = when.replace(tzinfo=timezone.utc) + timedelta(seconds=shift)
            text = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
            return b"<LastModified>" + text.encode() + b"</LastModified>"

        return b"<Contents>" + _MODIFIED.sub(modified, block) + b"</Contents>"

    return _CONTENTS.sub(contents, body)


WIRE = Wire()  # the wire of the test server of this process


class _Handler(MotoRequestHandler):
    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` of every answer: the store's clock."""
        return email.utils.formatdate(WIRE.now() if timestamp is None else timestamp, usegmt=True)


class _Dispatcher(DomainDispatcherApplication):  # type: ignore[misc]
    """moto's dispatcher of requests to its services, which remembers the service of each host.

    To find the service of a host name, moto lists its package folder (a ``stat`` of each of its
    ~200 folders) and tries the URL patterns of every service, on every request: about a third of
    the server's CPU per request, paid in the process of the test that uses the server. The
    answer for a host name never changes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._services: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        # called under moto's own lock of the dispatcher
        if host not in self._services:
            self._services[host] = super().get_backend_for_host(host)
        return self._services[host]


class WiredMotoServer(ThreadedMotoServer):
    """moto's threaded server with :data:`WIRE` around its app (same arguments)."""

    def _server_entry(self) -> None:
        app = WIRE.app(_Dispatcher(create_backend_app))
        self._server = make_server(
            self._ip_address, self._port, app, True, request_handler=_Handler
        )
        self._server_ready_event.set()
        self._server.serve_forever()

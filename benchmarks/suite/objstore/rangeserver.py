"""A read-only S3-compatible server of a local folder that sends at line rate.

Run: ``python -m benchmarks.suite.objstore.rangeserver FOLDER PORT [BYTES_PER_S]``;
``s3://BUCKET/KEY`` is served from ``FOLDER/BUCKET/KEY``. With ``BYTES_PER_S`` every body goes
out in 64 KiB pieces under one token bucket of that rate for the whole server (a link of that
bandwidth: an HDD, NFS, a slow object store; :mod:`benchmarks.suite.codecs.capped` uses it where
tc cannot cap a network namespace, which costs no CPU per piece). It answers what
a reader of a store sends: ``GET`` (whole, ``Range: bytes=a-b`` or ``bytes=-n``, ``If-Match``),
``HEAD`` and ``ListObjectsV2`` (one page), on kept-alive connections, one thread each; a body
is read (``pread``) and goes out with one ``sendall`` (``sendfile`` sent more slowly here).
No authentication is checked. :mod:`benchmarks.suite.objstore` measures the loader's own CPU
against it: moto, a Python server that builds each answer in memory, sends more slowly than a
real object store, and a slow sender makes a reader wake up many more times per byte.
"""

from __future__ import annotations

import email.utils
import os
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["main"]


def _etag(st: os.stat_result) -> str:
    return f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'


_PIECE = 64 << 10  # bytes sent per token-bucket take


class _Bucket:
    """A token bucket of ``rate`` bytes/s shared by every connection (thread-safe)."""

    def __init__(self, rate: float) -> None:
        self.rate, self._next = rate, time.monotonic()
        self._lock = threading.Lock()

    def take(self, n: int) -> None:
        """Wait until ``n`` more bytes fit under the rate."""
        with self._lock:
            now = time.monotonic()
            self._next = max(self._next, now) + n / self.rate
            wait = self._next - now - n / self.rate
        if wait > 0:
            time.sleep(wait)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    # TCP_NODELAY: the headers and each 64 KiB piece go out at once, never held back for the
    # client's delayed ACK (under the token bucket, raw reads reached 70% of the rate with it off)
    disable_nagle_algorithm = True
    root: Path
    limit: _Bucket | None = None

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: one line per request otherwise."""

    def _reply(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _path(self) -> tuple[Path, urllib.parse.SplitResult]:
        url = urllib.parse.urlsplit(self.path)
        return self.root / urllib.parse.unquote(url.path).lstrip("/"), url

    def do_HEAD(self) -> None:
        """Size, version and date of one object."""
        self.do_GET()

    def do_GET(self) -> None:
        """One object (or a range of it), or a listing."""
        path, url = self._path()
        query = urllib.parse.parse_qs(url.query)
        if "list-type" in query:
            self._list(path, query.get("prefix", [""])[0])
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            self._reply(404, {}, b"<Error><Code>NoSuchKey</Code></Error>")
            return
        try:
            self._send(fd, os.fstat(fd))
        finally:
            os.close(fd)

    def _send(self, fd: int, st: os.stat_result) -> None:
        etag, size = _etag(st), st.st_size
        wanted = self.headers.get("If-Match")
        if wanted and wanted != etag:
            self._reply(412, {}, b"<Error><Code>PreconditionFailed</Code></Error>")
            return
        start, stop, status = 0, size, 200
        spec = self.headers.get("Range", "").removeprefix("bytes=")
        if spec:
            first, _, last = spec.partition("-")
            start = max(0, size - int(last)) if not first else int(first)
            stop = size if not first or not last else min(size, int(last) + 1)
            status = 206
        headers = {
            "ETag": etag,
            "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
            "Content-Length": str(stop - start),
            "Accept-Ranges": "bytes",
        }
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.flush()
        body = os.pread(fd, stop - start, start)
        if self.limit is None:
            self.connection.sendall(body)
            return
        for at in range(0, len(body), _PIECE):
            piece = body[at : at + _PIECE]
            self.limit.take(len(piece))
            self.connection.sendall(piece)

    def _list(self, bucket: Path, prefix: str) -> None:
        rows = []
        base = bucket / prefix
        found = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        for p in found:
            st = p.stat()
            when = datetime.fromtimestamp(st.st_mtime, timezone.utc)
            rows.append(
                f"<Contents><Key>{escape(p.relative_to(bucket).as_posix())}</Key>"
                f"<LastModified>{when.strftime('%Y-%m-%dT%H:%M:%S.000Z')}</LastModified>"
                f"<ETag>{escape(_etag(st))}</ETag><Size>{st.st_size}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
            f"<Name>{escape(bucket.name)}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(rows)}</KeyCount><MaxKeys>1000000</MaxKeys>"
            f"<IsTruncated>false</IsTruncated>{''.join(rows)}</ListBucketResult>"
        ).encode()
        self._reply(200, {"Content-Type": "application/xml"}, body)


def main(argv: list[str] | None = None) -> None:
    """Serve ``FOLDER`` on ``127.0.0.1:PORT`` until killed."""
    args = argv if argv is not None else sys.argv[1:]
    folder, port = args[:2]
    limit = _Bucket(float(args[2])) if len(args) > 2 else None
    handler = type("Handler", (_Handler,), {"root": Path(folder), "limit": limit})
    ThreadingHTTPServer(("127.0.0.1", int(port)), handler).serve_forever()


if __name__ == "__main__":
    main()

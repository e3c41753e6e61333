"""Read one input safely: regular files only, a byte bound, and a deadline on a stuck read.

A build reads whatever a source lists, and a manifest can list anything: a FIFO blocks the
first ``open``, ``/dev/zero`` never ends, a dead network mount never answers. Every read of an
input (an image, a manifest, a content hash) goes through here:

- **Regular files only** (local paths): the file is ``stat``-ed before it is opened and
  ``fstat``-ed after (opened with ``O_NONBLOCK``, so a FIFO cannot block the ``open``);
  anything else is refused with its kind (``FIFO``, ``character device``, ...).
- **A byte bound**: at most ``max_bytes`` are read; a larger input is refused, never loaded.
- **A deadline**: the bytes are pumped by a daemon thread (idle ones are reused); if no chunk
  arrives for ``deadline_s`` seconds the read is abandoned (the stuck thread is left behind,
  blocked in the kernel or the network client) and refused. :func:`read_input` of a local
  file reads it whole on that thread and hands it over once (one hand-off per file, not one
  per chunk plus the end: a build reads thousands of small files), within ``deadline_s``.

Refusals raise :class:`~precompute.errors.InputError` (an ``OSError``) with a stable reason.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import stat
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any, cast

from precompute.errors import InputError
from precompute.sources.listing import is_url

__all__ = [
    "DEFAULT_MAX_BYTES",
    "READ_DEADLINE_S",
    "counted",
    "file_kind",
    "hash_input",
    "open_input",
    "read_input",
]

# The spec's default bound on the bytes of one input (``max_bytes``): 256 MiB.
DEFAULT_MAX_BYTES = 256 * 2**20
# Seconds without a single chunk arriving after which a read is abandoned as stuck.
READ_DEADLINE_S = 60.0
_CHUNK = 1 << 20
_END = object()
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str | None:
    """Return None for a regular file, else what ``mode`` is (``"a FIFO"``, ``"a folder"``)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _require_regular(where: str, mode: int) -> None:
    kind = file_kind(mode)
    if kind is not None:
        raise InputError(where, f"not a regular file ({kind})")


def _open_local(path: str) -> IO[bytes]:
    _require_regular(path, os.stat(path).st_mode)  # before open: a FIFO blocks in open()
    flags = getattr(os, "O_NONBLOCK", 0)
    f = open(path, "rb", opener=lambda p, fl: os.open(p, fl | flags))  # noqa: SIM115
    try:
        _require_regular(path, os.fstat(f.fileno()).st_mode)  # replaced since the stat
    except InputError:
        f.close()
        raise
    return f


def _opener(where: str) -> Callable[[], Any]:
    if not is_url(where):
        path = where[len("file://") :] if where.startswith("file://") else where
        return lambda: _open_local(path)
    from precompute.storage.s3fsspec import fsspec_s3  # lazy: only URL sources need it

    fsspec = fsspec_s3()  # s3:// through boto3 when s3fs is missing
    return lambda: fsspec.open(where, "rb").open()


def open_input(where: str) -> IO[bytes]:
    """Open the local path or URL ``where`` as a seekable binary stream (regular files only).

    For decoders that read part of a long file (an audio window); reads through it have no
    deadline, unlike :func:`read_input`.

    Raises:
        InputError: Not a regular file.
        OSError: The file cannot be opened (missing, permissions, ...).
    """
    return cast("IO[bytes]", _opener(where)())


class _Counted(io.RawIOBase):
    """A binary stream that reports the bytes read through it."""

    def __init__(self, inner: IO[bytes], on_read: Callable[[int], None]) -> None:
        super().__init__()
        self._inner, self._on_read = inner, on_read

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(memoryview(buffer)))
        memoryview(buffer)[: len(data)] = data
        self._on_read(len(data))
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def close(self) -> None:
        self._inner.close()
        super().close()


def counted(stream: IO[bytes], on_read: Callable[[int], None]) -> IO[bytes]:
    """``stream``, calling ``on_read(n)`` with the bytes of every read through it."""
    return cast("IO[bytes]", io.BufferedReader(_Counted(stream, on_read)))


def _put(q: queue.Queue[Any], item: object, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.5)
            return
        except queue.Full:
            continue


def _pump(
    open_fn: Callable[[], Any], limit: int | None, q: queue.Queue[Any], stop: threading.Event
) -> None:
    try:
        with open_fn() as f:
            left = limit
            while not stop.is_set() and (left is None or left > 0):
                chunk = f.read(_CHUNK if left is None else min(_CHUNK, left))
                if not chunk:
                    break
                _put(q, bytes(chunk), stop)
                left = None if left is None else left - len(chunk)
        _put(q, _END, stop)
    except Exception as exc:  # carried to the reading thread as a value
        _put(q, exc, stop)


_idle: list[queue.SimpleQueue[Callable[[], None]]] = []
_idle_lock = threading.Lock()


def _after_fork() -> None:
    """A forked child has none of the reader threads, and maybe a lock held by one."""
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _serve(inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        inbox.get()()
        with _idle_lock:
            _idle.append(inbox)  # only a thread that finished is reused; a stuck one never is


def _submit(job: Callable[[], None]) -> None:
    """Run ``job`` on an idle daemon thread, or on a new one."""
    with _idle_lock:
        inbox = _idle.pop() if _idle else None
    if inbox is None:
        inbox = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(inbox,), daemon=True, name="nostall-input").start()
    inbox.put(job)


def _chunks(where: str, limit: int | None, deadline_s: float) -> Iterator[bytes]:
    """Yield the chunks of ``where`` (at most ``limit`` bytes) read by a daemon thread."""
    q: queue.Queue[Any] = queue.Queue(maxsize=4)
    stop = threading.Event()
    open_fn = _opener(where)
    _submit(lambda: _pump(open_fn, limit, q, stop))
    try:
        while True:
            try:
                item = q.get(timeout=deadline_s)
            except queue.Empty:
                raise InputError(where, f"read stuck: no data for {deadline_s:g} s") from None
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _read_whole(open_fn: Callable[[], Any], limit: int, stop: threading.Event) -> bytes:
    """Read at most ``limit`` bytes of a local file: its size at once, then to the end.

    Reads after the first are bounded by :data:`_CHUNK` (``read(n)`` allocates ``n`` bytes up
    front) and stop once ``stop`` is set (the caller gave up at its deadline).
    """
    with open_fn() as f:
        parts = [f.read(min(os.fstat(f.fileno()).st_size, limit))]
        size = len(parts[0])
        while size < limit and not stop.is_set():  # grown since the fstat: read to the end
            more = f.read(min(_CHUNK, limit - size))
            if not more:
                break
            parts.append(more)
            size += len(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read_local(where: str, max_bytes: int, deadline_s: float) -> bytes:
    """:func:`read_input` of a local path: read whole on a daemon thread, handed over once."""
    result: queue.SimpleQueue[Any] = queue.SimpleQueue()
    open_fn, stop = _opener(where), threading.Event()

    def job() -> None:
        try:
            result.put(_read_whole(open_fn, max_bytes + 1, stop))
        except Exception as exc:  # carried to the reading thread as a value
            result.put(exc)

    _submit(job)
    try:
        item = result.get(timeout=deadline_s)
    except queue.Empty:
        stop.set()  # a reader that comes unstuck reads no further
        raise InputError(where, f"read stuck: no data for {deadline_s:g} s") from None
    if isinstance(item, BaseException):
        raise item
    if len(item) > max_bytes:
        raise InputError(where, f"larger than max_bytes = {max_bytes} bytes")
    return bytes(item)


def read_input(
    where: str, max_bytes: int = DEFAULT_MAX_BYTES, deadline_s: float = READ_DEADLINE_S
) -> bytes:
    """Return the bytes of the local path or URL ``where``, read safely.

    A local file must be read whole within ``deadline_s`` (at the defaults, 256 MiB at
    4.3 MB/s or faster); a URL is refused when no chunk arrives for ``deadline_s``.

    Raises:
        InputError: Not a regular file, more than ``max_bytes`` bytes, or stuck.
        OSError: The file cannot be opened or read (missing, permissions, ...).
    """
    if not is_url(where):
        return _read_local(where, max_bytes, deadline_s)
    parts: list[bytes] = []
    size = 0
    for chunk in _chunks(where, max_bytes + 1, deadline_s):
        parts.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise InputError(where, f"larger than max_bytes = {max_bytes} bytes")
    return b"".join(parts)


def hash_input(where: str, deadline_s: float = READ_DEADLINE_S) -> str:
    """Return the sha256 hex digest of ``where``'s bytes, streamed (no size bound, no copy).

    Raises:
        InputError: Not a regular file, or stuck.
        OSError: The file cannot be opened or read.
    """
    h = hashlib.sha256()
    for chunk in _chunks(where, None, deadline_s):
        h.update(chunk)
    return h.hexdigest()

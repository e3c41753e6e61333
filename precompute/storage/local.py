"""The local-filesystem byte store: keys are paths, writes are atomic renames.

Every object is written as ``<name>.<uuid>.partial`` beside its final name and renamed over it
(as zarr-python's local store and :func:`precompute.format.shardcodec.write_raw_shard` do), so a
reader sees the old file or the new one and a killed writer leaves only a ``.partial`` file
(:func:`precompute.pipeline.outputs.remove_partials` deletes those). Reads are ``pread`` and
``preadv`` straight into the caller's buffers (:mod:`precompute.storage.localio`); a version is a
file's inode, size and modification time. Conditional writes hold ``flock`` on the file they
replace; the build lock is a ``flock`` that dies with its holder.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from typing import Any

from precompute.errors import BuildLockedError
from precompute.storage.base import Blob, ByteStore, Data, Meta, Stamp, VersionChangedError
from precompute.storage.localio import file_stamp, preadv_all, preadv_fd, writev_all

__all__ = ["LocalStore"]


def _version(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _meta(st: os.stat_result) -> Meta:
    return Meta(st.st_size, _version(st), datetime.fromtimestamp(st.st_mtime, timezone.utc))


def _buffers(data: Data) -> list[Any]:
    return [data] if isinstance(data, (bytes, bytearray, memoryview)) else list(data)


class LocalStore(ByteStore):
    """Files of the local filesystem (or a mounted shared one); a key is the file's path."""

    remote = False

    def url(self, key: str) -> str:
        """The path itself."""
        return key

    def key_of(self, url: str) -> str:
        """The path itself."""
        return url

    def join(self, key: str, name: str) -> str:
        """``key/name`` as :func:`os.path.join` gives it."""
        return os.path.join(key, name) if key else name

    def get(
        self,
        key: str,
        start: int | None = None,
        length: int | None = None,
        *,
        if_version: str | None = None,
    ) -> Blob:
        """Read the file ``key``, a range of it, or its last ``length`` bytes."""
        fd = os.open(key, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if if_version is not None and _version(st) != if_version:
                raise OSError(f"{key}: the file was replaced while the store was read")
            size = st.st_size
            if start is None:
                start = 0 if length is None else max(0, size - length)
            count = max(0, size - start) if length is None else max(0, min(length, size - start))
            data = _pread(fd, count, start)
        finally:
            os.close(fd)
        return Blob(data, size, _version(st), stamp=file_stamp(st))

    def read_into(
        self, key: str, buffers: Any, offset: int, *, if_version: str | None = None
    ) -> int:
        """``preadv`` straight into ``buffers`` (one kernel copy, no intermediate bytes)."""
        if if_version is None:
            return preadv_all(key, buffers, offset)
        fd = os.open(key, os.O_RDONLY)
        try:
            if _version(os.fstat(fd)) != if_version:
                raise OSError(f"{key}: the file was replaced while the store was read")
            return preadv_fd(fd, buffers, offset)
        finally:
            os.close(fd)

    def head(self, key: str) -> Meta:
        """``stat`` the file (a folder is no object: :class:`IsADirectoryError`)."""
        st = os.stat(key)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{key}: a folder, not a file")
        return _meta(st)

    def stamp(self, key: str) -> Stamp:
        """``(inode, size, mtime ns)`` of the file (one ``stat``)."""
        return file_stamp(os.stat(key))

    def _write_tmp(self, key: str, data: Data) -> str:
        os.makedirs(os.path.dirname(key) or ".", exist_ok=True)
        tmp = f"{key}.{uuid.uuid4().hex}.partial"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            try:
                writev_all(fd, _buffers(data))
            finally:
                os.close(fd)
        except BaseException:
            _unlink(tmp)
            raise
        return tmp

    def put(self, key: str, data: Data) -> str:
        """Write a temporary file beside ``key`` and rename it over ``key``."""
        tmp = self._write_tmp(key, data)
        try:
            os.replace(tmp, key)
        except BaseException:
            _unlink(tmp)
            raise
        return _version(os.stat(key))

    def put_if_absent(self, key: str, data: Data) -> str:
        """Hard-link a written temporary file to ``key``: fails if ``key`` exists."""
        tmp = self._write_tmp(key, data)
        try:
            os.link(tmp, key)
        except FileExistsError:
            raise FileExistsError(f"{key}: exists") from None
        finally:
            _unlink(tmp)
        return _version(os.stat(key))

    @contextmanager
    def _locked(self, key: str, version: str) -> Iterator[None]:
        """Within: ``key`` is the file of ``version``, and no other conditional write runs."""
        try:
            fd = os.open(key, os.O_RDONLY)
        except FileNotFoundError:
            raise VersionChangedError(f"{key}: no longer the version {version}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(key)
            except FileNotFoundError:
                now = None
            if now is None or now.st_ino != os.fstat(fd).st_ino or _version(now) != version:
                raise VersionChangedError(f"{key}: no longer the version {version}")
            yield
        finally:
            os.close(fd)  # releases the flock

    def put_if_match(self, key: str, data: Data, version: str) -> str:
        """:meth:`put` while holding ``flock`` on the file of ``version``."""
        with self._locked(key, version):
            return self.put(key, data)

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Unlink ``key`` (no error if missing)."""
        if if_match is None:
            _unlink(key)
            return
        try:
            with self._locked(key, if_match):
                _unlink(key)
        except VersionChangedError:
            if os.path.lexists(key):
                raise

    def list_dir(self, prefix: str) -> list[str]:
        """The names in the folder ``prefix`` (none if it is missing)."""
        try:
            return sorted(os.listdir(prefix or "."))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list(self, prefix: str) -> dict[str, Meta]:
        """Every file below the folder ``prefix``, by path."""
        out: dict[str, Meta] = {}
        stack = [prefix]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file():
                    out[entry.path] = _meta(entry.stat())
        return dict(sorted(out.items()))

    def get_dated(self, key: str) -> Blob:
        """The whole file; its age by this host's clock (the filesystem's)."""
        blob = self.get(key)
        age = time.time() - os.stat(key).st_mtime
        return Blob(blob.data, blob.size, blob.version, age)

    def ages(self, prefix: str) -> dict[str, float]:
        """Seconds since each file below ``prefix`` was modified."""
        now = time.time()
        return {
            k: now - (m.modified.timestamp() if m.modified else now)
            for k, m in self.list(prefix).items()
        }

    def zarr(self, key: str, *, read_only: bool = True) -> Any:
        """zarr-python's ``LocalStore`` of the folder ``key``."""
        import zarr.storage

        return zarr.storage.LocalStore(key or ".", read_only=read_only)

    @contextmanager
    def exclusive(self, key: str, owner: str) -> Iterator[None]:
        """Hold ``flock`` on the file ``key`` (non-blocking): it dies with its holder."""
        from filelock import FileLock, Timeout

        os.makedirs(os.path.dirname(key) or ".", exist_ok=True)
        lock = FileLock(key, timeout=0)
        try:
            lock.acquire()
        except Timeout as exc:
            raise BuildLockedError(
                f"{owner}: another build is writing this store (lock {key} is held); wait for "
                "it to finish or choose another --out"
            ) from exc
        try:
            yield
        finally:
            lock.release()


def _pread(fd: int, count: int, offset: int) -> bytes:
    """``count`` bytes at ``offset`` (fewer only at the end of the file)."""
    data = os.pread(fd, count, offset)
    if len(data) == count or not data:
        return data
    parts = [data]
    got = len(data)
    while got < count:
        more = os.pread(fd, count - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _unlink(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)

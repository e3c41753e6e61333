"""S3-compatible object storage: ``s3://bucket/key`` URLs read and written with boto3.

The client is configured only the usual way of the AWS SDK: ``AWS_ENDPOINT_URL`` (an
S3-compatible server such as MinIO, Ceph or moto), ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE`` and ``~/.aws/config``. Nothing here logs or puts
credentials in a message: errors name the URL and the service's error code only.

Writes can be conditional: :func:`put_bytes` with ``only_new`` (``If-None-Match: *``) or
``if_match`` (an ETag), :func:`delete` with ``if_match``; a lost ``if_match`` raises
:class:`VersionChangedError`. :func:`put_bytes` returns the new ETag, so a writer can make its
next write conditional on its own last one.

:class:`ObjectPath` is a :class:`pathlib.Path` whose file reads (``read_text``,
``read_bytes``, ``is_file``, ``exists``, ``stat``) go to the object store, so the store
metadata checks of :mod:`precompute.format.layout` and :mod:`precompute.format.storecheck` apply to
a store in
object storage unchanged: ``str()`` of it is the ``s3://`` URL.
"""

from __future__ import annotations

import email.utils
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PosixPath
from typing import Any

from precompute.errors import StoreError

__all__ = [
    "ObjectPath",
    "Range",
    "VersionChangedError",
    "client",
    "delete",
    "get_range",
    "head",
    "head_object",
    "is_object_url",
    "list_ages",
    "list_sizes",
    "put_bytes",
    "split_url",
    "store_path",
]

SCHEME = "s3://"
_lock = threading.Lock()
_clients: dict[int, Any] = {}  # pid -> client


class VersionChangedError(OSError):
    """A conditional write (``if_match``) found the object changed or gone: another wrote it."""


def is_object_url(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an ``s3://`` URL (or an :class:`ObjectPath`)."""
    return isinstance(path, ObjectPath) or str(path).startswith(SCHEME)


def split_url(url: str) -> tuple[str, str]:
    """Return ``(bucket, key)`` of ``s3://bucket/key``.

    Raises:
        StoreError: Not an ``s3://`` URL with a bucket.
    """
    if not url.startswith(SCHEME) or not url[len(SCHEME) :].split("/", 1)[0]:
        raise StoreError(f"{url}: not an s3://bucket/key URL")
    bucket, _, key = url[len(SCHEME) :].partition("/")
    return bucket, key.strip("/")


def client() -> Any:
    """Return this process's boto3 S3 client (endpoint and credentials from the environment).

    One client per process, shared by all threads (boto3 clients are thread-safe and costly to
    create); a forked child makes its own.
    """
    with _lock:
        cached = _clients.get(os.getpid())
        if cached is None:
            import boto3
            from botocore.config import Config

            retries = {"max_attempts": 5, "mode": "standard"}
            config = Config(retries=retries, max_pool_connections=64)
            cached = _clients[os.getpid()] = boto3.session.Session().client("s3", config=config)
        return cached


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", type(exc).__name__))
    return type(exc).__name__


def _missing(exc: Exception) -> bool:
    return _code(exc) in ("404", "NoSuchKey", "NotFound")


def _failed_precondition(exc: Exception) -> bool:
    return _code(exc) in ("PreconditionFailed", "412")


def _lost_if_match(exc: Exception) -> bool:
    """A conditional write lost to another (409: a conflicting write was under way meanwhile)."""
    return _failed_precondition(exc) or _code(exc) in ("ConditionalRequestConflict", "409")


def _age(response: dict[str, Any], modified: datetime | None) -> float | None:
    """Seconds from ``modified`` to the ``Date`` of ``response`` (the server's clock)."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date or modified is None:
        return None
    try:  # a server's odd Date never fails the read: the age is unknown then
        now = email.utils.parsedate_to_datetime(date)
        if now.tzinfo is None:  # "-0000" or no zone: HTTP dates are GMT
            now = now.replace(tzinfo=timezone.utc)
        if modified.tzinfo is None:
            modified = modified.replace(tzinfo=timezone.utc)
        return float((now - modified).total_seconds())
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class Range:
    """Bytes of a ranged GET and what the response says about the whole object.

    ``age_s``: seconds since the object was last written, by the server's clock (its ``Date``
    minus the object's ``Last-Modified``); None when the response lacks either.
    """

    data: bytes
    size: int  # of the whole object
    etag: str
    age_s: float | None = None


def get_range(
    url: str, start: int | None = None, length: int | None = None, *, if_match: str | None = None
) -> Range:
    """GET ``length`` bytes at ``start`` of ``url`` (``start`` None: the last ``length``).

    Both None: the whole object. ``if_match``: only from the object version of this ETag.

    Raises:
        FileNotFoundError: No such object.
        OSError: Any other failure (naming the URL and the service's error code), also an
            object that is no longer the version ``if_match`` names.
    """
    bucket, key = split_url(url)
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if if_match:
        kwargs["IfMatch"] = if_match
    if length is not None:
        first = f"-{length}" if start is None else f"{start}-{start + length - 1}"
        kwargs["Range"] = f"bytes={first}"
    try:
        response = client().get_object(**kwargs)
        data = response["Body"].read()
    except Exception as exc:  # botocore raises many types; every one names a code
        if _missing(exc):
            raise FileNotFoundError(f"{url}: no such object") from None
        if _failed_precondition(exc):
            raise OSError(f"{url}: the object was replaced while the store was read") from exc
        raise OSError(f"{url}: GET failed ({_code(exc)})") from exc
    total = response.get("ContentRange", "").rpartition("/")[2]
    size = int(total) if total.isdigit() else int(response["ContentLength"])
    age = _age(response, response.get("LastModified"))
    return Range(data, size, str(response.get("ETag", "")), age)


def head_object(url: str) -> dict[str, Any]:
    """Return the HEAD response of the object ``url`` (``ContentLength``, ``ETag``, ...).

    Raises:
        FileNotFoundError: No such object.
        OSError: Any other failure.
    """
    bucket, key = split_url(url)
    try:
        return dict(client().head_object(Bucket=bucket, Key=key))
    except Exception as exc:
        if _missing(exc):
            raise FileNotFoundError(f"{url}: no such object") from None
        raise OSError(f"{url}: HEAD failed ({_code(exc)})") from exc


def head(url: str) -> tuple[int, str]:
    """Return ``(size, etag)`` of the object ``url`` (errors: :func:`head_object`)."""
    response = head_object(url)
    return int(response["ContentLength"]), str(response.get("ETag", ""))


def put_bytes(url: str, data: bytes, *, only_new: bool = False, if_match: str | None = None) -> str:
    """PUT ``data`` as the whole object ``url`` (atomic: readers see the old or the new object).

    Args:
        url: Destination.
        data: The object's bytes.
        only_new: Fail if the object exists (a conditional PUT, ``If-None-Match: *``).
        if_match: Replace only the object version of this ETag (``If-Match``).

    Returns:
        The ETag of the object written.

    Raises:
        ValueError: Both ``only_new`` and ``if_match``.
        FileExistsError: ``only_new`` and the object exists.
        VersionChangedError: ``if_match`` and the object is another version, or gone.
        OSError: The PUT failed.
    """
    if only_new and if_match:
        raise ValueError(f"{url}: a PUT is only_new or if_match={if_match!r}, not both")
    bucket, key = split_url(url)
    extra = {"IfNoneMatch": "*"} if only_new else {"IfMatch": if_match} if if_match else {}
    try:
        return str(client().put_object(Bucket=bucket, Key=key, Body=data, **extra).get("ETag", ""))
    except Exception as exc:
        if only_new and _failed_precondition(exc):
            raise FileExistsError(f"{url}: exists") from None
        if if_match and (_lost_if_match(exc) or _missing(exc)):
            raise VersionChangedError(f"{url}: no longer the version {if_match}") from None
        raise OSError(f"{url}: PUT failed ({_code(exc)})") from exc


def delete(url: str, *, if_match: str | None = None) -> None:
    """Delete the object ``url`` (no error if it does not exist).

    Args:
        url: The object.
        if_match: Delete only the object version of this ETag (``If-Match``).

    Raises:
        VersionChangedError: ``if_match`` and the object is another version.
        OSError: The DELETE failed.
    """
    bucket, key = split_url(url)
    extra = {"IfMatch": if_match} if if_match else {}
    try:
        client().delete_object(Bucket=bucket, Key=key, **extra)
    except Exception as exc:
        if if_match and _missing(exc):
            return
        if if_match and _lost_if_match(exc):
            raise VersionChangedError(f"{url}: no longer the version {if_match}") from None
        raise OSError(f"{url}: DELETE failed ({_code(exc)})") from exc


def _objects(prefix_url: str) -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(url, object, page)`` of every object under ``prefix_url`` (one paginated LIST).

    Raises:
        OSError: The listing failed.
    """
    bucket, prefix = split_url(prefix_url)
    prefix = f"{prefix}/" if prefix else ""
    try:
        pages = client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", ()):
                yield f"{SCHEME}{bucket}/{obj['Key']}", obj, page
    except Exception as exc:
        raise OSError(f"{prefix_url}: LIST failed ({_code(exc)})") from exc


def list_ages(prefix_url: str) -> dict[str, float]:
    """Return ``{url: seconds since last written}`` under ``prefix_url``, by the server's clock.

    Raises:
        OSError: The listing failed.
    """
    ages = {url: _age(page, obj.get("LastModified")) for url, obj, page in _objects(prefix_url)}
    return {url: 0.0 if age is None else age for url, age in ages.items()}


def list_sizes(prefix_url: str) -> dict[str, int]:
    """Return ``{url: size}`` of every object under ``prefix_url`` (a folder-like prefix).

    Raises:
        OSError: The listing failed.
    """
    return {url: int(obj["Size"]) for url, obj, _ in _objects(prefix_url)}


@dataclass(frozen=True)
class _Stat:
    st_size: int


class ObjectPath(PosixPath):
    """An ``s3://bucket/key`` as a :class:`~pathlib.Path` whose reads go to the object store.

    Held as the absolute path ``/bucket/key``; ``str()`` and ``os.fspath()`` give the URL. Only
    ``read_bytes``, ``read_text``, ``exists``, ``is_file`` and ``stat`` (``st_size``) are
    served by the store; other filesystem methods are not meaningful on it.
    """

    def __str__(self) -> str:
        return SCHEME + super().__str__().lstrip("/")

    def __fspath__(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def read_bytes(self) -> bytes:
        """GET the whole object."""
        return get_range(str(self)).data

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        """GET the whole object as text (UTF-8 by default)."""
        return self.read_bytes().decode(encoding or "utf-8", errors or "strict")

    def stat(self, *, follow_symlinks: bool = True) -> Any:
        """HEAD the object: an object with ``st_size`` (FileNotFoundError if it is missing)."""
        return _Stat(head(str(self))[0])

    def exists(self, *, follow_symlinks: bool = True) -> bool:
        """Whether the object exists."""
        try:
            head(str(self))
        except FileNotFoundError:
            return False
        return True

    def is_file(self) -> bool:
        """Whether the object exists (an object store has no folders)."""
        return self.exists()


def store_path(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path`: an :class:`ObjectPath` for ``s3://`` URLs."""
    if isinstance(path, Path):
        return path
    text = os.fspath(path)
    if text.startswith(SCHEME):
        bucket, key = split_url(text)
        return ObjectPath("/" + bucket + ("/" + key if key else ""))
    return Path(text)

"""The object-store byte store: S3, GCS and Azure through obstore, one store per bucket.

Configuration is each client's usual environment and nothing else: for S3 the ``AWS_*``
variables (``AWS_ENDPOINT_URL`` for an S3-compatible server such as MinIO, Ceph or moto;
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``; ``AWS_REGION`` or
``AWS_DEFAULT_REGION``; web identity and the instance metadata service), ``GOOGLE_*`` for GCS,
``AZURE_*`` for Azure (obstore reads them); with ``AWS_PROFILE`` set and boto3 installed, the
AWS SDK's profiles too (boto3's credential chain). An ``AWS_ENDPOINT_URL`` of plain ``http://``
is allowed as given (as the AWS SDK allows it). Errors name the object and the kind of failure,
never a credential.

Every object is PUT whole (atomic: readers see no object or the whole new one); conditional
PUTs are obstore's (``If-None-Match: *`` and ``If-Match``). Three things obstore lacks go out on
URLs it signs (:mod:`precompute.storage.signed`): a DELETE conditional on a version, a read
dated by the server's clock, and the readers' hot path, a ranged GET received straight into the
caller's buffers (:meth:`ObjectStore.read_into`). :attr:`ObjectStore.requests` and
:attr:`ObjectStore.bytes_read` count this process's requests and bytes fetched (the benchmarks
report them).
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, cast

from precompute.errors import StoreError
from precompute.storage import signed
from precompute.storage.base import Blob, ByteStore, Data, Meta, VersionChangedError

__all__ = ["SCHEMES", "ObjectStore"]

SCHEMES = ("s3", "gs", "az", "abfs", "abfss")  # the URL schemes an ObjectStore serves
MULTIPART_BYTES = 64 << 20  # a PUT of more than this goes up in parts (several in flight)
_lock = threading.Lock()
_stores: dict[tuple[int, str], ObjectStore] = {}  # (pid, scheme://bucket) -> store
_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>|\b(\d{3}) [A-Z][A-Za-z ]+\b")


def _client_options(scheme: str) -> dict[str, Any]:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    plain = scheme == "s3" and bool(endpoint) and str(endpoint).startswith("http://")
    return {"allow_http": True} if plain else {}


def _credentials(scheme: str) -> dict[str, Any]:
    """A named AWS profile (``AWS_PROFILE``): boto3's credential chain, where boto3 is installed.

    obstore reads the ``AWS_*`` variables, web identity and the instance metadata service, not
    the profiles of ``~/.aws/config``; boto3 does, and obstore takes its credentials.
    """
    if scheme != "s3" or not os.environ.get("AWS_PROFILE") or not importlib.util.find_spec("boto3"):
        return {}
    from obstore.auth.boto3 import Boto3CredentialProvider

    return {"credential_provider": Boto3CredentialProvider()}


def _open(url: str) -> Any:
    """The obstore store of ``url`` (a bucket, or a prefix in one), from the environment."""
    from obstore.store import from_url

    scheme = url.split("://", 1)[0]
    try:  # cast: from_url's overloads type each scheme's options apart
        return cast(Any, from_url)(
            url,
            client_options=_client_options(scheme),
            retry_config={"max_retries": 5},
            **_credentials(scheme),
        )
    except Exception as exc:  # obstore names a bad URL or configuration key
        raise StoreError(f"{url}: cannot open the object store ({_reason(exc)})") from exc


_OS_MESSAGE = re.compile(r'message: "([^"]{1,120})"')  # the OS's reason, deep in obstore's text
_HOST = re.compile(r"\bhttps?://[^/\s?#]+")  # scheme and host only: no path, no query (a SAS)
_TRIED = re.compile(r"\bin ([0-9.]+)s, after (\d+) retries")


def _reason(exc: BaseException) -> str:
    """A failure for a message: its type, the service's code, the cause, host and retries.

    The cause (connection refused, timed out) and the retries where obstore says them. Only the
    scheme and host of a URL are kept: a path could be long, and a query could hold a
    shared-access signature.
    """
    text = str(exc)
    found = _CODE.search(text)
    code = (found.group(1) or found.group(2)) if found else None
    cause = _OS_MESSAGE.search(text)
    why = cause.group(1) if cause else None
    if why is None and re.search(r"timed? ?out|TimedOut|Timeout", text):
        why = "timed out"
    if why is None and not code and " - " in text.split("\n", 1)[0]:
        why = text.split("\n", 1)[0].rsplit(" - ", 1)[1].strip()[:120]
    host, tried = _HOST.search(text), _TRIED.search(text)
    said = ", ".join(
        part
        for part in (
            why.lower() if why else None,
            host.group(0) if host else None,
            f"{tried.group(2)} retries in {float(tried.group(1)):.0f} s" if tried else None,
        )
        if part
    )
    return f"{type(exc).__name__}{f': {code}' if code else ''}{f': {said}' if said else ''}"


class ObjectStore(ByteStore):
    """One bucket (or container) of an object store; a key is an object's name in it.

    Use :meth:`for_root`: one store per process and bucket, shared by its threads (a forked
    child opens its own).

    Args:
        root: ``scheme://bucket``.
    """

    remote = True

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self._store = _open(self.root)
        self._count_lock = threading.Lock()
        self.requests = self.bytes_read = 0
        self._unsigned = False  # signed reads declined (no signing, a proxy): obstore reads
        self._suffixes = True  # the server reads "the last n bytes" (Azure Blob does not)

    @classmethod
    def for_root(cls, root: str) -> ObjectStore:
        """This process's store of ``scheme://bucket``."""
        with _lock:
            key = (os.getpid(), root.rstrip("/"))
            store = _stores.get(key)
            if store is None:
                store = _stores[key] = cls(root)
            return store

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectStore.for_root, (self.root,))

    def __repr__(self) -> str:
        return f"ObjectStore({self.root!r})"

    def _count(self, nbytes: int) -> None:
        with self._count_lock:
            self.requests += 1
            self.bytes_read += nbytes

    def url(self, key: str) -> str:
        """``scheme://bucket/key``."""
        return f"{self.root}/{key}" if key else self.root

    def key_of(self, url: str) -> str:
        """The object name in ``scheme://bucket/name``."""
        if not url.startswith(self.root):
            raise StoreError(f"{url}: not an object of {self.root}")
        return url[len(self.root) :].lstrip("/")

    def join(self, key: str, name: str) -> str:
        """``key/name``."""
        return f"{key.rstrip('/')}/{name}" if key else name

    def get(
        self,
        key: str,
        start: int | None = None,
        length: int | None = None,
        *,
        if_version: str | None = None,
    ) -> Blob:
        """One GET (ranged if asked; ``If-Match`` with ``if_version``)."""
        import obstore

        options: dict[str, Any] = {"if_match": if_version} if if_version else {}
        if length is not None:
            if length <= 0 or (start is None and not self._suffixes):
                found = self.head(key)
                if length <= 0:
                    return Blob(b"", found.size, found.version)
                start, if_version = max(0, found.size - length), if_version or found.version
                return self.get(key, start, found.size - start, if_version=if_version)
            options["range"] = {"suffix": length} if start is None else (start, start + length)
        elif start:
            options["range"] = {"offset": start}
        try:
            got = obstore.get(self._store, key, options=options)  # type: ignore[arg-type]
            data = got.bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.url(key)}: no such object") from None
        except Exception as exc:
            if type(exc).__name__ == "NotSupportedError" and start is None and length:
                self._suffixes = False  # Azure Blob has no suffix range: HEAD, then a range
                return self.get(key, start, length, if_version=if_version)
            if if_version and type(exc).__name__ == "PreconditionError":
                raise OSError(
                    f"{self.url(key)}: the object was replaced while the store was read"
                ) from exc
            raise OSError(f"{self.url(key)}: GET failed ({_reason(exc)})") from exc
        self._count(len(data))
        etag, size = _tag(got.meta["e_tag"]), int(got.meta["size"])
        return Blob(data, size, etag, stamp=(zlib.crc32(etag.encode()), size, 0))

    def read_into(
        self, key: str, buffers: Any, offset: int, *, if_version: str | None = None
    ) -> int:
        """One ranged GET received straight into ``buffers`` (``If-Match`` ``if_version``).

        The version answered is compared too (a server may ignore ``If-Match``). Where the
        credentials cannot sign a URL, obstore's GET and a copy do it.
        """
        if self._unsigned:
            return super().read_into(key, buffers, offset, if_version=if_version)
        try:
            answer = signed.read_into(self._store, key, buffers, offset, if_version)
        except signed.Declined:
            self._unsigned = True
            return super().read_into(key, buffers, offset, if_version=if_version)
        except OSError as exc:  # signed.read_into's own message says "GET failed (...)"
            raise OSError(f"{self.url(key)}: {exc}") from exc
        self._count(answer.got)
        replaced = OSError(f"{self.url(key)}: the object was replaced while the store was read")
        if answer.status == 404:
            raise FileNotFoundError(f"{self.url(key)}: no such object")
        if answer.status == 412:
            raise replaced
        if answer.status == 416:  # the range starts past the end: nothing there
            return 0
        if answer.status != 206:
            raise OSError(f"{self.url(key)}: GET failed (HTTP {answer.status})")
        if if_version and answer.etag and answer.etag != if_version:
            raise replaced
        return answer.got

    def head(self, key: str) -> Meta:
        """One HEAD."""
        import obstore

        try:
            found = obstore.head(self._store, key)
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.url(key)}: no such object") from None
        except Exception as exc:
            raise OSError(f"{self.url(key)}: HEAD failed ({_reason(exc)})") from exc
        self._count(0)
        return Meta(int(found["size"]), _tag(found["e_tag"]), found["last_modified"])

    def _put(self, key: str, data: Data, mode: Any) -> str:
        import obstore

        parts = [data] if isinstance(data, (bytes, bytearray, memoryview)) else list(data)
        total = sum(memoryview(p).nbytes for p in parts)
        whole: Any = parts[0] if len(parts) == 1 else parts
        multipart = mode == "overwrite" and total > MULTIPART_BYTES
        result = obstore.put(self._store, key, whole, mode=mode, use_multipart=multipart)
        self._count(0)
        return _tag(result["e_tag"])

    def put(self, key: str, data: Data) -> str:
        """One PUT of the whole object (in parts beyond ``MULTIPART_BYTES``)."""
        try:
            return self._put(key, data, "overwrite")
        except Exception as exc:
            raise OSError(f"{self.url(key)}: PUT failed ({_reason(exc)})") from exc

    def put_if_absent(self, key: str, data: Data) -> str:
        """A PUT with ``If-None-Match: *``."""
        try:
            return self._put(key, data, "create")
        except Exception as exc:
            if type(exc).__name__ in ("AlreadyExistsError", "PreconditionError"):
                raise FileExistsError(f"{self.url(key)}: exists") from None
            raise OSError(f"{self.url(key)}: PUT failed ({_reason(exc)})") from exc

    def put_if_match(self, key: str, data: Data, version: str) -> str:
        """A PUT with ``If-Match: version``."""
        try:
            return self._put(key, data, {"e_tag": version})
        except Exception as exc:
            if _lost(exc):
                raise VersionChangedError(
                    f"{self.url(key)}: no longer the version {version}"
                ) from None
            raise OSError(f"{self.url(key)}: PUT failed ({_reason(exc)})") from exc

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """One DELETE (with ``If-Match``: a signed request, :mod:`precompute.storage.signed`)."""
        import obstore

        if if_match:
            self._delete_if_match(key, if_match)
            return
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise OSError(f"{self.url(key)}: DELETE failed ({_reason(exc)})") from exc
        self._count(0)

    def _delete_if_match(self, key: str, version: str) -> None:
        try:
            answer = signed.send(self._store, "DELETE", key, {"If-Match": version})
        except OSError as exc:
            raise OSError(f"{self.url(key)}: {exc}") from exc
        self._count(0)
        # 409, 412: another version, or a conflicting write under way, unless the object is
        # gone (Azure answers If-Match on a missing blob with 412); 404: gone already
        lost = answer.status in (409, 412)
        if lost and self._exists(key):
            raise VersionChangedError(f"{self.url(key)}: no longer the version {version}")
        if answer.status >= 300 and not lost and answer.status != 404:
            raise OSError(f"{self.url(key)}: DELETE failed (HTTP {answer.status})")

    def _exists(self, key: str) -> bool:
        try:
            self.head(key)
        except FileNotFoundError:
            return False
        return True

    def _metas(self, prefix: str) -> Iterator[tuple[str, Any]]:
        import obstore

        try:
            for batch in obstore.list(self._store, prefix.strip("/") or None):
                self._count(0)
                for meta in batch:
                    yield str(meta["path"]), meta
        except Exception as exc:
            raise OSError(f"{self.url(prefix)}: LIST failed ({_reason(exc)})") from exc

    def list_dir(self, prefix: str) -> list[str]:
        """The object names and folder-like prefixes directly under ``prefix/`` (one LIST)."""
        import obstore

        base = prefix.strip("/")
        try:
            found = obstore.list_with_delimiter(self._store, base or None)
        except Exception as exc:
            raise OSError(f"{self.url(prefix)}: LIST failed ({_reason(exc)})") from exc
        self._count(0)
        paths = [*found["common_prefixes"], *(m["path"] for m in found["objects"])]
        return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in paths)

    def list(self, prefix: str) -> dict[str, Meta]:
        """Every object under ``prefix/`` (one paginated LIST)."""
        return {
            key: Meta(int(m["size"]), _tag(m["e_tag"]), m["last_modified"])
            for key, m in self._metas(prefix)
        }

    def get_dated(self, key: str) -> Blob:
        """One signed GET: its ``Date`` and the object's ``Last-Modified`` date the version."""
        try:
            answer = signed.send(self._store, "GET", key)
        except OSError as exc:
            raise OSError(f"{self.url(key)}: {exc}") from exc
        self._count(len(answer.body))
        if answer.status == 404:
            raise FileNotFoundError(f"{self.url(key)}: no such object")
        if answer.status >= 300:
            raise OSError(f"{self.url(key)}: GET failed (HTTP {answer.status})")
        age = signed.age_of(answer.header("Date"), answer.header("Last-Modified"))
        etag = _tag(answer.header("ETag"))
        return Blob(answer.body, len(answer.body), etag, age)

    def ages(self, prefix: str) -> dict[str, float]:
        """One LIST and one signed HEAD (its ``Date``: the server's clock now)."""
        metas = self.list(prefix)
        if not metas:
            return {}
        try:
            date = signed.send(self._store, "HEAD", prefix.strip("/") or "_").header("Date")
        except OSError as exc:
            raise OSError(f"{self.url(prefix)}: {exc}") from exc
        self._count(0)
        ages = {k: signed.age_of(date, m.modified) for k, m in metas.items()}
        return {k: 0.0 if a is None else a for k, a in ages.items()}

    def zarr(self, key: str, *, read_only: bool = True) -> Any:
        """zarr-python's ``ObjectStore`` on obstore, rooted at ``key``."""
        import zarr.storage

        return zarr.storage.ObjectStore(_open(self.url(key)), read_only=read_only)

    def exclusive(self, key: str, owner: str) -> AbstractContextManager[None]:
        """The build lock as an object (:func:`precompute.storage.objlock.object_lock`)."""
        from precompute.storage.objlock import object_lock

        return object_lock(self, key, owner)


def _tag(etag: str | None) -> str:
    """An ETag as a version, always quoted as HTTP writes it (Azure's LIST gives it bare)."""
    if not etag:
        return ""
    return etag if etag.startswith(('"', "W/")) else f'"{etag}"'


def _lost(exc: BaseException) -> bool:
    """A conditional write lost to another (409: a conflicting write was under way)."""
    name, text = type(exc).__name__, str(exc)
    return (
        name in ("PreconditionError", "NotFoundError")
        or isinstance(exc, FileNotFoundError)
        or "409" in text
        or "ConditionalRequestConflict" in text
    )

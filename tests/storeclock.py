"""The object store's clock, as this process's S3 client sees it, moved forward by a test.

Claims, leases and takeover markers are judged by the object store's clock: an object's age is
the response's ``Date`` minus its ``Last-Modified``, both whole seconds. A test that waits for
an object to age with ``time.sleep`` has a margin of a second or two against that rounding and
against a loaded machine. :class:`StoreClock` instead moves the store's clock: after
``advance(60)`` every response's ``Date`` reads 60 s later, and every object reads the
``Last-Modified`` the store's clock showed when this process wrote it. So every object written
before reads 60 s older at once, and objects written afterwards are as fresh as ever.

It changes what botocore hands the caller (``after-call`` event hooks on the real client of
:func:`precompute.storage.objstore.client`), never what the real server stores or answers on the
wire.
Objects written by other processes read as written before the first ``advance``.
"""

from __future__ import annotations

import email.utils
from datetime import timedelta
from typing import Any

from precompute.storage import objstore

__all__ = ["StoreClock"]

_ID = "nostall-test-store-clock"
_READS = ("GetObject", "HeadObject", "ListObjectsV2")


class StoreClock:
    """Install on this process's S3 client; :meth:`close` takes the hooks off again."""

    def __init__(self) -> None:
        self.offset = 0
        self._written: dict[tuple[str, str], int] = {}  # (bucket, key) -> offset then
        self._events = objstore.client().meta.events
        self._hooks = [
            ("before-parameter-build.s3", self._remember),
            ("after-call.s3.PutObject", self._on_put),
            ("after-call.s3.DeleteObject", self._on_delete),
            *((f"after-call.s3.{op}", self._on_read) for op in _READS),
        ]
        for event, hook in self._hooks:
            self._events.register(event, hook, unique_id=f"{_ID}-{event}")

    def advance(self, seconds: int) -> None:
        """Move the store's clock ``seconds`` forward (whole seconds, as HTTP dates are)."""
        self.offset += int(seconds)

    def close(self) -> None:
        for event, _ in self._hooks:
            self._events.unregister(event, unique_id=f"{_ID}-{event}")

    @staticmethod
    def _remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_ID] = (params.get("Bucket", ""), params.get("Key", ""))

    def _ok(self, http_response: Any) -> bool:
        return http_response is not None and 200 <= http_response.status_code < 300

    def _on_put(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if self._ok(http_response):
            self._written[context[_ID]] = self.offset

    def _on_delete(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if self._ok(http_response):
            self._written.pop(context[_ID], None)

    def _on_read(self, http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
        if not self._ok(http_response) or not isinstance(parsed, dict):
            return
        headers = parsed.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        if headers.get("date"):
            now = email.utils.parsedate_to_datetime(headers["date"])
            headers["date"] = email.utils.format_datetime(now + timedelta(seconds=self.offset))
        bucket, key = context[_ID]
        if "LastModified" in parsed:
            parsed["LastModified"] += self._written_at(bucket, key)
        for obj in parsed.get("Contents", ()):
            obj["LastModified"] += self._written_at(bucket, obj["Key"])

    def _written_at(self, bucket: str, key: str) -> timedelta:
        return timedelta(seconds=self._written.get((bucket, key), 0))

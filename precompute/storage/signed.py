"""The requests obstore does not make, sent on a URL it signs: DELETE If-Match, and dated reads.

obstore (the Rust ``object_store`` crate) has no precondition on DELETE, and returns an object's
own metadata but no other response header. Coordination needs both: a holder deletes only its
own version of a claim (``If-Match``), and a claim's age is judged by the object store's clock
(the response's ``Date`` minus the object's ``Last-Modified``), never by a caller's. For these
few requests :func:`obstore.sign` signs a URL with the store's own configured credentials and
the standard library sends it, with ``If-Match`` added where wanted. Nothing here reads or logs
a credential, and a signed URL is never put in a message.

Signing needs credentials that can sign: S3 keys or a session (any S3-compatible server), a
GCS service-account key, an Azure account key or user delegation.
"""

from __future__ import annotations

import email.message
import email.utils
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["Response", "age_of", "send"]

_TRIES = 4  # attempts of a request that failed to connect or got a 5xx
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Response:
    """The status, headers and body of one signed request."""

    status: int
    headers: email.message.Message
    body: bytes

    def header(self, name: str) -> str | None:
        """One header's value, or None."""
        value = self.headers.get(name)
        return None if value is None else str(value)


def send(store: Any, method: str, key: str, headers: dict[str, str] | None = None) -> Response:
    """Send ``method`` on ``key`` of the obstore ``store`` by a URL it signs; any status returns.

    Connection failures and 5xx answers are retried (with backoff) a few times.

    Raises:
        OSError: No answer came (the message names the method, never the signed URL).
    """
    import obstore

    failure: Exception | None = None
    for attempt in range(_TRIES):
        if attempt:
            time.sleep(0.1 * 2**attempt)
        url = obstore.sign(store, method, key, timedelta(minutes=5))  # type: ignore[call-overload]
        request = urllib.request.Request(url, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
                return Response(answer.status, answer.headers, answer.read())
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return Response(exc.code, exc.headers, exc.read())
            failure = exc
        except (OSError, ValueError) as exc:  # refused, reset, timed out
            failure = exc
    raise OSError(f"{method} failed ({type(failure).__name__}: {_reason(failure)})")


def _reason(exc: Exception | None) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc)


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

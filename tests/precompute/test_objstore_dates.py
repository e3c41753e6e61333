"""The object store's clock: an odd ``Date`` header never fails a read (its age is unknown)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from precompute.storage.signed import age_of

MODIFIED = datetime(1994, 11, 15, 8, 12, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "date, age",
    [
        ("Tue, 15 Nov 1994 08:12:31 GMT", 30.0),
        ("Tue, 15 Nov 1994 08:12:31 -0000", 30.0),  # no zone named: HTTP dates are GMT
        ("Tue, 15 Nov 1994 08:12:31", 30.0),
        ("not a date", None),
        ("", None),
    ],
)
def test_the_age_of_an_object_by_the_servers_date(date: str, age: float | None) -> None:
    assert age_of(date, MODIFIED) == age
    assert age_of(date, None) is None
    naive = MODIFIED.replace(tzinfo=None)  # a Last-Modified parsed without a zone
    assert age_of(date, naive) == age
    assert age_of(date, "Tue, 15 Nov 1994 08:12:01 GMT") == age  # a Last-Modified header

"""The object store's clock: an odd ``Date`` header never fails a read (its age is unknown)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from precompute.storage.objstore import _age

MODIFIED = datetime(1994, 11, 15, 8, 12, 1, tzinfo=timezone.utc)


def _response(date: str) -> dict[str, object]:
    return {"ResponseMetadata": {"HTTPHeaders": {"date": date}}}


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
    assert _age(_response(date), MODIFIED) == age
    assert _age(_response(date), None) is None
    naive = MODIFIED.replace(tzinfo=None)  # a Last-Modified parsed without a zone
    assert _age(_response(date), naive) == age

"""Fenced claims and leases of a cache in object storage, against real servers on 127.0.0.1.

Each race is made to happen at one exact point: a hook on the test server's wire
(:mod:`tests.s3wire`) runs the other process's move (through a second client of its own) just
before the server serves this process's request, between its read and its write. Those races
hook moto's wire, so they run on S3 only (``root``); the scenarios that need no hook run on
every object server (``any_root``: S3 on moto, Azure Blob on Azurite).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest

from precompute.storage.location import location
from service import Cache
from service.cache.objcatalog import ObjectLayout
from service.coord.objclaim import Claim, try_claim
from service.coord.objects import ObjectCoordinator
from service.coord.objholder import inspect_holder
from service.coord.objlease import ObjectLease, live_leases
from service.errors import ServiceError
from tests.objectservers import bucket_and_key, urls_under
from tests.s3wire import WIRE, Refused, WireRequest
from tests.storeclock import StoreClock

OTHER = {"host": "another-host", "pid": 1, "token": "other", "beat": 0}  # alive, for all we know


def dead_here() -> bytes:
    """A holder document of a process of this host that has exited."""
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return json.dumps({"host": socket.gethostname(), "pid": dead.pid, "token": "x"}).encode()


@pytest.fixture
def other(s3_server: str) -> Any:
    """The S3 client of another process (its own client, boto3)."""
    return boto3.session.Session().client("s3")


@contextmanager
def just_before(operation: str, url: str, move: Callable[[], None]) -> Iterator[list[bool]]:
    """Run ``move`` once, just before the server serves the next ``operation`` on ``url``.

    The move's own requests pass the hook too, and are left alone (the move is under way).
    """
    fired: list[bool] = []  # set once the move is done
    busy: list[bool] = []
    key = location(url).key

    def hook(req: WireRequest) -> None:
        if req.op == operation and req.key == key and not busy:
            busy.append(True)
            move()
            fired.append(True)

    with WIRE.hook(hook):
        yield fired


def put_by(client: Any, url: str, doc: dict[str, Any]) -> None:
    bucket, key = bucket_and_key(url)
    client.put_object(Bucket=bucket, Key=key, Body=json.dumps(doc).encode())


def doc_at(url: str) -> Any:
    return json.loads(location(url).read_bytes())


def test_a_takeover_never_overwrites_a_fresh_claim_made_after_its_look(
    root: str, other: Any
) -> None:
    url = f"{root}/claims/k.json"
    location(url).write_bytes(dead_here())

    def released_and_claimed_afresh() -> None:  # between the taker's GET and its PUT
        bucket, key = bucket_and_key(url)
        other.delete_object(Bucket=bucket, Key=key)
        put_by(other, url, OTHER)

    with just_before("PutObject", url, released_and_claimed_afresh) as fired:
        assert try_claim(location(url)) is None
    assert fired and doc_at(url) == OTHER  # the live claim stands: one builder
    assert urls_under(f"{url}.takeover") == []  # If-Match held: its marker is gone


def test_a_stalled_holder_stops_beating_and_never_overwrites_its_taker(
    root: str, other: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"{root}/claims/k.json"
    claim = try_claim(location(url), beat_s=0.2)
    assert isinstance(claim, Claim)
    taken = lambda: put_by(other, url, OTHER)  # noqa: E731
    with (
        just_before("PutObject", url, taken) as fired,
        caplog.at_level(logging.WARNING, logger="service.coord.objclaim"),
    ):
        beats = claim._beats._thread  # the next beat checks the claim, then it is taken over
        beats.join(timeout=30)  # and the beats end for good: none can overwrite the taker's
        assert not beats.is_alive()
    assert fired and doc_at(url) == OTHER
    assert "the claim was taken over; no longer beating" in caplog.text
    claim.release()
    assert doc_at(url) == OTHER  # and its release leaves the new holder's claim


def test_a_release_never_deletes_the_claim_of_its_taker(root: str, other: Any) -> None:
    url = f"{root}/claims/k.json"
    claim = try_claim(location(url), beat_s=60)
    assert isinstance(claim, Claim)
    with just_before("DeleteObject", url, lambda: put_by(other, url, OTHER)):
        claim.release()  # checked its claim, then taken over before the DELETE went out
    assert doc_at(url) == OTHER


def test_a_retried_beat_whose_first_try_landed_is_adopted(root: str, other: Any) -> None:
    url = f"{root}/claims/k.json"
    claim = try_claim(location(url), beat_s=0.2)
    assert isinstance(claim, Claim)
    mine = {**json.loads(location(url).read_bytes()), "beat": 99}
    with just_before("PutObject", url, lambda: put_by(other, url, mine)) as fired:
        deadline = time.monotonic() + 10  # the beat's If-Match fails on "its own" write ...
        while not (fired and doc_at(url)["beat"] != 99) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert doc_at(url)["token"] == mine["token"] and doc_at(url)["beat"] != 99  # ... adopted
    claim.release()
    assert urls_under(f"{root}/claims") == []


@pytest.mark.parametrize("kind", ["claim", "lease"])
def test_a_release_deletes_its_own_version_written_by_a_beat_it_thought_failed(
    any_root: str, kind: str
) -> None:
    """A beat whose PUT landed but whose call failed leaves the holder with the ETag before
    it; the release still deletes the object (it carries the holder's token), leaving no claim
    nobody holds (it would block the key for as long as this process lives) and no lease."""
    root, layout = any_root, ObjectLayout(any_root)
    held: Claim | ObjectLease | None
    if kind == "claim":
        url = f"{root}/claims/k.json"
        held = try_claim(location(url), beat_s=60)
    else:
        held = ObjectLease("k", layout.store("k"), layout.leases("k"), beat_s=60)
        (url,) = urls_under(str(layout.leases("k")))
    assert held is not None
    its_beat = {**json.loads(location(url).read_bytes()), "beat": 1}
    location(url).write_bytes(json.dumps(its_beat).encode())  # landed, the call failed
    held.release()
    assert urls_under(f"{root}/claims") == []
    assert urls_under(str(layout.leases("k"))) == []


def test_a_marker_left_by_a_dead_taker_does_not_block_the_takeover(any_root: str) -> None:
    root = any_root
    url = f"{root}/claims/gc.json"
    etag = location(url).write_bytes(dead_here())  # a claim whose holder died on this host
    marker = f"{url}.takeover/{etag.strip(chr(34))}"
    location(marker).write_bytes(dead_here())  # its taker died between its two PUTs
    assert try_claim(location(url)) is None  # the marker is in the way once, and removed
    claim = try_claim(location(url))
    assert isinstance(claim, Claim)
    # the dead taker's marker was replaced by this taker's, kept for gc (a store may ignore
    # If-Match); the claim itself is released
    assert doc_at(marker)["pid"] == os.getpid()
    claim.release()
    assert url not in urls_under(f"{root}/claims")


def test_a_taker_whose_put_fails_removes_its_marker(root: str) -> None:
    url = f"{root}/claims/k.json"
    location(url).write_bytes(dead_here())
    key = location(url).key

    def fail(req: WireRequest) -> None:  # the server refuses the takeover's If-Match PUT
        if req.op == "PutObject" and req.key == key and "if-match" in req.headers:
            raise Refused(403, "AccessDenied")

    with WIRE.hook(fail), WIRE.count() as seen:
        try:
            got = try_claim(location(url))
        except ServiceError as exc:
            assert "PUT failed" in str(exc)
        else:  # seen twice in full runs, never alone: say what happened instead
            holder = inspect_holder(location(url))
            pytest.fail(f"try_claim gave {got!r}; holder {holder}; requests {seen}")
    assert urls_under(f"{root}/claims") == [url]  # no marker left
    claim = try_claim(location(url))
    assert isinstance(claim, Claim)
    claim.release()


def test_a_lease_collected_as_dead_is_never_put_back(
    any_root: str, caplog: pytest.LogCaptureFixture
) -> None:
    layout = ObjectLayout(any_root)
    with caplog.at_level(logging.WARNING, logger="service.coord.objlease"):
        lease = ObjectLease("k", layout.store("k"), layout.leases("k"), beat_s=0.2)
        (url,) = urls_under(str(layout.leases("k")))
        location(url).delete()  # a collection judged its reader dead (stalled past stale_s)
        beats = lease._beats._thread
        beats.join(timeout=30)  # the next beat finds it gone; then the beats end for good
        assert not beats.is_alive()
    assert urls_under(str(layout.leases("k"))) == []
    assert "the lease was collected as dead" in caplog.text
    assert not lease.held  # its reader can see it lost the lease
    lease.release()


def test_a_dead_lease_re_put_before_its_deletion_is_live(root: str, other: Any) -> None:
    layout = ObjectLayout(root)
    url = f"{layout.leases('k')}/r.json"
    location(url).write_bytes(dead_here())
    with just_before("DeleteObject", url, lambda: put_by(other, url, OTHER)) as fired:
        live = live_leases(layout.leases("k"))
    assert [str(w) for w in live] == [url]  # its reader resumed: judged dead, yet live
    assert fired and doc_at(url) == OTHER


def test_gc_removes_takeover_markers_older_than_stale_s(root: str, store_clock: StoreClock) -> None:
    cache = Cache(root)
    assert isinstance(cache.coord, ObjectCoordinator)
    cache.claim_stale_s = 30.0
    old, young = (f"{root}/claims/{k}.json.takeover/e" for k in ("a", "b"))
    location(old).write_bytes(b"{}")
    store_clock.advance(60)  # over 30 s old by the store's clock, written just now otherwise
    location(young).write_bytes(b"{}")
    assert cache.gc().cleaned == ("claims/a.json.takeover/e",)
    assert urls_under(f"{root}/claims") == [young]

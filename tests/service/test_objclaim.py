"""Claims of an ``s3://`` cache against moto's real S3 server on 127.0.0.1: how a waiter polls,
and how every caller judges a holder of another host by the object store's clock.

Requests are counted by a botocore event hook (``before-parameter-build``) on the real
client, not a mock (the ``calls`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from precompute.storage.location import location
from service import Cache, ServiceError
from service.coord import objclaim
from service.coord.objclaim import Backoff, Claim, try_claim, wait_claim
from service.coord.objects import ObjectCoordinator
from tests.service.helpers import SPEC, make_source, read_log, s3_builder
from tests.storeclock import StoreClock

ELSEWHERE = {"host": "another-host", "pid": 1, "token": "t", "beat": 0}


def put_elsewhere(url: str, beat: int = 0) -> None:
    """PUT a claim or lease held by a process of another host (alive, for all we know)."""
    location(url).write_bytes(json.dumps({**ELSEWHERE, "beat": beat}).encode())


def key_of(url: str) -> str:
    return location(url).key


def test_backoff_doubles_to_its_cap_with_jitter() -> None:
    import random

    backoff = Backoff(0.05, 1.0, random.Random(0))
    delays = [backoff.delay() for _ in range(12)]
    for d, nominal in zip(delays, [0.05, 0.1, 0.2, 0.4, 0.8] + [1.0] * 7, strict=True):
        assert nominal / 2 <= d <= nominal
    assert len(set(delays)) == len(delays)  # jittered: waiters do not poll in step
    with pytest.raises(ValueError, match="0 < first <= cap: first=2, cap=1"):
        Backoff(2, 1)


class WaiterClock:
    """The waiter's clock, moved only by its own sleeps (which take no real time)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = SimpleNamespace(monotonic=lambda: self.now, time=time.time, sleep=self.sleep)
        monkeypatch.setattr(objclaim, "time", fake)


@pytest.mark.parametrize("waiter", ["build", "remove"])
def test_a_waiter_backs_off_to_about_one_poll_a_second(
    root: str,
    tmp_path: Path,
    calls: Counter[tuple[str, str]],
    waiter: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = make_source(tmp_path / "src")
    cache = Cache(root, builder=s3_builder(), lock_timeout=4.0)
    key = cache.key_for(source, SPEC)
    if waiter == "remove":
        cache.get_or_build(source, SPEC)
    claim_url = f"{root}/claims/{key}.json"
    put_elsewhere(claim_url)  # held by a live process elsewhere: the wait times out
    calls.clear()
    wait = cache.get_or_build if waiter == "build" else lambda *_: cache.remove(key)
    what = "the build of" if waiter == "build" else "the claim of"
    clock = WaiterClock()
    clock.install(monkeypatch)  # the polls happen at once; the waiter's clock says when
    started = clock.now
    with pytest.raises(ServiceError) as raised:
        wait(source, SPEC)
    assert 4.0 <= clock.now - started < 4.0 + 1e-6  # the last sleep ends at the deadline
    polls = calls["GetObject", key_of(claim_url)] - 1  # the last GET names the holder
    # 0.05 s doubling to a 1 s cap, each delay in [d/2, d]: at most 6 polls reach the cap,
    # then one per 0.5-1 s; polling every 50 ms would be about 80
    assert 4 <= polls <= 6 + 4 / 0.5 + 1
    assert calls["PutObject", key_of(claim_url)] == 0  # no conditional PUT while it is held
    assert calls["HeadObject", key_of(claim_url)] == 0  # the GET's own headers give the age
    per_poll = 2 if waiter == "build" else 1  # (HEAD entry), GET of the claim
    assert sum(calls.values()) <= per_poll * polls + 4
    assert str(raised.value) == (
        f"timed out after 4 s waiting for {what} {key} by another-host pid 1 ({claim_url})"
    )


def test_callers_judge_a_claim_of_another_host_by_the_stores_clock(
    root: str, tmp_path: Path, store_clock: StoreClock
) -> None:
    log = tmp_path / "log"
    cache = Cache(root, builder=s3_builder(log), lock_timeout=0.5)
    assert isinstance(cache.coord, ObjectCoordinator)
    cache.claim_stale_s = 30.0
    published, debris, wanted = (make_source(tmp_path / n, seed=i) for i, n in enumerate("abc"))
    k_published, k_debris, k_wanted = (cache.key_for(s, SPEC) for s in (published, debris, wanted))
    cache.get_or_build(published, SPEC)
    s3_builder()(cache.request_for(debris, SPEC))  # a store its builder never published
    for key in (k_published, k_debris, k_wanted):
        put_elsewhere(f"{root}/claims/{key}.json")
    assert cache.status(k_wanted)["status"] == "building"  # written just now: a live holder
    assert cache.gc(budget_bytes=0).skipped_leased == (k_published,)
    store_clock.advance(60)  # not re-PUT for over 30 s by the store's clock: dead, whoever looks
    assert cache.status(k_wanted)["status"] == "interrupted"
    report = cache.gc(budget_bytes=0)
    assert report.evicted == (k_published,) and report.cleaned == (f"stores/{k_debris}",)
    cache.get_or_build(wanted, SPEC)  # taken over at once, though lock_timeout < stale_s
    assert len(read_log(log)) == 2
    assert cache.status(k_wanted)["status"] == "ready"


class StillClock:
    """A waiter's clock that never moves; its sleeps take no time, and it stops a waiter that
    polls on and on (one that judged the claim by this clock would never take it over)."""

    def __init__(self, polls: int = 50) -> None:
        self.polls = polls

    def sleep(self, seconds: float) -> None:
        self.polls -= 1
        assert self.polls > 0, "the waiter polled on and never took the dead claim over"

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = SimpleNamespace(monotonic=lambda: 1000.0, time=time.time, sleep=self.sleep)
        monkeypatch.setattr(objclaim, "time", fake)


def test_a_waiter_whose_clock_runs_fast_does_not_take_a_live_claim(
    root: str, monkeypatch: pytest.MonkeyPatch, store_clock: StoreClock
) -> None:
    url = f"{root}/claims/x.json"
    put_elsewhere(url)  # never re-PUT: only the store's clock can age it
    clock = WaiterClock()
    clock.install(monkeypatch)  # 90 s pass on the waiter's clock, next to none on the store's
    with pytest.raises(ServiceError, match="timed out after 90 s waiting for a claim"):
        wait_claim(location(url), 90.0, stale_s=30.0).release()
    assert clock.now - 1000.0 >= 90.0  # three times stale_s by the waiter's clock
    assert json.loads(location(url).read_bytes())["host"] == "another-host"
    store_clock.advance(60)  # by the store's clock, though, it is dead now
    taken = try_claim(location(url), stale_s=30.0)
    assert isinstance(taken, Claim)
    taken.release()


def test_a_waiter_whose_clock_stands_still_takes_a_dead_claim_over(
    root: str, monkeypatch: pytest.MonkeyPatch, store_clock: StoreClock
) -> None:
    url = f"{root}/claims/x.json"
    put_elsewhere(url)  # never re-PUT
    store_clock.advance(60)  # not re-PUT for 60 s by the store's clock: dead
    StillClock().install(monkeypatch)  # no time passes on the waiter's clock
    got = wait_claim(location(url), 60.0, stale_s=30.0)
    assert isinstance(got, Claim)
    got.release()
    assert location(f"{url}.takeover").list() != {}  # it was a takeover, not a free claim

"""Claims of a cache in object storage: small objects instead of ``flock``.

**Claim** (one builder per key, one garbage collection at a time): a conditional PUT
(``If-None-Match: *``) of ``claims/<name>.json`` holding ``{host, pid, token, beat}``. Whoever
creates it holds the claim, re-PUTs it every ``BEAT_S`` seconds (a new ETag) while it holds it,
and deletes it on release. A claim is dead when its holder is a dead process on this host, or
(a holder on another host) when it was last written more than ``stale_s`` seconds ago by the
object store's clock (:func:`service.coord.objholder.inspect_holder`; no caller's clock matters).

**Takeover**: a dead claim of ETag ``E`` is taken over in two conditional PUTs. First the
marker ``claims/<name>.json.takeover/E`` (``If-None-Match: *``): of several processes that saw
the same dead claim, exactly one wins. Then the claim itself, ``If-Match: E``: if the claim
changed since it was read (the dead holder resumed and released it, a collection removed it, a
third process made a fresh, live claim), the PUT fails, the taker deletes its marker (the store
honours ``If-Match``, so the marker cannot matter) and waits on. The marker stays as the guard
for servers that ignore ``If-Match`` on PUT; garbage collection deletes markers older than
``stale_s`` (:meth:`service.cache.roots.ObjectRoot.clean_debris`).

**Fencing**: the holder keeps the ETag of its last write; each beat re-PUTs ``If-Match`` it and
the release deletes ``If-Match`` it (:func:`service.coord.objholder.fenced_put`), so a holder
stalled past ``stale_s`` whose claim was taken over gets a precondition failure, logs it and stops
beating, and never overwrites or deletes its taker's claim. It also reads the claim before each
beat and before its release (the guard where ``If-Match`` is ignored). The store's own objects
are not fenced: a stalled builder that carries on can still race its taker in writing them.

**Waiting** (:func:`wait_claim`, the one wait path of builds, removals and collections): poll
with a backoff from ``POLL_FIRST_S`` doubling to ``POLL_CAP_S`` (each delay drawn between half
and all of it, so waiters spread out), so a waiter makes O(log) polls while the claim is young
and one per second or so after that. Each poll reads the claim (one GET: its own headers date
the version read); the conditional PUT is tried only when the claim is gone.

Leases (readers) are objects too: :mod:`service.coord.objlease`.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from precompute.storage.location import Location
from service.cache.objcatalog import object_call
from service.coord.objholder import (
    BEAT_S,
    STALE_S,
    Beats,
    describe_holder,
    fenced_delete,
    fenced_put,
    holder_doc,
    inspect_holder,
    read_holder,
)
from service.errors import LockTimeoutError

__all__ = ["POLL_CAP_S", "POLL_FIRST_S", "Backoff", "Claim", "try_claim", "wait_claim"]

POLL_FIRST_S = 0.05  # a waiter's first delay between polls
POLL_CAP_S = 1.0  # the longest delay between polls
log = logging.getLogger("service.coord.objclaim")
T = TypeVar("T")


class Backoff:
    """Delays between polls: ``first``, doubling up to ``cap`` seconds, each drawn in [d/2, d].

    Args:
        first: The first delay.
        cap: The longest delay.
        rng: The generator of the jitter (a new one seeded by the OS if None).
    """

    def __init__(
        self, first: float = POLL_FIRST_S, cap: float = POLL_CAP_S, rng: random.Random | None = None
    ) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"backoff needs 0 < first <= cap: first={first!r}, cap={cap!r}")
        self._next, self.cap = first, cap
        self._rng = rng or random.Random()

    def delay(self) -> float:
        """Return the next delay in seconds."""
        d, self._next = self._next, min(self._next * 2, self.cap)
        return self._rng.uniform(d / 2, d)


class Claim:
    """A held claim, re-PUT every ``beat_s`` seconds; :meth:`release` deletes it (idempotent).

    Args:
        where: The claim object.
        body: The holder document this process wrote.
        etag: The ETag of that write: beats and the release are fenced on the latest one.
        beat_s: How often the claim is re-PUT.

    Attributes:
        where: The claim object.
        url: Its URL, for messages.
    """

    def __init__(self, where: Location, body: bytes, etag: str, beat_s: float = BEAT_S) -> None:
        self.where = where
        self.url = str(where)
        self._token = json.loads(body)["token"]
        self._etag = etag
        self._held = True
        self._beats = Beats(where, self._beat, beat_s)

    def _mine(self) -> bool:
        holder = (read_holder(self.where) or (None, ""))[0]
        return isinstance(holder, dict) and holder.get("token") == self._token

    def _beat(self, n: int) -> bool:
        body = holder_doc(self._token, n)  # checked first: a store may ignore If-Match
        mine = self._mine()
        etag = fenced_put("beat", self.where, body, self._token, self._etag) if mine else None
        if etag is None:
            log.warning("%s: the claim was taken over; no longer beating", self.url)
            return False
        self._etag = etag
        return True

    def still_mine(self) -> bool:
        """Whether this process holds the claim now (not released, not taken over).

        A builder asks before it publishes: one that stalled past ``stale_s`` may have lost
        the claim to another builder, whose store the late entry would then describe.
        """
        return self._held and self._mine()

    def release(self) -> None:
        """Stop beating and delete the claim object, unless another process took it over."""
        if self._held:
            self._held = False
            self._beats.stop()  # waits for a beat under way: the ETag is the last write's
            if not (self._mine() and fenced_delete("release", self.where, self._etag, self._token)):
                log.warning("%s: the claim was taken over; left to its new holder", self.url)

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def try_claim(where: Location, stale_s: float = STALE_S, beat_s: float = BEAT_S) -> Claim | None:
    """Take the claim at ``where`` without waiting (taking over a dead holder's); None if held.

    Args:
        where: The claim object.
        stale_s: A claim of another host not re-PUT for this long (by the object store's
            clock) is dead.
        beat_s: How often the returned claim is re-PUT.
    """
    me, holder = holder_doc(), inspect_holder(where, stale_s)
    if holder is not None and not holder.dead:
        return None
    if holder is None:
        try:
            etag = object_call("claim", where.store.put_if_absent, where.key, me)
        except FileExistsError:
            return None  # another process took it first
        return Claim(where, me, etag, beat_s)
    return _take_over(where, me, holder.etag, beat_s, stale_s)


def _take_over(
    where: Location, me: bytes, dead: str, beat_s: float, stale_s: float
) -> Claim | None:
    """Replace the dead claim of ETag ``dead`` with ``me``; None if another process acted first.

    A marker whose taker is dead (it died between its two PUTs: judged as a claim's holder) is
    deleted, so the next poll can take the claim over; a taker whose PUT fails deletes its
    marker.
    """
    tag = dead.strip('"') or "none"
    marker = where.parent / f"{where.name}.takeover" / tag
    try:
        object_call("takeover", marker.store.put_if_absent, marker.key, me)
    except FileExistsError:  # another process is taking this dead claim over, or died doing it
        taker = inspect_holder(marker, stale_s)  # the marker holds its taker's document
        if taker is not None and taker.dead:
            fenced_delete("takeover", marker, taker.etag)
        return None
    try:
        etag = fenced_put("takeover", where, me, json.loads(me)["token"], dead)
    except BaseException:
        object_call("takeover", marker.delete)
        raise
    if etag is None:  # the claim changed since it was read (released, a fresh claim made)
        object_call("takeover", marker.delete)  # If-Match held: no marker needed
        return None
    return Claim(where, me, etag, beat_s)


def wait_claim(
    where: Location,
    timeout: float,
    *,
    stale_s: float = STALE_S,
    beat_s: float = BEAT_S,
    what: str = "a claim",
    until: Callable[[], T | None] | None = None,
) -> Claim | T:
    """Take the claim at ``where``, polling with a :class:`Backoff` up to ``timeout`` seconds.

    Args:
        where: The claim object.
        timeout: Seconds to wait (negative: forever).
        stale_s: As for :func:`try_claim`.
        beat_s: As for :func:`try_claim`.
        what: What is waited for, for the timeout message (``the build of <key>``).
        until: Called before each poll; when it returns a value, the wait ends with it
            (e.g. the store that the claim's holder has just published).

    Returns:
        The claim, held, or the value ``until`` returned.

    Raises:
        LockTimeoutError: Still held by a live holder after ``timeout`` (the message names it).
    """
    deadline, backoff = time.monotonic() + timeout, Backoff()
    while True:
        if until is not None and (done := until()) is not None:
            return done
        if (claim := try_claim(where, stale_s, beat_s)) is not None:
            return claim
        left = deadline - time.monotonic()
        if timeout >= 0 and left <= 0:
            raise LockTimeoutError(
                f"timed out after {timeout:g} s waiting for {what} by {describe_holder(where)} "
                f"({where})"
            )
        time.sleep(backoff.delay() if timeout < 0 else min(backoff.delay(), left))

"""The object store's clock, moved forward by a test (:meth:`tests.s3wire.Wire.advance`).

Claims, leases and takeover markers are judged by the object store's clock: an object's age is
the response's ``Date`` minus its ``Last-Modified``, both whole seconds. A test that waits for
an object to age with ``time.sleep`` has a margin of a second or two against that rounding and
against a loaded machine. :class:`StoreClock` instead moves the store's clock: after
``advance(60)`` every response's ``Date`` reads 60 s later, and every object reads the
``Last-Modified`` the store's clock showed when it was written. So every object written before
reads 60 s older at once, and objects written afterwards are as fresh as ever.

It changes what the test server answers on the wire (:mod:`tests.s3wire`), for every client and
process alike, never what the server stores.
"""

from __future__ import annotations

from tests.s3wire import WIRE

__all__ = ["StoreClock"]


class StoreClock:
    """The test server's clock; :meth:`close` puts it back to the real one."""

    def advance(self, seconds: int) -> None:
        """Move the store's clock ``seconds`` forward (whole seconds, as HTTP dates are)."""
        WIRE.advance(seconds)

    def close(self) -> None:
        WIRE.reset_clock()

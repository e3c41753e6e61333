"""Injected clocks for diagnosis tests: time moves only when the loop says so."""

from __future__ import annotations

import time


class ScriptedTime:
    """A wall clock and a thread-CPU clock that advance only through :meth:`advance`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cpu_now = 0.0

    def wall(self) -> float:
        return self.now

    def cpu(self) -> float:
        return self.cpu_now

    def advance(self, wall: float, cpu: float = 0.0) -> None:
        """Let ``wall`` seconds pass, ``cpu`` of them on the CPU of the training thread."""
        self.now += wall
        self.cpu_now += cpu


class OffsetClock:
    """The real clock plus scripted seconds: real waits, scripted step times without sleeping."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset

    def step(self, seconds: float, real: float = 0.005) -> None:
        """A step of ``seconds``, of which ``real`` really pass (so helpers get time to run)."""
        time.sleep(real)
        self.offset += seconds - real

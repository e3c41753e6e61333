"""The error hierarchy of the benchmarks package."""

from __future__ import annotations

__all__ = ["BenchConfigError", "BenchmarkError", "NotApplicable", "StrategyUnavailable"]


class BenchmarkError(Exception):
    """Base class of every error raised on purpose by :mod:`benchmarks`."""


class BenchConfigError(BenchmarkError, ValueError):
    """A benchmark option is invalid; the message names the option and the value."""


class StrategyUnavailable(BenchmarkError):
    """A strategy's backend is missing here; the message says what is missing."""


class NotApplicable(BenchmarkError):
    """A strategy cannot take this kind of data (or this source); the message says why."""

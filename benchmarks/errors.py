"""The error hierarchy of the benchmarks package, and how an error reads in one line.

Why a strategy failed is said in one line, the real error without an engine's annotations
(:func:`one_line`): a DataLoader worker's error carries its traceback in its text (its last
line names the error and the file); a TensorFlow op error wraps its message in the graph's
annotations (``{{function_node ...}}``, ``[[{{node DecodeWav}}]]``, ``[Op:IteratorGetNext]
name:``), whose last line says nothing.
"""

from __future__ import annotations

import re

__all__ = [
    "BenchConfigError",
    "BenchmarkError",
    "NotApplicable",
    "StrategyUnavailable",
    "one_line",
]


class BenchmarkError(Exception):
    """Base class of every error raised on purpose by :mod:`benchmarks`."""


class BenchConfigError(BenchmarkError, ValueError):
    """A benchmark option is invalid; the message names the option and the value."""


class StrategyUnavailable(BenchmarkError):
    """A strategy's backend is missing here; the message says what is missing."""


class NotApplicable(BenchmarkError):
    """A strategy cannot take this kind of data (or this source); the message says why."""


_ANNOTATIONS = (
    re.compile(r"\{\{function_node [^}]*\}\}"),  # where TensorFlow ran the op
    re.compile(r"\[\[\{\{node [^}]*\}\}\]\]"),  # the graph node
    re.compile(r"\[Op:[^\]]*\]( name: ?\S*)?"),  # the op and its (empty) name
)


def one_line(exc: BaseException) -> str:
    """The error's message on one line (the last line of a traceback carried as text).

    A TensorFlow error (``tf.errors.OpError``) gives its ``message`` without its
    annotations: ``InvalidArgumentError: Data too short when trying to read string``.
    """
    text = str(getattr(exc, "message", None) or exc)
    for pattern in _ANNOTATIONS:
        text = pattern.sub("", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and "Traceback (most recent call last)" in text:
        return lines[-1]  # a worker's traceback: its last line names the error and the file
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")

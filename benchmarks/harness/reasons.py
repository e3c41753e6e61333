"""Why a strategy failed, in one line: the real error, without an engine's annotations.

A DataLoader worker's error carries its traceback in its text (its last line names the error
and the file); a TensorFlow op error wraps its message in the graph's annotations
(``{{function_node ...}}``, ``[[{{node DecodeWav}}]]``, ``[Op:IteratorGetNext] name:``), whose
last line says nothing. :func:`one_line` keeps the message.
"""

from __future__ import annotations

import re

__all__ = ["one_line"]

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

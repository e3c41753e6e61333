"""What a transform's signature takes, checked before a build writes anything.

A transform is called ``fn(sample, key, **args)`` (plus ``extent=`` at ``stored`` when it
declares that parameter: :func:`takes_extent`). :func:`check_call` binds those to the
function's signature (``inspect.signature``) when the spec is made, so an argument the
function does not take (a typo in ``--transform-args``), or one it needs and was not given,
is refused naming it and the ones it takes, instead of failing every sample in the build.
A function whose signature cannot be read (a builtin, some C extensions) is not checked.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from precompute.errors import SpecError

__all__ = ["EXTENT", "check_call", "takes_extent"]

EXTENT = "extent"  # the keyword a transform at ``stored`` declares to get the valid region


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read: not checked
        return None


def takes_extent(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` names a parameter ``extent`` it can take by keyword."""
    sig = _signature(fn)
    p = sig.parameters.get(EXTENT) if sig is not None else None
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _keywords(sig: inspect.Signature) -> list[str]:
    """The names ``sig`` takes by keyword after ``sample`` and ``key``."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [n for n, p in sig.parameters.items() if p.kind in kinds]
    positional = [n for n, p in sig.parameters.items() if p.kind != p.KEYWORD_ONLY]
    return [n for n in names if n not in positional[:2]]


def check_call(fn: Callable[..., Any], name: str, args: Mapping[str, Any], at: str) -> None:
    """Refuse ``args`` that ``fn(sample, key, **args)`` cannot take.

    Raises:
        SpecError: An argument it does not take (``**kwargs`` takes any), one it needs and
            was not given, ``extent`` given as an argument (the build hands it), or a
            function that cannot take ``(sample, key)``.
    """
    sig = _signature(fn)
    if sig is None:
        return
    takes = _keywords(sig)
    if EXTENT in args and EXTENT in takes:
        raise SpecError(
            f"transform {name}: 'extent' is handed by the build (at stored), not an argument"
        )
    extra = {EXTENT: (0, 0, 1, 1)} if at == "stored" and EXTENT in takes else {}
    try:
        sig.bind(None, "", **args, **extra)
    except TypeError as exc:
        var = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        unknown = [] if var else sorted(set(args) - set(takes))
        said = (
            f"does not take the argument(s) {unknown}"
            if unknown
            else f"cannot be called as fn(sample, key, **args) with args {sorted(args)} ({exc})"
        )
        raise SpecError(
            f"transform {name} {said}; it takes {takes or 'no arguments'} "
            "(--transform-args, docs/transforms.md)"
        ) from None

"""Checkers of field options: each returns the normalised value or raises a ``SpecError``.

Every checker takes ``(where, value)``, ``where`` being the dotted name of the option
(``fields.mask.classes``), so every message names the field, the option and the value.
Normalised values are JSON-ready and hashable (lists become tuples).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from precompute.errors import SpecError
from precompute.policy import show

__all__ = [
    "MAX_COUNT",
    "REQUIRED",
    "ColumnClaim",
    "Flag",
    "Option",
    "SuffixClaim",
    "check_count",
    "check_dtype",
    "check_pairs",
    "check_rgb_table",
    "check_shape",
    "integer",
    "one_of",
    "optional",
]

REQUIRED = object()  # the default of an option every field of its kind must give
DTYPES = (
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "float16", "float32",
    "float64", "bool",
)  # fmt: skip
Checker = Callable[[str, Any], Any]


class Option(NamedTuple):
    """One option of a kind: its default (or :data:`REQUIRED`) and its checker.

    ``late``: the option was added after stores of its kind were built. While it holds its
    default it is left out of the field's written options (``FieldSpec.to_dict``, a store's
    fields table), so the spec hash and the cache key of every store built before stay the
    same; the kind still sees it (``FieldSpec.options`` holds every option).
    """

    default: Any
    check: Checker
    late: bool = False


class Flag(NamedTuple):
    """One ``precompute build`` flag of a kind: the option it sets of the kind's field.

    Attributes:
        option: The option of the kind's field the flag sets.
        help: The flag's help text (``precompute build --help``).
        convert: Click's conversion of the text: ``str``, ``int`` or ``float``.
        json: The text is JSON, parsed before the option's checker sees it.
        shared: Several kinds declare the flag (``--channels``: an image's 1 or 3, audio's
            mono or N), each as shared: it sets the option of the kind the source has
            (:func:`precompute.sources.resolve.shared_flag_kinds`); the text reaches each
            kind's checker as given (``convert`` ``str``).
    """

    option: str
    help: str
    convert: type = str
    json: bool = False
    shared: bool = False


class ColumnClaim(NamedTuple):
    """Which Parquet columns a kind is inferred from (``Kind.columns``).

    A column is claimed when its Arrow type is of one of ``types``, and its name is one of
    ``names`` (no ``names``: any name) or, with ``class_label``, ``datasets`` declares it a
    ``ClassLabel`` (or a list of them). A column claimed by name or ``ClassLabel`` goes to
    that kind before one claimed by type alone; of two claims alike, the lower ``priority``.

    Attributes:
        types: Arrow type families: ``binary`` (``binary``, ``large_binary``, or a struct of
            ``bytes``: the ``Image`` feature), ``integer``, ``string``, ``list`` (a list of
            numbers or strings), ``nested_list`` (a list of such lists).
        names: Column names it claims; empty: any column of its types.
        class_label: A ``ClassLabel`` column of its types is claimed whatever its name.
        priority: Inferred fields come in this order (lower first); it breaks ties.
    """

    types: tuple[str, ...]
    names: tuple[str, ...] = ()
    class_label: bool = False
    priority: int = 100


class SuffixClaim(NamedTuple):
    """Which WebDataset members a kind is inferred from (``Kind.suffixes``).

    Each of ``suffixes`` is written as ``--columns`` takes it: a member suffix (``cls``,
    ``seg.png``), alternatives a sample reads the first of (``jpg;png``: the ones present in
    the first samples are kept), or a key of a JSON member (``json:label``: present when the
    first sample's member has it).

    Attributes:
        suffixes: What it reads, best first.
        pick: ``first``: the best one present is the candidate; ``each``: every one present
            is (two leave the field in doubt: ``--columns`` must say which).
        integers: Suffixes that count only when the first sample's member holds an integer
            as text (``txt``).
        priority: Inferred fields come in this order (lower first); of two kinds that claim
            one member, the lower takes it.
    """

    suffixes: tuple[str, ...]
    pick: str = "first"
    integers: tuple[str, ...] = ()
    priority: int = 100


def integer(lo: int, hi: int) -> Checker:
    """A checker of an integer in ``[lo, hi]`` (booleans refused)."""

    def check(where: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise SpecError(f"{where} must be an integer in [{lo}, {hi}], got {show(value)}")
        return value

    return check


def one_of(*choices: Any) -> Checker:
    """A checker of a value among ``choices``."""

    def check(where: str, value: Any) -> Any:
        if isinstance(value, bool) or value not in choices:
            raise SpecError(f"{where} must be one of {list(choices)}, got {show(value)}")
        return value

    return check


def optional(inner: Checker) -> Checker:
    """A checker of ``None`` or what ``inner`` accepts."""

    def check(where: str, value: Any) -> Any:
        return None if value is None else inner(where, value)

    return check


def _sequence(where: str, value: Any, what: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise SpecError(f"{where} must be a list of {what}, got {show(value)}")
    return list(value)


MAX_COUNT = 1 << 16  # the most classes, points or boxes a count option may hold


def check_count(where: str, value: Any) -> int:
    """A positive class or point count, at most :data:`MAX_COUNT`."""
    return int(integer(1, MAX_COUNT)(where, value))


def check_shape(where: str, value: Any) -> tuple[int, ...]:
    """A per-sample shape: a list of 0 to 8 positive integers."""
    dims = _sequence(where, value, "positive integers")
    if len(dims) > 8:
        raise SpecError(f"{where} has {len(dims)} dimensions; at most 8")
    return tuple(integer(1, 1 << 24)(f"{where}.{i}", d) for i, d in enumerate(dims))


def check_dtype(where: str, value: Any) -> str:
    """A numpy dtype name from :data:`DTYPES` (little endian on disk)."""
    if not isinstance(value, str) or value not in DTYPES:
        raise SpecError(f"{where} must be one of {list(DTYPES)}, got {show(value)}")
    return str(np.dtype(value).name)


def check_pairs(where: str, value: Any) -> tuple[tuple[int, int], ...]:
    """Index pairs ``[[a, b], ...]`` swapped by a flip: distinct indices, each used once."""
    seen: set[int] = set()
    out = []
    for i, pair in enumerate(_sequence(where, value, "[a, b] pairs")):
        item = f"{where}.{i}"
        ends = _sequence(item, pair, "two point indices")
        if len(ends) != 2:
            raise SpecError(f"{item} must be a pair [a, b], got {show(pair)}")
        a, b = (integer(0, 1 << 16)(item, end) for end in ends)
        if a == b or a in seen or b in seen:
            raise SpecError(f"{item} {show(pair)} repeats a point index; each point pairs once")
        seen.update((a, b))
        out.append((a, b))
    return tuple(out)


def check_rgb_table(where: str, value: Any) -> tuple[tuple[int, int, int], ...]:
    """A colour map: the ``[r, g, b]`` of each class id in order, all distinct."""
    colours = _sequence(where, value, "[r, g, b] colours")
    byte = integer(0, 255)
    out = []
    for i, rgb in enumerate(colours):
        item = f"{where}.{i}"
        if not isinstance(rgb, (list, tuple)) or len(rgb) != 3:
            raise SpecError(f"{item} must be [r, g, b], got {show(rgb)}")
        out.append((byte(item, rgb[0]), byte(item, rgb[1]), byte(item, rgb[2])))
    if len(set(out)) != len(out):
        raise SpecError(f"{where} lists a colour twice; each class needs its own colour")
    return tuple(out)

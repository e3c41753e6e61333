"""The one set of checks of a user's number: an integer or a number inside a range.

Every package's settings go through these (the build spec, the augment policies, the loaders'
settings and saved states, the diagnosis), each raising its own error type, so a setting is
refused the same way, with the same message, wherever it is given. Torch-free.

- An integer is a :class:`numbers.Integral` (a numpy integer too), never a bool.
- A number is a :class:`numbers.Real` (a numpy float too), never a bool; NaN is never inside a
  range. Ranges compare exactly, so an integer of any size is refused without overflow.
- A message names the setting and the value (:func:`show`: huge integers and long values too).
- A stored frame's size (:func:`check_size`) is one side ``S`` (square) or ``WxH``.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

__all__ = ["check_integer", "check_number", "check_pair", "check_size", "show", "size_hw"]


def show(value: Any) -> str:
    """A short repr of a user value for a one-line error (huge ints have no repr)."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        text = f"<an integer of {value.bit_length()} bits>"
    return text if len(text) <= 60 else text[:57] + "..."


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's, unimported


def check_integer(
    where: str,
    value: Any,
    lo: int,
    hi: int | None = None,
    error: type[Exception] = ValueError,
) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[lo, hi]`` (``hi`` None: >= lo).

    Raises:
        error: ``WHERE must be an integer in [lo, hi] (or >= lo), got VALUE``.
    """
    if isinstance(value, Integral) and not _is_bool(value):
        number = int(value)
        if lo <= number and (hi is None or number <= hi):
            return number
    want = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
    raise error(f"{where} must be an integer {want}, got {show(value)}")


def check_number(
    where: str, value: Any, lo: float, hi: float, error: type[Exception] = ValueError
) -> float:
    """Return ``value`` as a ``float`` if it is a number in ``[lo, hi]`` (NaN never is).

    Raises:
        error: ``WHERE must be a number in [lo, hi], got VALUE``.
    """
    number: Any = value  # compared as it is: float() of a huge integer overflows
    if isinstance(value, Real) and not _is_bool(value) and lo <= number <= hi:
        return float(number)
    raise error(f"{where} must be a number in [{lo:g}, {hi:g}], got {show(value)}")


def check_pair(
    where: str,
    value: Any,
    lo: float,
    hi: float,
    error: type[Exception] = ValueError,
    unit: str = "numbers",
) -> tuple[float, float]:
    """Return ``value`` as ``(low, high)`` floats: a tuple or list of two numbers in range.

    Raises:
        error: Not a pair (``WHERE must be a (low, high) pair of UNIT``), a number out of range
            (as :func:`check_number`) or low above high; naming the value.
    """
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise error(f"{where} must be a (low, high) pair of {unit}, got {show(value)}")
    low, high = (check_number(where, v, lo, hi, error) for v in value)
    if low > high:
        raise error(f"{where} low {low} is above high {high}")
    return (low, high)


Size = int | str  # a stored frame: side S (square), or "WxH" (width x height)


def check_size(
    where: str, value: Any, lo: int, hi: int, error: type[Exception] = ValueError
) -> Size:
    """Return a frame size canonically: ``S`` (an int) if square, else ``"WxH"``.

    Takes an integer, ``"WxH"`` text (``512x384``: width 512, height 384) or a ``(width,
    height)`` pair; each side an integer in ``[lo, hi]``. A square given as ``WxH`` is its
    side (``"64x64"`` is ``64``): one store, one spec hash. (A flag's text ``"64"`` is the
    caller's to convert: in a spec, a side is a number.)

    Raises:
        error: Naming the setting and the value.
    """
    if isinstance(value, str):
        parts = value.strip().lower().split("x")
        if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
            value = [int(p) for p in parts]
    if isinstance(value, tuple | list) and len(value) == 2:
        w, h = (check_integer(where, v, lo, hi, error) for v in value)
        return w if w == h else f"{w}x{h}"
    if isinstance(value, Integral) and not _is_bool(value):
        return check_integer(where, value, lo, hi, error)
    raise error(
        f"{where} must be a side S or WIDTHxHEIGHT (e.g. 224, 512x384) of integers in "
        f"[{lo}, {hi}], got {show(value)}"
    )


def size_hw(size: Size) -> tuple[int, int]:
    """``(height, width)`` of a canonical size (:func:`check_size`): ``S`` -> ``(S, S)``."""
    if isinstance(size, str):
        w, h = (int(p) for p in size.split("x"))
        return h, w
    return int(size), int(size)

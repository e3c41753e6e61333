"""The user's transform in a build spec: its name, arguments, where it runs, its fingerprint.

A :class:`TransformSpec` names a function ``pkg.module:function`` (importable where the build
runs: here, on every Ray worker, in the cache service), the keyword arguments it is called
with, the point of the build it runs at, and the fingerprint of its code
(:mod:`precompute.transforms.fingerprint`). The build spec holds it as ``transform``, so the
spec hash and the cache key change when the function's source, a module of the user's it
imports, its arguments or its ``version`` attribute do (``docs/transforms.md``).

Parsing a spec that carries a fingerprint (a store's own spec) keeps it and imports nothing,
so ``inspect`` reads any store; a build and the cache take the fingerprint of the code as it
is now (:meth:`TransformSpec.current`), never a stale one given with the spec.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from precompute.errors import SpecError
from precompute.policy import show

__all__ = ["AT", "TransformSpec", "check_args", "edited_during", "name_of"]

AT = ("stored", "decoded")  # after the resize (the stored values), before it (as decoded)
_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")
_KEYS = ("name", "args", "at", "fingerprint")


def check_args(where: str, value: Any) -> Mapping[str, Any]:
    """The transform's keyword arguments: a JSON object with string keys, JSON values.

    Raises:
        SpecError: Not a mapping, a key that is not an identifier, or a value JSON cannot hold
            (NaN too: the spec is JSON).
    """
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise SpecError(f"{where} must be a JSON object of keyword arguments, got {show(value)}")
    for key in value:
        if not isinstance(key, str) or not key.isidentifier():
            raise SpecError(f"{where}: {show(key)} is not a keyword argument name")
    try:
        text = json.dumps(dict(value), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{where} must hold JSON values only ({exc}): {show(value)}") from None
    return MappingProxyType(json.loads(text))


def _main_module() -> str | None:
    """The module name ``__main__`` was run as (``python -m pkg.module``), else None."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    return name if isinstance(name, str) and name != "__main__" else None


def name_of(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a function, as a spec names it.

    A function of ``__main__`` run as ``python -m pkg.module`` is named by that module.

    Raises:
        SpecError: A function its name cannot import elsewhere: a lambda, one defined inside
            another function, one of a script run by its path (``__main__``), or no function.
    """
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not callable(fn) or not isinstance(module, str) or not isinstance(qualname, str):
        raise SpecError(f"transform must be a function or 'pkg.module:function', got {show(fn)}")
    if module == "__main__":
        module = _main_module() or module
    if module == "__main__" or "<" in qualname:
        where = "a script (__main__)" if module == "__main__" else f"{qualname!r}"
        raise SpecError(
            f"transform {where} cannot be imported by name where the build runs (Ray workers, "
            "the cache service): define it at the top level of a module of your package and "
            "pass it, or 'pkg.module:function' (docs/transforms.md)"
        )
    return f"{module}:{qualname}"


@dataclass(frozen=True)
class TransformSpec:
    """A user's transform as the build spec holds it.

    Attributes:
        name: ``pkg.module:function`` (``function`` may be ``Class.method``).
        args: Keyword arguments the function is called with (JSON values), read-only.
        at: ``stored`` (the default: after the resize, each field as it is stored) or
            ``decoded`` (before it: each field as decoded, in the source frame).
        fingerprint: sha256 of the code and arguments
            (:func:`precompute.transforms.fingerprint.fingerprint`); empty: computed here by
            importing the function.
    """

    name: str
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)
    at: str = "stored"
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise SpecError(f"transform.name must be 'pkg.module:function', got {show(self.name)}")
        object.__setattr__(self, "args", check_args("transform.args", self.args))
        if self.at not in AT:
            raise SpecError(f"transform.at must be one of {list(AT)}, got {show(self.at)}")
        fp = self.fingerprint
        if not isinstance(fp, str) or (fp and not re.fullmatch(r"[0-9a-f]{64}", fp)):
            raise SpecError(f"transform.fingerprint must be a sha256 hex digest, got {show(fp)}")
        if not fp:  # given by name: the code as it is now
            from precompute.transforms.fingerprint import fingerprint, load
            from precompute.transforms.signature import check_call

            fn = load(self.name)
            check_call(fn, self.name, self.args, self.at)
            object.__setattr__(self, "fingerprint", fingerprint(fn, self.name, self.args))

    @classmethod
    def of(
        cls,
        transform: Callable[..., Any] | str | TransformSpec,
        args: Mapping[str, Any] | None = None,
        at: str | None = None,
    ) -> TransformSpec:
        """A transform given as a function, its ``pkg.module:function`` name or a spec.

        ``args`` and ``at`` override a spec's own.

        Raises:
            SpecError: A function its name does not import (a lambda, a script's, one
                defined in a function, or one rebound under another name), or a bad value.
        """
        if isinstance(transform, TransformSpec):
            given = transform
            return cls(given.name, given.args if args is None else args, at or given.at)
        if isinstance(transform, str):
            return cls(transform, args or {}, at or "stored")
        name = name_of(transform)
        from precompute.transforms.fingerprint import load

        ran = getattr(transform, "__module__", None) == "__main__"  # its module's other copy
        if not ran and load(name) is not transform:
            raise SpecError(
                f"transform {name}: that name imports another object than the function "
                "given (rebound or wrapped after definition?); pass the name instead"
            )
        return cls(name, args or {}, at or "stored")

    def current(self) -> TransformSpec:
        """This transform with the fingerprint of its code as it is now (imports it).

        Raises:
            SpecError: The function cannot be imported, does not take its arguments
                (:func:`~precompute.transforms.signature.check_call`), or its fingerprint
                cannot be taken.
        """
        from precompute.transforms.fingerprint import fingerprint, load
        from precompute.transforms.signature import check_call

        fn = load(self.name)
        check_call(fn, self.name, self.args, self.at)
        return replace(self, fingerprint=fingerprint(fn, self.name, self.args))

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "args", "at", "fingerprint"}``, JSON-ready."""
        return {"name": self.name, "args": dict(self.args), "at": self.at,
                "fingerprint": self.fingerprint}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Any) -> TransformSpec:
        """Parse ``{"name", "args"?, "at"?, "fingerprint"?}``, or the ``pkg.module:fn`` text.

        Raises:
            SpecError: An unknown key, or a value :class:`TransformSpec` refuses.
        """
        if isinstance(data, str):
            return cls(data)
        if not isinstance(data, Mapping):
            raise SpecError(
                f"transform must be 'pkg.module:function' or a mapping with a name, got "
                f"{show(data)}"
            )
        unknown = sorted(str(k) for k in set(data) - set(_KEYS))
        if unknown or "name" not in data:
            raise SpecError(f"transform: unknown key(s) {unknown} or no name; known: {_KEYS}")
        return cls(data["name"], data.get("args") or {}, data.get("at", "stored"),
                   data.get("fingerprint", ""))  # fmt: skip


def edited_during(asked: TransformSpec | None, built: TransformSpec | None) -> str | None:
    """Why a build's store is not the one asked for, if its transform's code changed meanwhile.

    ``asked`` is the transform a request was keyed by, ``built`` the one its store records
    (a build takes the code as it is when it starts): the same function, arguments and point
    with another fingerprint means a module of it was edited between the two. None otherwise.
    """
    if asked is None or built is None or asked.fingerprint == built.fingerprint:
        return None
    same = (asked.name, dict(asked.args), asked.at) == (built.name, dict(built.args), built.at)
    if not same:
        return None
    return (
        f"transform {asked.name}: its code changed during the build (a module of it was "
        f"edited after the request: fingerprint {asked.fingerprint[:12]} when asked, "
        f"{built.fingerprint[:12]} when built); the code as it is now is another store: "
        "ask again (docs/transforms.md)"
    )

"""A user's transform run on one sample of a build, its outputs checked against the fields.

:class:`SampleTransform` is what a shard task holds: the function imported by name (once per
process, :func:`loaded`; the code must be the code the spec's fingerprint names, else the
shard fails naming both), called as ``fn(sample, key, **args)`` with ``sample`` a dict of the
sample's fields (numpy arrays, by field name) and ``key`` the sample's source key, returning
the sample (the same keys: a field dropped or added is an error). :mod:`precompute.fields.
assemble` runs it at the spec's point:

* ``stored`` (default): after the resize, on the values as they are stored. Each output must
  have the field's stored shape and dtype exactly (nothing is cast or broadcast), and values
  the kind allows (``Kind.check_stored``: a mask's class ids, a label's classes, ...). A
  function that declares a parameter ``extent`` gets the sample's valid region
  ``(top, left, height, width)`` (the rest of a letterboxed frame is padding).
* ``decoded``: before the resize, on the values as decoded, in the source frame: file fields
  as their decoders give them (an image's pixels as the source holds them: grey one channel,
  16-bit grey uint16), inline fields in their stored dtype. File fields then go through
  their kind's checks (an image given its channels and bit depth, a mask's ids checked), so a
  transform may crop (every spatial file field to the same frame) or change the bit depth;
  an inline field must keep its shape and dtype.

An exception the function raises on a sample, or an output the checks refuse, is a
:class:`~precompute.errors.DecodeError` naming the sample and the transform: the build's
``on_error`` applies (``raise`` stops, ``skip`` leaves a hole and records the reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from precompute.checks import Size
from precompute.errors import BuildError, DecodeError
from precompute.fields.spec import FieldSpec
from precompute.transforms.fingerprint import fingerprint, load
from precompute.transforms.signature import EXTENT, takes_extent
from precompute.transforms.spec import TransformSpec

__all__ = ["SampleTransform", "loaded"]

_LOADED: dict[tuple[str, str, str], SampleTransform] = {}


def loaded(spec: TransformSpec) -> SampleTransform:
    """The transform of ``spec``, imported once per process and checked against its fingerprint.

    Raises:
        SpecError: The function cannot be imported here.
        BuildError: The code here is not the code the spec was fingerprinted from (a Ray
            worker with another version of the user's package).
    """
    key = (spec.name, spec.fingerprint, spec.at)
    if key not in _LOADED:
        fn = load(spec.name)
        here = fingerprint(fn, spec.name, spec.args)
        if here != spec.fingerprint:
            raise BuildError(
                f"transform {spec.name}: the code in this process (fingerprint {here[:12]}) "
                f"is not the code the build was asked for ({spec.fingerprint[:12]}): a module "
                "of it was edited after the build started (build again: the code as it is now "
                "is another store), or this worker has another version of it (every process "
                "of a build needs the same one; docs/transforms.md)"
            )
        _LOADED[key] = SampleTransform(spec, fn, takes_extent(fn))
    return _LOADED[key]


def _unwrap(raw: Any) -> Any:
    """A decoder's value: its array (an ``AudioValue``-like named tuple's ``value``) or itself."""
    return raw.value if hasattr(raw, "_replace") and hasattr(raw, "value") else raw


def _rewrap(raw: Any, new: Any) -> Any:
    return raw._replace(value=new) if hasattr(raw, "_replace") and hasattr(raw, "value") else new


def _described(value: Any) -> str:
    a = np.asarray(value) if isinstance(value, np.ndarray | np.generic) else None
    return f"{a.dtype} {a.shape}" if a is not None else type(value).__name__


@dataclass(frozen=True)
class SampleTransform:
    """A transform ready to run on samples (see the module docstring)."""

    spec: TransformSpec
    fn: Callable[..., Any]
    extent: bool = False  # it declares ``extent``: handed the valid region at ``stored``

    @property
    def at(self) -> str:
        """``stored`` or ``decoded``."""
        return self.spec.at

    def _fail(self, key: str, why: str) -> DecodeError:
        return DecodeError(key, f"transform {self.spec.name}: {why}")

    def call(
        self, key: str, sample: Mapping[str, Any], given: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``fn(sample, key, **args, **given)``, its result a mapping of the same field names.

        Raises:
            DecodeError: The function raised, or returned something other than the sample.
        """
        try:
            out = self.fn(dict(sample), key, **self.spec.args, **(given or {}))
        except Exception as exc:  # the user's code: any failure is this sample's
            raise self._fail(key, f"raised {type(exc).__name__}: {exc}") from None
        if not isinstance(out, Mapping):
            raise self._fail(key, f"returned {type(out).__name__}, not the sample (a dict)")
        if set(out) != set(sample):
            missing, extra = sorted(set(sample) - set(out)), sorted(set(out) - set(sample))
            raise self._fail(
                key,
                f"returned fields {sorted(out)}; the sample's are {sorted(sample)} "
                f"(missing {missing}, unknown {extra})",
            )
        return dict(out)

    def stored(
        self,
        key: str,
        values: Mapping[str, Any],
        fields: Sequence[FieldSpec],
        size: Size,
        extent: Sequence[int],
    ) -> dict[str, Any]:
        """Run on the stored values; every output exactly the field's storage, values allowed.

        ``extent`` (``(top, left, height, width)``: the part of the stored frame the source
        covers, the rest letterbox padding) is handed as ``extent=`` to a function that
        declares that parameter.

        Raises:
            DecodeError: Naming the sample, the field, what it returned and what it stores.
        """
        extra = {EXTENT: tuple(int(v) for v in extent)} if self.extent else None
        out = self.call(key, {f.name: values[f.name] for f in fields}, extra)
        for f in fields:
            want, got = f.storage(size), out[f.name]
            ok = isinstance(got, np.ndarray) and got.shape == tuple(want.shape)
            if not ok or got.dtype != np.dtype(want.dtype):
                raise self._fail(
                    key,
                    f"field {f.name!r} ({f.kind}) is {_described(got)}; it stores "
                    f"{want.dtype} {tuple(want.shape)} (cast and shape it so)",
                )
            self._allowed(key, f, got)
        return {**values, **out}

    def _allowed(self, key: str, f: FieldSpec, value: np.ndarray) -> None:
        try:
            f.spec.check_stored(value[None], f.options)
        except ValueError as exc:
            raise self._fail(key, f"field {f.name!r} ({f.kind}): {exc}") from None

    def decoded(
        self,
        key: str,
        raws: Mapping[str, Any],
        values: Mapping[str, Any],
        fields: Sequence[FieldSpec],
        check: Callable[[FieldSpec, Any], Any],
        size: Size,
    ) -> dict[str, Any]:
        """Run on the decoded sample; return every field's checked value.

        An inline field is handed in its stored dtype (boxes and keypoints float32, a label
        int64, ...) and its output taken in that dtype (or the kind's own, with which the
        build maps it: boxes float64), the same shape; one returned unchanged keeps its
        exact value.

        Args:
            key: The sample's key.
            raws: File fields' decoder outputs by name.
            values: Inline fields' checked values by name.
            fields: The store's fields.
            check: ``check(field, raw)``: the field's kind's check of a file field's value
                (a :class:`DecodeError` naming the file).
            size: The stored frame (the inline fields' stored dtypes).

        Raises:
            DecodeError: As :meth:`call`, or an output its kind refuses.
        """
        given = {f.name: _handed(values[f.name], f, size) for f in fields if f.name in values}
        sample = {f.name: _unwrap(raws[f.name]) if f.name in raws else given[f.name]
                  for f in fields}  # fmt: skip
        out = self.call(key, sample)
        checked = {}
        for f in fields:
            if f.name in raws:
                try:
                    checked[f.name] = check(f, _rewrap(raws[f.name], out[f.name]))
                except DecodeError as exc:
                    raise self._fail(key, f"its output: {exc.reason}") from None
                continue
            checked[f.name] = self._inline(key, f, out[f.name], values[f.name], given[f.name])
        return checked

    def _inline(
        self, key: str, f: FieldSpec, got: Any, was: np.ndarray, handed: np.ndarray
    ) -> np.ndarray:
        """An inline field's output: ``handed``'s shape, its dtype or ``was``'s; as ``was``."""
        same = isinstance(got, np.ndarray) and got.shape == was.shape
        if not same or got.dtype not in (was.dtype, handed.dtype):
            raise self._fail(
                key,
                f"field {f.name!r} ({f.kind}) is {_described(got)}; it was handed "
                f"{handed.dtype} {handed.shape} (an inline field keeps its shape and dtype)",
            )
        if got.dtype == handed.dtype and np.array_equal(got, np.asarray(was, handed.dtype)):
            return was  # unchanged: its exact value (a float32 view of float64 boxes aside)
        self._allowed(key, f, got)
        return np.asarray(got, dtype=was.dtype)


def _handed(value: np.ndarray, f: FieldSpec, size: Size) -> np.ndarray:
    """An inline field's checked value in its stored dtype, as a transform is handed it."""
    return np.asarray(value, dtype=np.dtype(f.storage(size).dtype)).copy()

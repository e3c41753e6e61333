"""``precompute build``'s field flags -> the ``fields`` of the build spec.

``--fields`` gives the whole list (JSON text, or the path of a JSON/YAML file holding it):
``[{"name": ..., "kind": ..., "options": {...}}, ...]``. The short flags set options of the
fields a source has by itself (:func:`precompute.sources.resolve.infer_fields`); each kind
declares its own (``Kind.flags``: ``--mask-classes``, ``--ignore-index`` and ``--colormap``
the mask's, ``--flip-pairs`` the keypoints', ``--clip-seconds`` and the other audio flags the
audio field's, ``--key`` the array's, the scene flags the ``position`` field's, and any a
kind plugin adds: ``docs/kinds.md``). Errors are
:class:`~precompute.errors.SpecError` naming the flag.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from precompute.errors import SpecError
from precompute.fields import KINDS, FieldSpec
from precompute.fields.options import Flag
from precompute.sources.resolve import infer_fields, shared_flag_kinds

__all__ = [
    "FIELD_FLAGS",
    "OWN_FLAGS",
    "columns_from_flag",
    "fields_from_flags",
    "flag_keys",
    "kind_flags",
    "spec_with_flag_fields",
]


def columns_from_flag(text: str) -> dict[str, str]:
    """``--columns image=img,label=fine_label`` -> ``{"image": "img", "label": "fine_label"}``.

    The column (or WebDataset suffix) each field reads (``docs/sources.md``); a value may
    hold ``;`` (``image=jpg;png``) and ``:`` (``keypoints=json:keypoints``), not ``,``.

    Raises:
        SpecError: A pair without ``=``, an empty side, or a field named twice.
    """
    out: dict[str, str] = {}
    for pair in text.split(","):
        field, eq, column = (p.strip() for p in pair.partition("="))
        if not (eq and field and column):
            raise SpecError(f"--columns: {pair.strip()!r} is not FIELD=COLUMN")
        if field in out:
            raise SpecError(f"--columns names {field!r} twice")
        out[field] = column
    return out


# The build command's own parameters (``precompute.cli`` sets them): a kind's flag of one of
# these names is left out, so that its value is never taken for the kind's option.
OWN_FLAGS: set[str] = set()


def kind_flags() -> dict[str, tuple[str, Flag]]:
    """The flags the registered kinds declare (``Kind.flags``): parameter -> (kind, flag).

    A flag named as one of the build's own options (:data:`OWN_FLAGS`) is left out; a flag
    two kinds declare is the first kind's (built-in kinds first), with a ``RuntimeWarning``
    naming both: a plugin's clash must not stop every command. A flag every declaring kind
    marks ``shared`` (``--channels``) is the first kind's here and sets the option of the
    kind the source has (:func:`shared_kinds`).
    """
    out: dict[str, tuple[str, Flag]] = {}
    for kind in KINDS.values():
        for param, flag in kind.flags.items():
            if param in OWN_FLAGS:
                continue
            if param in out and flag.shared and out[param][1].shared:
                continue
            if param in out:
                warnings.warn(
                    f"the flag --{param.replace('_', '-')} is declared by kinds "
                    f"{out[param][0]!r} and {kind.name!r}: it sets {out[param][0]!r}'s option "
                    f"(set {kind.name!r}'s with --fields)",
                    RuntimeWarning,
                    2,
                )
                continue
            out[param] = (kind.name, flag)
    return out


def _flag_table() -> dict[str, tuple[str, str, bool]]:
    """Every field flag: parameter -> (kind, option, takes JSON)."""
    return {param: (kind, f.option, f.json) for param, (kind, f) in kind_flags().items()}


def shared_kinds(param: str) -> list[tuple[str, str]]:
    """``(kind, option)`` of every kind declaring the shared flag ``param`` (else empty)."""
    return [
        (kind.name, kind.flags[param].option)
        for kind in KINDS.values()
        if param in kind.flags and kind.flags[param].shared
    ]


# flag (click's parameter name) -> (kind, option, takes JSON): the kinds' flags when this
# module was imported (fields_from_flags reads the registry at each call)
FIELD_FLAGS: dict[str, tuple[str, str, bool]] = _flag_table()


def _json(flag: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SpecError(f"--{flag.replace('_', '-')}: not JSON ({exc}): {text[:60]!r}") from None


def _fields_doc(text: str) -> Any:
    """``--fields``: JSON text, or a JSON/YAML file of it."""
    if text.lstrip().startswith("[") or not os.path.isfile(text):
        return _json("fields", text)
    import yaml  # a dependency of ray

    from precompute.sources.inputs import read_input

    try:
        return yaml.safe_load(read_input(text, max_bytes=1 << 20).decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"--fields {text}: cannot read the fields file ({exc})") from None


def _explicit(text: str) -> list[dict[str, Any]]:
    doc = _fields_doc(text)
    if not isinstance(doc, list) or not doc:
        raise SpecError("--fields must be a non-empty list of {name, kind, options}")
    return [FieldSpec.from_dict(f).to_dict() for f in doc]


def fields_from_flags(
    src: str, flags: dict[str, Any], fill: int, columns: dict[str, str] | None = None
) -> list[dict[str, Any]] | None:
    """The spec's ``fields`` from the field flags (None: no field flag given).

    Args:
        src: The build's source (its fields are inferred for the short flags).
        flags: Click's parameters; the field flags are popped from it.
        fill: The letterbox fill of the image field.
        columns: The spec's ``columns`` (the fields of a Parquet or WebDataset source).

    Raises:
        SpecError: A flag's value is invalid, or names a field the source does not have.
    """
    given = flags.pop("fields", None)
    options: dict[str, dict[str, Any]] = {}
    named: list[str] = []  # the flags given, as typed: --clip-seconds
    for flag, (kind, option, is_json) in _flag_table().items():
        value = flags.pop(flag, None)
        if value is None:
            continue
        value = _json(flag, value) if is_json else value
        targets = _shared_targets(src, flag, kind, option, columns)
        sets = ", ".join(f"{k} option {opt!r}" for k, opt in targets)
        named.append(f"--{flag.replace('_', '-')} ({sets})")
        for k, opt in targets:
            options.setdefault(k, {})[opt] = value
    if given is not None:
        if options:
            raise SpecError(
                f"--fields sets every field option itself; drop {', '.join(named)}, or give "
                'each in its field\'s "options" in --fields'
            )
        return _explicit(given)
    if not options:
        return None
    for kind, given in options.items():  # e.g. a scene's --patch P: stored as cut (size P)
        for key, value in KINDS[kind].spec_defaults(given).items():
            if flags.get(key) is None:
                flags[key] = value
    # the manifest's text is kept for the build, which then lists it without reading it again
    inferred = infer_fields(src, options, fill, keep_text=True, columns=columns)
    _refuse_unused(options, inferred)
    return [f.to_dict() for f in inferred]


def _shared_targets(
    src: str, flag: str, kind: str, option: str, columns: dict[str, str] | None
) -> list[tuple[str, str]]:
    """``(kind, option)`` pairs a flag's value sets: its kind's, or a shared flag's source's."""
    shared = shared_kinds(flag)
    if len(shared) < 2:
        return [(kind, option)]
    kinds = shared_flag_kinds(src, [k for k, _ in shared], columns or {})
    if not kinds:
        raise SpecError(
            f"--{flag.replace('_', '-')}: {src} has no field of kind "
            f"{' or '.join(repr(k) for k, _ in shared)}"
        )
    return [(k, opt) for k, opt in shared if k in kinds]


def _refuse_unused(options: dict[str, dict[str, Any]], fields: Sequence[FieldSpec]) -> None:
    """Refuse a flag whose option the field's other options leave unused (``Kind.unused``).

    Such an option is no part of the spec: left out silently, the flag would do nothing.
    """
    flags = {(kind, opt): param for param, (kind, opt, _) in _flag_table().items()}
    for f in fields:
        unused = f.spec.unused(f.options)
        for option in options.get(f.kind, {}):
            if option in unused:
                flag = f"--{flags[f.kind, option].replace('_', '-')}"
                raise SpecError(f"{flag}: {unused[option]}")


def flag_keys(spec: Mapping[str, Any]) -> list[str]:
    """The keys of a build spec mapping that are kinds' flags, not spec fields (sorted).

    ``clip_seconds``, ``features``, ``n_mels``, ``mask_classes``, ``flip_pairs``: the names of
    ``precompute build``'s field flags (``--clip-seconds``), as click names their parameters.
    A key that is a :class:`~precompute.spec.BuildSpec` field is the spec's, never a flag's.
    """
    from precompute.spec import BuildSpec

    own = {f.name for f in dataclasses.fields(BuildSpec)}
    table = _flag_table()
    return sorted(k for k in spec if k in table and k not in own)


def spec_with_flag_fields(src: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A build spec mapping whose kinds' flags (:func:`flag_keys`) set its ``fields``.

    ``{"size": 32, "clip_seconds": 1, "features": "logmel"}`` is what ``precompute build SRC
    --size 32 --clip-seconds 1 --features logmel`` builds: the flags set options of the
    fields ``src`` has by itself (:func:`fields_from_flags`: inferred from the source, as the
    command line infers them); a JSON flag's value may be given as the value itself
    (``"flip_pairs": [[0, 1]]``). A mapping without such keys is returned as it is.

    Raises:
        SpecError: Flag keys beside ``fields`` (which sets every option), a flag's value is
            invalid, or names a field the source does not have.
    """
    keys = flag_keys(spec)
    if not keys:
        return dict(spec)
    if "fields" in spec:
        raise SpecError(
            f"a build spec with 'fields' sets every field option itself; drop {keys}, or give "
            "each in its field's 'options'"
        )
    table = _flag_table()
    work = {k: v for k, v in spec.items() if k not in keys}
    for key in keys:
        value, is_json = spec[key], table[key][2]
        work[key] = json.dumps(value) if is_json and not isinstance(value, str) else value
    fill = work.get("fill", 0)
    columns = work.get("columns")
    fields = fields_from_flags(
        src,
        work,
        fill if isinstance(fill, int) else 0,
        dict(columns) if isinstance(columns, Mapping) else None,
    )
    return {**work, "fields": fields}

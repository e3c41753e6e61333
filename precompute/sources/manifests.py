r"""Parse CSV/JSONL manifests of ``path,label`` lines (the rules are in ``docs/manifests.md``).

- **CSV**: an optional header row naming ``path`` and ``label`` (other columns ignored), else
  column 0 is the path and column 1 the label. Blank rows are ignored. A UTF-8 BOM is dropped.
- **JSONL** (``.jsonl``/``.ndjson``): one JSON object with ``path`` and ``label`` per line
  (lines end at ``\n`` only); blank lines are ignored.
- **Paths**: non-empty text without NUL; duplicates are refused by the caller.
- **Labels** are either *all integers* (a JSON integer, or text of ASCII digits with an
  optional ``-``), kept as given with no class list, each in ``[0, MAX_LABEL]``; or *all class
  names*, sorted, a label being the index of its name. A manifest that mixes the two is
  refused naming the first line whose kind differs from the first label's.
- **Per-line label errors** (empty, ``null``, a list, an object, a boolean, or a number that
  is not an integer: ``0.5``, and ``1.0`` too, as pandas writes an integer column with a gap):
  under ``on_error: raise`` a :class:`~precompute.errors.SourceError` naming the line; under
  ``skip`` the line is left out and recorded as ``(path, "line N: reason")``.

Any input gives rows or a :class:`~precompute.errors.SourceError`, never another exception.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from precompute.errors import SourceError
from precompute.fields.values import whole_label_text
from precompute.sources.inputs import read_input

__all__ = [
    "MAX_LABEL",
    "MAX_MANIFEST_BYTES",
    "jsonl_objects",
    "parse_manifest",
    "read_manifest_text",
]

# The largest integer label: the largest int32, the widest class index a training loop uses.
MAX_LABEL = 2**31 - 1
# A manifest larger than this is refused unread (1 GiB).
MAX_MANIFEST_BYTES = 1 << 30

Row = tuple[int, str, Any]  # (line number, path, raw label)


class _BadLabel(Exception):
    """A label that is neither an integer nor a name: a per-line error under ``on_error``."""


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        return False
    return True


def _csv_rows(src: str, text: str) -> list[Row]:
    reader = csv.reader(io.StringIO(text))
    try:
        rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise SourceError(f"{src}: line {max(reader.line_num, 1)}: not CSV ({exc})") from exc
    ip, il = 0, 1
    head = [c.strip().lower() for c in rows[0][1]] if rows else []
    if "path" in head and "label" in head:
        ip, il = head.index("path"), head.index("label")
        rows.pop(0)
    elif _unnamed_header([r for _, r in rows]):
        raise SourceError(
            f"{src}: line {rows[0][0]} ({_show(rows[0][1])}) looks like a header: name its "
            "columns path and label (other columns are ignored), or remove it"
        )
    out = []
    for n, row in rows:
        if len(row) <= max(ip, il):
            raise SourceError(f"{src}: line {n} has no path,label: {_show(row)}")
        out.append((n, row[ip].strip(), row[il].strip()))
    return out


_WORD = re.compile(r"[A-Za-z_][\w -]*")  # a column name: no dot nor slash, as a path has


def _unnamed_header(rows: list[list[str]]) -> bool:
    """Whether the first row is a header naming its columns otherwise than ``path,label``.

    Such a row read as data is a file that does not exist, and its label a class of its own (or
    a name among integers): it is one when its path is a plain word (``filename``) while every
    other row's path has a dot or a slash, or both cells are words while every other label is
    an integer.
    """
    if len(rows) < 2 or len(rows[0]) < 2:
        return False
    (path, label), rest = (c.strip() for c in rows[0][:2]), rows[1:]
    if not _WORD.fullmatch(path):
        return False
    if all(len(r) > 1 and ("." in r[0] or "/" in r[0]) for r in rest):
        return True
    return bool(_WORD.fullmatch(label)) and all(len(r) > 1 and _integer(r[1]) for r in rest)


def _integer(cell: str) -> bool:
    """Whether a label cell holds an integer (as :func:`whole_label_text` reads one)."""
    try:
        return whole_label_text(cell.strip())
    except ValueError:  # another number: not an integer
        return False


def read_manifest_text(src: str) -> str:
    """The text of manifest ``src``, read safely (at most ``MAX_MANIFEST_BYTES``), UTF-8.

    Raises:
        SourceError: Missing, unreadable, too large or not UTF-8; the message names ``src``.
    """
    try:
        data = read_input(src, MAX_MANIFEST_BYTES)
    except FileNotFoundError as exc:
        raise SourceError(f"{src}: manifest does not exist") from exc
    except OSError as exc:  # InputError too: not a regular file, too large, stuck
        raise SourceError(f"{src}: cannot read manifest: {exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{src}: manifest is not UTF-8 text (byte {exc.start})") from exc


def jsonl_objects(src: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line, object)`` of a JSONL manifest: one JSON object per non-blank line.

    Lines end at a newline only (U+2028 inside a string is not a line break).

    Raises:
        SourceError: A line that is not a JSON object, naming it.
    """
    out = []
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise SourceError(f"{src}: line {n} is not JSON ({type(exc).__name__})") from exc
        if not isinstance(doc, dict):
            raise SourceError(f"{src}: line {n} is not a JSON object")
        out.append((n, doc))
    return out


def _jsonl_rows(src: str, text: str) -> list[Row]:
    out = []
    for n, doc in jsonl_objects(src, text):
        if "path" not in doc or "label" not in doc:
            raise SourceError(f"{src}: line {n} is not a JSON object with path and label")
        out.append((n, doc["path"], doc["label"]))
    return out


def _path(src: str, n: int, path: Any) -> str:
    if not isinstance(path, str):
        raise SourceError(f"{src}: line {n}: path must be a string, got {_show(path)}")
    if not path:
        raise SourceError(f"{src}: line {n} has an empty path")
    if "\0" in path or not _is_text(path):
        raise SourceError(f"{src}: line {n}: path {_show(path)} is not a valid file name")
    return path


def _bounded(src: str, n: int, text: str) -> int:
    """Parse ``text`` (ASCII digits, optional ``-``) as a label in ``[0, MAX_LABEL]``."""
    digits = text.lstrip("-").lstrip("0") or "0"
    if text.startswith("-") and digits != "0":
        raise SourceError(f"{src}: line {n}: negative label {text[:24]}")
    if len(digits) > len(str(MAX_LABEL)) or int(digits) > MAX_LABEL:
        raise SourceError(
            f"{src}: line {n}: label {text[:24]} is larger than MAX_LABEL {MAX_LABEL}, the "
            "largest class index"
        )
    return int(digits)


def _label(src: str, n: int, label: Any) -> int | str:
    """Return an integer label or a class name; raise ``_BadLabel`` for a per-line error."""
    if isinstance(label, bool) or not isinstance(label, (int, str)):
        kind = {type(None): "null", list: "a list", dict: "an object"}.get(type(label))
        raise _BadLabel(f"label must be an integer or a class name, got {kind or _show(label)}")
    if isinstance(label, int):
        return _bounded(src, n, str(label))
    text = label.strip()
    if not text:
        raise _BadLabel("empty label")
    try:
        whole = whole_label_text(text)
    except ValueError as exc:
        raise _BadLabel(str(exc)) from None
    if whole:
        return _bounded(src, n, text)
    if not _is_text(label):
        raise _BadLabel(f"label {_show(label)} is not valid text")
    return label


def _kinds_agree(src: str, rows: list[tuple[int, str, int | str]]) -> None:
    first_n, _, first = rows[0]
    for n, _, value in rows:
        if isinstance(value, int) != isinstance(first, int):
            a, b = ("an integer", "a class name")
            if not isinstance(value, int):
                a, b = b, a
            raise SourceError(
                f"{src}: line {n}: label {_show(value)} is {a} but line {first_n}'s label "
                f"{_show(first)} is {b}; labels must be all integers or all class names"
            )


def parse_manifest(
    src: str, text: str, on_error: str = "raise"
) -> tuple[list[tuple[int, str, int]], tuple[str, ...], list[tuple[str, str]]]:
    """Parse the manifest ``text`` of file ``src``.

    Returns:
        ``(rows, classes, skipped)``: rows of ``(line, path, label)`` in file order; the sorted
        class names (empty for integer labels); ``(path, reason)`` of lines left out under
        ``on_error: skip``.

    Raises:
        SourceError: A malformed manifest; the message names the file and the line.
    """
    jsonl = not src.lower().endswith(".csv")
    raw = _jsonl_rows(src, text) if jsonl else _csv_rows(src, text)
    rows: list[tuple[int, str, int | str]] = []
    skipped: list[tuple[str, str]] = []
    for n, path, label in raw:
        key = _path(src, n, path)
        try:
            rows.append((n, key, _label(src, n, label)))
        except _BadLabel as exc:
            if on_error == "raise":
                raise SourceError(f"{src}: line {n}: {exc}") from None
            skipped.append((key, f"line {n}: {exc}"))
    if not rows:
        return [], (), skipped
    _kinds_agree(src, rows)
    if isinstance(rows[0][2], int):
        return [(n, p, int(v)) for n, p, v in rows], (), skipped
    classes = tuple(sorted({str(v) for _, _, v in rows}))
    index = {c: i for i, c in enumerate(classes)}
    return [(n, p, index[str(v)]) for n, p, v in rows], classes, skipped

"""Parquet sources: the rows of ``.parquet`` files (as Hugging Face ``datasets`` writes them).

``SRC`` is one ``.parquet`` file or a local folder of them (searched recursively, sorted by
path: the layout of a dataset repository, ``data/train-00000-of-00004.parquet``). One row is
one sample; its columns hold its fields:

- **image** / **mask**: encoded image bytes, in a ``binary`` column or a ``struct<bytes,
  path>`` (the ``Image`` feature of ``datasets``; a cell without bytes is read from the local
  file its ``path`` names, as ``datasets`` writes images it loaded from files). Inferred:
  the column named ``image``, else the one image column; a second one named ``mask``,
  ``segmentation``, ``seg``, ``annotation`` or ``label`` is the mask (give ``--mask-classes``).
- **label**: an integer (a ``ClassLabel``: its names, from the ``huggingface`` schema
  metadata, become the store's class names and the class count) or a class name (``string``,
  ``large_string`` as Polars writes it, or a dictionary column: a pandas ``category``).
  Inferred: the column named ``label``, else the one ``ClassLabel`` column. A column named as
  a field's (``label``, ``keypoints``, ...) that holds what no field reads (a ``double``
  label) is an error naming it, not a field left out.
- **labels**: a list of integers or names (``labels``, ``tags``, or a list of ``ClassLabel``).
- **keypoints**: a list of ``[x, y]`` or ``[x, y, v]`` (``keypoints``, ``kp``, ``landmarks``).

``--columns field=column,...`` (the spec's ``columns``) says which column a field reads where
the names leave it in doubt (two ``ClassLabel`` columns, an image column called ``img``). A
sample's key is its ``__key__`` or ``id`` column, else ``FILE#ROW`` (the row's index in its
file); a file field's locator, what an error about its cell names, is ``FILE#ROW:COLUMN``.

Reads: the listing reads the footers and the small columns (keys, labels, keypoints); a build
reads an image cell by reading its row group's column (``pyarrow``), never unpacking anything
to disk. Each process keeps the row groups it read last (:data:`CACHE_BYTES`), since the
build's shuffled plan asks for rows in any order: a shard reads every row group it has a row
in (``docs/sources.md`` gives the cost). A null or oversized cell, or a row group that cannot
be read, is a per-input error that names the locator; a file whose footer or small columns
cannot be read is one that names the file (``on_error``: ``skip`` leaves it out).
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from precompute.errors import InputError, SourceError
from precompute.fields import KINDS, FieldSpec
from precompute.fields.options import ColumnClaim
from precompute.kinds.hooks import column_claims
from precompute.sources.inputs import file_kind, read_input
from precompute.sources.listing import check_policy, checkpoint, per_input
from precompute.sources.readers.packed import (
    PackedSource,
    Row,
    container_files,
    holds,
    inferred_fields,
    packed_source,
    pick_columns,
    register_packed,
)

__all__ = [
    "CACHE_BYTES",
    "ParquetSource",
    "infer_parquet_fields",
    "is_parquet_source",
    "list_parquet",
]

SUFFIX = ".parquet"
KEY_COLUMNS = ("__key__", "id")  # a sample's key, when the file has one of them
# Decoded row-group columns a process keeps (least recently used first out).
CACHE_BYTES = 256 * 2**20


def is_parquet_source(src: str) -> bool:
    """Whether ``src`` is a ``.parquet`` file or a folder of them (:func:`packed.holds`)."""
    return holds(src, SUFFIX)


# -- schemas ---------------------------------------------------------------------------------


def _open(path: str) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` of a regular file (a FIFO is refused, not opened)."""
    import pyarrow.parquet as pq  # lazy: only Parquet sources need it

    kind = file_kind(os.stat(path).st_mode)
    if kind is not None:
        raise InputError(path, f"not a regular file ({kind})")
    return pq.ParquetFile(path)


def _features(schema: Any) -> dict[str, Any]:
    """The ``datasets`` features of each column (the ``huggingface`` schema metadata)."""
    meta = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(meta)["info"]["features"] if meta else {}
    except (ValueError, KeyError, TypeError):
        return {}
    return features if isinstance(features, dict) else {}


def _class_names(feature: Any) -> tuple[str, ...] | None:
    """A ``ClassLabel``'s names, or those of a list of ``ClassLabel``; None otherwise."""
    if not isinstance(feature, dict):
        return None
    if feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list):
        return tuple(str(n) for n in feature["names"])
    inner = feature.get("feature")
    return _class_names(inner) if feature.get("_type") in ("List", "Sequence") else None


def _is_image(t: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_struct(t):
        i = t.get_field_index("bytes")
        return i >= 0 and _is_image(t.field(i).type)
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _values(t: Any) -> Any:
    """The type of a column's values: a dictionary column's (a pandas ``category``) value type."""
    import pyarrow as pa

    return t.value_type if pa.types.is_dictionary(t) else t


def _is_string(t: Any) -> bool:
    """A column of text: ``string``, ``large_string`` (Polars' default) or ``string_view``."""
    import pyarrow as pa

    t = _values(t)
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_integer(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(_values(t)))


def _is_list(t: Any, depth: int) -> bool:
    import pyarrow as pa

    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    inner = t.value_type
    if depth > 1:
        return _is_list(inner, depth - 1)
    return bool(_is_integer(inner) or pa.types.is_floating(_values(inner)) or _is_string(inner))


def _families(t: Any) -> set[str]:
    """The type families of :class:`~precompute.fields.options.ColumnClaim` that ``t`` is of."""
    tests: dict[str, Callable[[Any], bool]] = {
        "binary": _is_image,
        "integer": _is_integer,
        "string": _is_string,
        "list": lambda t: _is_list(t, 1),
        "nested_list": lambda t: _is_list(t, 2),
    }
    return {family for family, test in tests.items() if test(t)}


def _claimant(
    claims: Sequence[tuple[str, ColumnClaim]], column: str, families: set[str], named: bool
) -> str | None:
    """The kind a column goes to: a claim by name or ``ClassLabel`` first, then by priority."""
    best = None
    for kind, claim in claims:  # by priority
        if not families & set(claim.types):
            continue
        if column in claim.names or (claim.class_label and named):
            return kind
        if not claim.names and best is None:
            best = kind
    return best


def _candidates(src: str, schema: Any) -> dict[str, list[str]]:
    """Columns that could be each kind's, by the kinds' ``Kind.columns`` (in schema order).

    Raises:
        SourceError: A column is named as a kind's (``label``, ``keypoints``, ...) but holds
            values no kind reads (a ``double`` label): it is not left out without a word.
    """
    claims = column_claims()
    features = _features(schema)
    out: dict[str, list[str]] = {kind: [] for kind, _ in claims}
    for f in schema:
        named = bool(_class_names(features.get(f.name)))
        kind = _claimant(claims, f.name, _families(f.type), named)
        if kind is not None:
            out[kind].append(f.name)
            continue
        meant = [f"{k}: {', '.join(claim.types)}" for k, claim in claims if f.name in claim.names]
        if meant:
            raise SourceError(
                f"{src}: column {f.name!r} holds {f.type}, which no field of its name reads "
                f"({'; '.join(meant)}); convert it, or rename it to build without it"
            )
    return out


def _schemas(
    src: str, root: str, files: Sequence[str], on_error: str, skipped: list[tuple[str, str]]
) -> dict[str, Any]:
    """The Arrow schema of each file whose footer reads; the others are per-input errors."""
    out = {}
    for rel in files:
        checkpoint()
        try:
            with _open(os.path.join(root, rel)) as pf:
                out[rel] = pf.schema_arrow
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            per_input(src, on_error, skipped, rel, f"not a readable Parquet file ({exc})")
    if not out:
        raise SourceError(f"{src}: no readable Parquet file")
    return out


def _columns(
    src: str, schema: Any, mapping: Mapping[str, str], fields: Sequence[FieldSpec] | None
) -> dict[str, str]:
    """``field -> column``; a mapped column the file lacks is a :class:`SourceError`."""
    for field, column in mapping.items():
        if column not in schema.names:
            raise SourceError(
                f"{src}: no column {column!r} (--columns {field}={column}); the columns are "
                f"{', '.join(schema.names)}"
            )
    return pick_columns(src, "column", schema.names, _candidates(src, schema), mapping, fields)


def infer_parquet_fields(
    src: str,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    fill: int = 0,
    mapping: Mapping[str, str] | None = None,
) -> tuple[FieldSpec, ...]:
    """The fields of a Parquet source, from its first file's schema (see the module).

    A label read from a ``ClassLabel`` column gets its class count from the names.

    Raises:
        SourceError: No readable file, a mapped column the first lacks, or no
            image column.
        SpecError: A column in doubt, or an option nobody gave (the mask's class count).
    """
    root, files = container_files(src, SUFFIX, "Parquet", [])
    schema = next(iter(_schemas(src, root, files, "skip", []).values()))
    found = _columns(src, schema, mapping or {}, None)
    missing = (
        "no image column (binary, or a struct of bytes and path as datasets writes an Image); "
        f"name one with --columns image=COLUMN (columns: {', '.join(schema.names)})"
    )
    features = _features(schema)
    learned = {}
    for field, column in found.items():
        names = _class_names(features.get(column))
        if names and KINDS[field].class_names:  # an inferred field is named as its kind
            learned[field] = {"classes": len(names)}
    return inferred_fields(src, found, options or {}, fill, missing, learned)


# -- listing ---------------------------------------------------------------------------------


def _key_column(schema: Any, columns: Mapping[str, str]) -> str | None:
    return next((c for c in KEY_COLUMNS if c in schema.names and c not in columns.values()), None)


def _file_rows(
    rel: str, pf: Any, fields: Sequence[FieldSpec], columns: Mapping[str, str]
) -> list[Row]:
    """The rows of one file: its small columns read, its file fields located."""
    schema = pf.schema_arrow
    missing = [c for c in columns.values() if c not in schema.names]
    if missing:
        raise ValueError(f"no column {missing[0]!r}")
    inline = [f.name for f in fields if f.spec.source == "inline"]
    key_col = _key_column(schema, columns)
    wanted = [columns[f] for f in inline] + ([key_col] if key_col else [])
    table = pf.read(columns=sorted(set(wanted)), use_threads=False) if wanted else None
    cells = {c: table.column(c).to_pylist() for c in set(wanted)} if table is not None else {}
    sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
    starts = [sum(sizes[:g]) for g in range(len(sizes))]
    files = [f.name for f in fields if f.spec.source == "file"]
    rows = []
    for n in range(pf.metadata.num_rows):
        g = bisect.bisect_right(starts, n) - 1
        key = cells[key_col][n] if key_col else None
        rows.append(
            Row(
                f"{rel} row {n}",
                f"{rel}#{n}" if key is None else str(key),
                tuple((f, f"{rel}#{n}:{columns[f]}") for f in files),
                tuple((f"{f}.at", [rel, g, n - starts[g], columns[f]]) for f in files),
                {f: cells[columns[f]][n] for f in inline},
            )
        )
    return rows


def _declared(
    src: str, schemas: Mapping[str, Any], fields: Sequence[FieldSpec], columns: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Each label field's ``ClassLabel`` names; files that disagree are a SourceError."""
    out: dict[str, tuple[str, ...]] = {}
    for f in fields:
        if not f.spec.class_names:
            continue
        seen = {rel: _class_names(_features(s).get(columns[f.name])) for rel, s in schemas.items()}
        distinct = set(seen.values())
        if len(distinct) > 1:
            a, b = sorted(seen, key=lambda r: str(seen[r]))[:2]
            raise SourceError(f"{src}: {a} and {b} name the classes of {f.name!r} differently")
        names = next(iter(distinct), None)
        if names:
            out[f.name] = names
    return out


def list_parquet(
    src: str,
    fields: Sequence[FieldSpec],
    on_error: str = "raise",
    mapping: Mapping[str, str] | None = None,
) -> ParquetSource:
    """List a Parquet source for ``fields`` (see the module).

    A file that cannot be opened, lacks a column or whose small columns cannot be read, and
    a row whose inline cell is missing or bad, are per-input errors under ``on_error``.

    Raises:
        SourceError: No file, no usable row, a key twice, a mapped column the first file
            lacks, or (under ``raise``) a bad file or row.
        SpecError: A field's column in doubt.
    """
    check_policy(on_error)
    skipped: list[tuple[str, str]] = []
    root, files = container_files(src, SUFFIX, "Parquet", skipped)
    schemas = _schemas(src, root, files, on_error, skipped)
    columns = _columns(src, next(iter(schemas.values())), mapping or {}, fields)
    rows: list[Row] = []
    for rel in list(schemas):
        checkpoint()
        try:
            with _open(os.path.join(root, rel)) as pf:
                rows.extend(_file_rows(rel, pf, fields, columns))
        except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
            per_input(src, on_error, skipped, rel, f"cannot read its rows ({exc})")
            del schemas[rel]
    names = _declared(src, schemas, fields, columns)
    return packed_source(
        ParquetSource, src, root, fields, rows, on_error, skipped, files, columns, names
    )


# -- reads -----------------------------------------------------------------------------------


class _Groups:
    """Row-group columns this process read last, at most :data:`CACHE_BYTES` of them."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._kept: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, path: str, group: int, column: str) -> tuple[Any, int]:
        """``(the column's values in the row group, bytes read from storage now)``."""
        st = os.stat(path)
        ident = (path, st.st_size, st.st_mtime_ns, group, column)
        with self._lock:
            if ident in self._kept:
                self._kept.move_to_end(ident)
                return self._kept[ident], 0
            values, read = _read_group(path, group, column)
            self._kept[ident] = values
            self._size += values.nbytes
            while self._size > self._limit and len(self._kept) > 1:
                self._size -= self._kept.popitem(last=False)[1].nbytes
            return values, read


def _read_group(path: str, group: int, column: str) -> tuple[Any, int]:
    """The cells of ``column`` in row group ``group``, and the column chunk's size."""
    with _open(path) as pf:
        values = pf.read_row_group(group, columns=[column], use_threads=False).column(0)
        chunk = pf.metadata.row_group(group)
    values = values.combine_chunks()
    read = sum(
        chunk.column(j).total_compressed_size
        for j in range(chunk.num_columns)
        if chunk.column(j).path_in_schema.split(".")[0] == column
    )
    return values, read


_GROUPS = _Groups(CACHE_BYTES)


@dataclass(frozen=True)
class ParquetSource(PackedSource):
    """A listed Parquet source: file fields are read from their row group's column."""

    def read_cell(self, path: str, at: list[Any], where: str, max_bytes: int) -> tuple[bytes, int]:
        """The cell's bytes, and the bytes read from storage (0: this process had its group).

        Raises:
            InputError: The cell is null or larger than ``max_bytes``, or its row group
                cannot be read (naming the cell's locator, ``where``).
        """
        group, row, column = at
        try:
            values, read = _GROUPS.get(path, int(group), str(column))
        except InputError:
            raise
        except (OSError, ValueError, IndexError) as exc:  # ArrowInvalid is a ValueError
            raise InputError(where, f"cannot read its row group {group} ({exc})") from exc
        cell = values[int(row)].as_py()
        if isinstance(cell, dict):  # struct<bytes, path>: the Image feature of datasets
            if cell.get("bytes") is None and cell.get("path"):
                return _linked(path, str(cell["path"]), where, max_bytes)
            cell = cell.get("bytes")  # a null struct gives a null cell
        if cell is None:
            raise InputError(where, "the cell holds no bytes (null)")
        if len(cell) > max_bytes:
            raise InputError(where, f"larger than max_bytes = {max_bytes} bytes")
        return bytes(cell), read


def _linked(parquet: str, target: str, where: str, max_bytes: int) -> tuple[bytes, int]:
    """The bytes of the local file a cell's ``path`` names, and how many were read.

    ``datasets`` writes no bytes for an image it loaded from a local file. A relative path is
    taken from the Parquet file's folder. Read as every input is
    (:func:`~precompute.sources.inputs.read_input`: a regular file, ``max_bytes``, a deadline).

    Raises:
        InputError: The path is a URL, or its file is missing, not a regular file, unreadable,
            stuck or over ``max_bytes`` (named under ``where``, the cell's locator).
    """
    if "://" in target:
        raise InputError(where, f"the cell holds no bytes and names {target}, not a local file")
    full = os.path.join(os.path.dirname(parquet), target)  # an absolute target stays as it is
    try:
        data = read_input(full, max_bytes)
    except InputError as exc:
        raise InputError(where, f"{full}: {exc.reason}") from exc
    except OSError as exc:
        why = f"the cell holds no bytes and its path cannot be read ({exc})"
        raise InputError(where, why) from exc
    return data, len(data)


register_packed("parquet", SUFFIX, infer_parquet_fields, list_parquet)

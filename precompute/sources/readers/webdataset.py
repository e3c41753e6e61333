"""WebDataset sources: the samples of ``.tar`` shards, grouped by key as ``webdataset`` does.

``SRC`` is one ``.tar`` shard or a local folder of them (searched recursively, sorted by
path). A member ``DIR/KEY.SUFFIX`` belongs to sample ``DIR/KEY`` (its name up to the first
dot of its base name, webdataset's rule); a member without a dot is ignored. A sample's
members hold its fields:

- **image**: a ``jpg``, ``jpeg``, ``png``, ``webp`` (and the other image suffixes) member:
  the first the sample has, those the first samples have first; any image suffix the image
  kind decodes, not only those of the first samples (``--columns image=jpg`` narrows it);
- **mask**: a ``seg.png``, ``mask.png`` (``segmentation``, ``annotation``, ``label``) member
  (give ``--mask-classes``);
- **label**: a ``cls`` member (an integer or a class name as text), else the ``label`` key
  of a ``json`` member, else a ``txt`` member holding an integer;
- **labels** / **keypoints**: the ``labels`` / ``keypoints`` key of a ``json`` member.

``--columns field=suffix,...`` (the spec's ``columns``) says which member a field reads:
``image=jpg``, ``image=jpg;png`` (the first present), ``mask=seg.png``, ``label=cls``,
``keypoints=json:keypoints`` (a key of a JSON member). The store's key of a sample is its
webdataset key; a file field's locator (what an error about it names) is ``SHARD#MEMBER``.

Reads: the listing reads every shard's headers (``tarfile``, seeking over the data) and the
small members the inline fields need; a build reads a member's bytes by seeking to its
offset in the shard: no shard is unpacked, and each member is read once. A shard that cannot
be read (past some point), a sample without a member its fields need, a bad ``cls`` or
``json`` member, and a member cut short or larger than ``max_bytes`` are per-input errors
(``on_error``). Only plain ``.tar`` shards are read (``.tar.gz`` cannot be sought into).

Why ``tarfile`` and not the ``webdataset`` package: the build's shuffled plan reads samples
in any order, so it needs each member's offset; ``webdataset`` streams whole shards in order.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from precompute.errors import InputError, SourceError
from precompute.fields import FieldSpec
from precompute.fields.options import SuffixClaim
from precompute.kinds.hooks import suffix_claims
from precompute.sources.folders import IMAGE_SUFFIXES
from precompute.sources.inputs import open_input
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
    "WebDatasetSource",
    "infer_webdataset_fields",
    "is_webdataset_source",
    "list_webdataset",
]

SUFFIX = ".tar"
_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")  # webdataset's base_plus_ext, dot-less bases
_INLINE_BYTES = 1 << 20  # a cls/txt/json member larger than this is refused while listing
_PROBE_SAMPLES = 16  # samples of the first shard whose suffixes inference looks at

Member = tuple[int, int, bytes | None]  # data offset in the shard, size, content if kept
Sample = dict[str, Member]  # suffix -> member


def is_webdataset_source(src: str) -> bool:
    """Whether ``src`` is a ``.tar`` shard or a folder of them (:func:`packed.holds`)."""
    return holds(src, SUFFIX)


# -- shards ----------------------------------------------------------------------------------


def _members(tar: tarfile.TarFile, f: IO[bytes]) -> Iterator[tuple[str, str, tarfile.TarInfo]]:
    """``(key, suffix, member)`` of a shard's files named ``KEY.SUFFIX``, in shard order.

    ``tarfile`` ends a shard cut short without a word (a missing header reads as the end):
    a member past the end of the file, or no closing zero block after the last member (bytes
    that are not zeros, or the end of the file: a writer killed between two members), raise
    ``EOFError``.
    """
    end = os.fstat(f.fileno()).st_size
    for m in tar:
        checkpoint()
        if m.offset_data + m.size > end:
            raise EOFError(f"cut short in member {m.name}")
        match = _KEY.match(m.name)
        if m.isfile() and match is not None:
            yield match.group(1), match.group(2), m
    f.seek(tar.offset)
    closing = f.read(tarfile.BLOCKSIZE)
    if closing.strip(b"\0"):
        raise EOFError(f"no valid tar header at byte {tar.offset} (cut short or damaged)")
    if len(closing) < tarfile.BLOCKSIZE:
        raise EOFError(f"no end-of-archive block after byte {tar.offset} (cut short)")


def _samples(
    path: str, keep: frozenset[str] = frozenset(), limit: int | None = None
) -> tuple[dict[str, Sample], str | None]:
    """The samples of a shard by key (in shard order), and why reading stopped early (or None).

    Reads the headers (``tarfile`` seeks over the data) and the content of the members whose
    suffix is in ``keep`` (up to ``_INLINE_BYTES`` each). A key with two members of one
    suffix keeps the first; ``limit`` stops after that many samples.
    """
    samples: dict[str, Sample] = {}
    try:
        with open_input(path) as f, tarfile.open(fileobj=f, mode="r:") as tar:
            for key, suffix, m in _members(tar, f):
                if limit is not None and key not in samples and len(samples) >= limit:
                    break
                small = suffix in keep and m.size <= _INLINE_BYTES
                data = _content(tar, m) if small else None
                samples.setdefault(key, {}).setdefault(suffix, (m.offset_data, m.size, data))
    except (tarfile.TarError, EOFError, OSError) as exc:
        after = f" after {len(samples)} samples" if samples else ""
        return samples, f"not a readable tar shard{after} ({exc})"
    return samples, None


def _content(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    f = tar.extractfile(member)
    data = f.read() if f is not None else b""
    if len(data) != member.size:
        raise EOFError(f"member {member.name} cut short")
    return data


def _read_member(path: str, member: Member, max_bytes: int) -> bytes:
    """A member's bytes: kept while listing, else read at its offset in the shard."""
    offset, size, kept = member
    if kept is not None:
        return kept
    if size > max_bytes:
        raise InputError(path, f"larger than max_bytes = {max_bytes} bytes")
    with open_input(path) as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) != size:
        raise InputError(path, f"member cut short: {len(data)} of {size} bytes")
    return data


def _text(path: str, member: Member) -> str:
    """A small member's text (``cls``, ``json``); ``ValueError``: too long, or not UTF-8."""
    if member[2] is None and member[1] > _INLINE_BYTES:
        raise ValueError(f"a member of {member[1]} bytes is too long for an inline value")
    return _read_member(path, member, _INLINE_BYTES).decode("utf-8")


def _probed(claims: Sequence[tuple[str, SuffixClaim]]) -> tuple[set[str], set[str]]:
    """The suffixes whose content the claims look at: JSON members (``json:KEY``), and text."""
    keyed = {s.partition(":")[0] for _, c in claims for s in c.suffixes if ":" in s}
    return keyed, set().union(*(c.integers for _, c in claims))


def _probe(
    path: str, first: Sample, claims: Sequence[tuple[str, SuffixClaim]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The first sample's JSON members parsed, and its text members (none if one is bad)."""
    keyed, plain = _probed(claims)
    try:
        docs = {s: json.loads(_text(path, first[s])) for s in sorted(keyed) if s in first}
        texts = {s: _text(path, first[s]) for s in sorted(plain) if s in first}
    except (OSError, ValueError):  # bad first members: the listing names them
        return {}, {}
    return docs, texts


def _present(
    spec: str, claim: SuffixClaim, seen: set[str], first: tuple[dict[str, Any], dict[str, str]]
) -> str:
    """``spec`` if the first samples have it, else empty.

    Of alternatives (``jpg;png;...``) every one is kept once the first samples have any, those
    seen first (``png;jpg;...``): a later sample may hold another suffix the kind decodes (a
    converted dataset of ``.jpg`` with some ``.png``). ``--columns`` narrows them.
    """
    suffix, _, key = spec.partition(":")
    docs, texts = first
    if key:
        doc = docs.get(suffix)
        return spec if isinstance(doc, dict) and key in doc else ""
    if suffix in claim.integers:
        return spec if texts.get(suffix, "").strip().isdigit() else ""
    alternatives = spec.split(";")
    present = [s for s in alternatives if s in seen]
    return ";".join(present + [s for s in alternatives if s not in seen]) if present else ""


def _candidates(path: str, samples: Mapping[str, Sample]) -> dict[str, list[str]]:
    """The member (or JSON key) each kind could read (``Kind.suffixes``), from the first samples."""
    claims = suffix_claims()
    seen = {s for sample in samples.values() for s in sample}
    first = _probe(path, next(iter(samples.values()), {}), claims)
    out = {}
    for kind, claim in claims:
        found = [p for p in (_present(s, claim, seen, first) for s in claim.suffixes) if p]
        out[kind] = found if claim.pick == "each" else found[:1]
    return out


def _first_shard(src: str, root: str, shards: Sequence[str]) -> tuple[str, dict[str, Sample]]:
    """The first shard with samples, and its first samples."""
    probed = frozenset(set().union(*_probed(suffix_claims())))
    for rel in shards:
        samples, _ = _samples(os.path.join(root, rel), probed, _PROBE_SAMPLES)
        if samples:
            return rel, samples
    raise SourceError(f"{src}: no shard holds a sample (KEY.SUFFIX members)")


def _columns(
    src: str,
    root: str,
    shards: Sequence[str],
    mapping: Mapping[str, str],
    fields: Sequence[FieldSpec] | None,
) -> dict[str, str]:
    rel, samples = _first_shard(src, root, shards)
    present = sorted({s for sample in samples.values() for s in sample})
    found = _candidates(os.path.join(root, rel), samples)
    return pick_columns(src, "suffix", present, found, mapping, fields)


def infer_webdataset_fields(
    src: str,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    fill: int = 0,
    mapping: Mapping[str, str] | None = None,
) -> tuple[FieldSpec, ...]:
    """The fields of a WebDataset source, from its first shard's first samples.

    Raises:
        SourceError: No shard, no sample, or no image member.
        SpecError: A member in doubt (two mask suffixes), or an option nobody gave.
    """
    root, shards = container_files(src, SUFFIX, "WebDataset", [])
    found = _columns(src, root, shards, mapping or {}, None)
    missing = (
        f"no image member ({', '.join(IMAGE_SUFFIXES)}) in the first samples; "
        "name its suffix with --columns image=SUFFIX"
    )
    return inferred_fields(src, found, options or {}, fill, missing)


# -- listing ---------------------------------------------------------------------------------


def _member_of(sample: Sample, spec: str) -> str | None:
    """The suffix of ``sample`` that ``spec`` (``jpg;png``) reads: the first present."""
    return next((s for s in spec.split(";") if s in sample), None)


def _inline(path: str, sample: Sample, spec: str, doc: list[Any]) -> Any:
    """The raw value an inline field reads (``cls``, ``json:KEY``); None when absent."""
    suffix, _, key = spec.partition(":")
    if suffix not in sample:
        return None
    if not key:
        return _text(path, sample[suffix]).strip()
    if not doc:
        doc.append(json.loads(_text(path, sample[suffix])))
    if not isinstance(doc[0], dict):
        raise ValueError(f"{suffix} member is not a JSON object")
    return doc[0].get(key)


def _row(
    rel: str,
    path: str,
    key: str,
    sample: Sample,
    fields: Sequence[FieldSpec],
    cols: Mapping[str, str],
) -> Row:
    """One sample as a :class:`Row`; ``ValueError`` for a missing or unreadable member."""
    files, at, raw = [], [], {}
    doc: list[Any] = []  # the json member, parsed once
    for f in fields:
        spec = cols[f.name]
        if f.spec.source == "inline":
            raw[f.name] = _inline(path, sample, spec, doc)
            continue
        suffix = _member_of(sample, spec)
        if suffix is None:
            *alts, last = spec.split(";")
            what = f"{', '.join(alts)} or {last}" if alts else last
            raise ValueError(f"no {what} member for field {f.name!r}")
        files.append((f.name, f"{rel}#{key}.{suffix}"))
        at.append((f"{f.name}.at", [rel, *sample[suffix][:2]]))
    return Row(rel, key, tuple(files), tuple(at), raw)


def _shard_rows(
    src: str,
    rel: str,
    path: str,
    fields: Sequence[FieldSpec],
    cols: Mapping[str, str],
    on_error: str,
    skipped: list[tuple[str, str]],
) -> list[Row]:
    keep = frozenset(cols[f.name].partition(":")[0] for f in fields if f.spec.source == "inline")
    samples, broken = _samples(path, keep)
    if broken is not None:
        per_input(src, on_error, skipped, rel, broken)
    rows = []
    for key, sample in samples.items():
        try:
            rows.append(_row(rel, path, key, sample, fields, cols))
        except (ValueError, OSError) as exc:  # UnicodeDecodeError, JSON, a cut member
            per_input(src, on_error, skipped, key, f"{rel}: {exc}")
    return rows


def list_webdataset(
    src: str,
    fields: Sequence[FieldSpec],
    on_error: str = "raise",
    mapping: Mapping[str, str] | None = None,
) -> WebDatasetSource:
    """List a WebDataset source for ``fields`` (see the module).

    Raises:
        SourceError: No shard or sample, a key in two shards, or (under ``raise``) an
            unreadable shard, a sample without a member its fields need, or a bad one.
        SpecError: A field's member in doubt.
    """
    check_policy(on_error)
    skipped: list[tuple[str, str]] = []
    root, shards = container_files(src, SUFFIX, "WebDataset", skipped)
    cols = _columns(src, root, shards, mapping or {}, fields)
    rows: list[Row] = []
    for rel in shards:
        rows += _shard_rows(src, rel, os.path.join(root, rel), fields, cols, on_error, skipped)
    read = _read_suffixes(cols, rows, mapping or {})
    return packed_source(WebDatasetSource, src, root, fields, rows, on_error, skipped, shards, read)


def _read_suffixes(
    cols: Mapping[str, str], rows: Sequence[Row], mapping: Mapping[str, str]
) -> dict[str, str]:
    """``cols`` with each inferred alternative narrowed to the suffixes its samples read.

    What the source's fingerprint records: ``jpg`` for a source of ``.jpg`` images alone (as
    before every image suffix was an alternative), ``jpg;png`` for one that holds both.
    """
    used: dict[str, set[str]] = {}
    for row in rows:
        for name, locator in row.files:  # SHARD#DIR/KEY.SUFFIX
            member = locator.rpartition("#")[2].rpartition("/")[2]
            used.setdefault(name, set()).add(member.partition(".")[2])
    out = dict(cols)
    for name, spec in cols.items():
        if name not in mapping and ";" in spec and used.get(name):
            out[name] = ";".join(s for s in spec.split(";") if s in used[name])
    return out


# -- reads -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebDatasetSource(PackedSource):
    """A listed WebDataset source: a file field is read at its member's offset."""

    def read_cell(self, path: str, at: list[Any], where: str, max_bytes: int) -> tuple[bytes, int]:
        """The member's bytes, and how many were read (its size).

        Raises:
            InputError: The member is larger than ``max_bytes`` or cut short (naming its
                locator, ``where``: ``SHARD#MEMBER``).
            OSError: The shard cannot be opened.
        """
        offset, size = at
        try:
            data = _read_member(path, (int(offset), int(size), None), max_bytes)
        except InputError as exc:
            raise InputError(where, exc.reason) from exc
        return data, len(data)


register_packed("webdataset", SUFFIX, infer_webdataset_fields, list_webdataset)

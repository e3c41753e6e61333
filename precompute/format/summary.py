"""Summary of a store (``precompute inspect``): lines for people, or every attribute as JSON."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precompute.arrays.bandstats import band_lines
from precompute.checks import size_hw
from precompute.errors import PrecomputeError, StoreError, StoreMetadataError
from precompute.format.classcounts import count_lines, count_summary
from precompute.format.layout import (
    MARKER_DIR,
    StoreInfo,
    StoreLayout,
    open_store_info,
    stop_reason,
)
from precompute.format.storecheck import array_bytes
from precompute.notes import report_notes, summary_lines
from precompute.spec import BuildSpec
from precompute.splits.record import RecordedSplits, read_splits, split_lines
from precompute.storage.location import Location, location

__all__ = ["spec_summary", "store_attributes", "store_summary"]


@dataclass(frozen=True)
class _Written:
    """What the shard markers of an incomplete store say was written so far."""

    shards: int = 0
    slots: int = 0
    valid: int = 0
    skipped: int = 0


def _written(path: Path | Location, layout: StoreLayout) -> _Written:
    """The shards an incomplete store holds (their markers: written last, one per shard)."""
    markers = location(path) / MARKER_DIR / "shards"
    done = _Written()
    for key in sorted(markers.list()):
        name = key.rsplit("/", 1)[-1]
        if not name.endswith(".json") or not name[:-5].isdigit():
            continue
        try:
            marker = json.loads((markers / name).read_bytes())
            start, stop = layout.shard_range(int(name[:-5]))
        except (OSError, ValueError, StoreError):  # unreadable: not counted
            continue
        done = _Written(
            done.shards + 1,
            done.slots + stop - start,
            done.valid + int(marker.get("num_valid", 0)),
            done.skipped + len(marker.get("skipped", ())),
        )
    return done


def _status(path: Path | Location, num_shards: int, written: _Written | None) -> str:
    if written is None:
        return "complete"
    done = f"{written.shards}/{num_shards} shards written"
    stopped = stop_reason(path)
    if stopped is not None:
        return f"INCOMPLETE ({done}; the last build stopped: {stopped})"
    if written.shards == num_shards:  # killed between its last shard and the publish
        return (
            f"INCOMPLETE ({done}, not published: the build is finishing, or stopped before "
            "it published the store; re-run the same build to finish it)"
        )
    return f"INCOMPLETE ({done}; build running or interrupted)"


def _samples(info: StoreInfo, rep: dict[str, Any], written: _Written | None) -> str:
    """The samples line: slots, valid and skipped; of an incomplete store, those written."""
    n = info.layout.num_samples
    if written is not None:  # the report and num_valid are written when the build completes
        so_far = (
            f", {written.valid} valid, {written.skipped} skipped so far" if written.slots else ""
        )
        return f"samples    {n} slots planned, {written.slots} written{so_far}"
    listed = int(rep.get("skipped_listing", 0))  # inputs left out while listing: no slot
    unlisted = "1 more input" if listed == 1 else f"{listed} more inputs"
    return (
        f"samples    {n} slots, {info.num_valid} valid"
        + (f", {len(rep.get('skipped', [])) - listed} skipped" if rep else "")
        + (f", {unlisted} skipped while listing (no slot)" if listed else "")
    )


def _shown(names: list[str]) -> str:
    return ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")


def _image_lines(info: StoreInfo) -> list[str]:
    """v1: the image line; v2: one line per field (kind, per-sample shape, dtype, options)."""
    lay, spec = info.layout, info.spec
    spatial = not lay.fields or any(f.spatial for f in lay.fields)
    # the build's mode and variants act on spatial fields only (not on audio clips, labels)
    head = f"mode {spec.mode}, variants {lay.variants}" if spatial else "no spatial field"
    if not lay.fields:
        height, width = size_hw(lay.size)
        return [f"image      {height}x{width}x3 uint8, {head}"]
    lines = [f"fields     {len(lay.fields)} (format v2), {head}"]
    for f in lay.fields:
        st = f.storage(lay.size)
        opts = ", ".join(f"{k} {v}" for k, v in f.to_dict()["options"].items() if v is not None)
        shape = "x".join(map(str, st.shape)) or "scalar"
        lines.append(
            f"field      {f.name}: {f.kind}, {shape} {st.dtype}" + (f", {opts}" if opts else "")
        )
    return lines


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def storage_lines(info: StoreInfo, slots: int | None = None) -> list[str]:
    """One line per field array: its codec, stored bytes per sample, ratio to raw.

    The figures of :func:`~precompute.format.storecheck.array_bytes`: the array's files over
    the samples they hold, and raw, a sample decoded (shape x itemsize). ``slots``: the slots
    written so far (an incomplete store; None: every slot); none written: ``nothing written
    yet``.
    """
    try:
        found = array_bytes(info.path, info.layout, _array_names(info), slots)
    except OSError:
        return []
    lines = []
    for a in found:
        if a.stored is None:
            lines.append(f"storage    {a.name}: nothing written yet")
            continue
        ratio = (
            f", {a.ratio:.1f}x smaller than raw ({_kib(a.raw)})"
            if a.codec != "raw" and a.ratio
            else ""
        )
        lines.append(f"storage    {a.name}: {a.codec}, {_kib(a.stored)}/sample{ratio}")
    return lines


def _array_names(info: StoreInfo) -> list[str]:
    return [f.name for f in info.fields if f.name in info.layout.arrays]


def _printable(text: str) -> str:
    """``text`` on one line: control characters (a decoder's message may hold some) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _truncated_lines(keys: list[str], most: int) -> list[str]:
    """``report.truncated``: inputs kept with the data before their cut (an audio file)."""
    lines = [
        f"truncated  {_printable(key)}: its data ended before its header said; kept with "
        "what was there"
        for key in keys[:most]
    ]
    if len(keys) > most:
        lines.append(f"truncated  ... and {len(keys) - most} more (see --json)")
    return lines


def _split_lines(info: StoreInfo) -> list[str]:
    try:
        return split_lines(read_splits(info.path, info.layout.num_samples))
    except StoreMetadataError as exc:
        return [f"splits     {exc}"]


def _transform_lines(info: StoreInfo) -> list[str]:
    """The user's transform (``docs/transforms.md``): name, point, arguments, fingerprint."""
    t = info.spec.transform
    if t is None:
        return []
    args = ", ".join(f"{k}={v!r}" for k, v in sorted(t.args.items())) or "no arguments"
    return [f"transform  {t.name} at {t.at}, {_printable(args)}, fingerprint {t.fingerprint[:16]}"]


def store_summary(path: str | Path | Location, max_skipped: int = 50) -> str:
    """Return a multi-line summary of the store at ``path`` (complete or not; or a URL).

    Raises:
        StoreError: ``path`` is not a nostall store.
    """
    info = open_store_info(path, require_complete=False)
    lay, spec = info.layout, info.spec
    rep: dict[str, Any] = dict(info.report)
    written = None if info.attrs.get("complete") else _written(info.path, lay)
    source = (
        f"source     {rep.get('source', '?')}"
        if written is None
        else "source     named by the report, written when the build completes"
    )
    stopped = written is not None and stop_reason(info.path) is not None
    resume = (
        "resume     fix the cause and re-run the same build: it resumes from the shards "
        "written (a bad input: precompute check SRC lists every one at once)"
    )
    lines = [
        f"store      {info.path}",
        f"status     {_status(info.path, lay.num_shards, written)}",
        *([resume] if stopped else []),
        _samples(info, rep, written),
        *_image_lines(info),
        f"shards     {lay.num_shards} x {lay.shard_samples} samples, chunks of {lay.chunk_samples}",
        *storage_lines(info, None if written is None else written.slots),
        f"spec       seed {spec.seed}, on_error {spec.on_error}, max_pixels {spec.max_pixels}, "
        f"hash {info.spec_hash[:16]}",
        f"{source} (fingerprint {info.source_fingerprint[:16]})",
        *_transform_lines(info),
    ]
    fixed = " (fixed: --classes)" if spec.classes else ""  # a class list the spec gave
    if isinstance(rep.get("classes"), dict):  # v2: class names by field
        for field, names in rep["classes"].items():
            lines.append(f"classes    {field}: {len(names)}: {_shown(names)}{fixed}")
    elif rep.get("classes") == [] and rep.get("num_classes"):
        lines.append(f"classes    integer labels as given, largest {rep['num_classes'] - 1}")
    elif rep.get("classes") is not None:
        lines.append(f"classes    {len(rep['classes'])}: {_shown(rep['classes'])}{fixed}")
    lines += band_lines(rep)  # per-band statistics of spectral fields (docs/arrays.md)
    if written is None:  # a mask's pixels per class, stored when the build completes
        lines += count_lines(info.path, lay.fields, lay.num_samples)
    else:
        lines += count_lines(info.path, lay.fields, lay.num_samples, incomplete=True)
    lines += _split_lines(info)  # the split recorded with the store
    if "seconds" in rep:
        lines.append(
            f"build      {rep['seconds']:.1f} s, {rep.get('samples_per_s', 0):.1f} "
            f"samples/s, {rep.get('bytes_written', 0) / 1e6:.1f} MB written"
        )
    lines += summary_lines(report_notes(rep))  # inputs kept with something to say
    lines += _truncated_lines(rep.get("truncated", []), max_skipped)
    skipped = rep.get("skipped", [])
    for item in skipped[:max_skipped]:
        lines.append(f"skipped    {_printable(item['key'])}: {_printable(item['reason'])}")
    if len(skipped) > max_skipped:
        lines.append(f"skipped    ... and {len(skipped) - max_skipped} more (see --json)")
    return "\n".join(lines)


def _split_doc(recorded: RecordedSplits | None) -> dict[str, Any] | None:
    if recorded is None:
        return None
    return {"names": list(recorded.names), "counts": recorded.counts(), "rule": dict(recorded.rule)}


def store_attributes(path: str | Path | Location) -> dict[str, Any]:
    """Every attribute of the store at ``path`` (``inspect --json``): what the text shows.

    The group's ``nostall`` attributes, plus what lies beside them: ``splits`` (the recorded
    split: part names, counts and rule; None: none recorded; ``{"error": ...}``: damaged),
    ``class_counts`` (per counted field: counts, shares and samples holding each class,
    :func:`~precompute.format.classcounts.count_summary`; empty until the store is complete),
    ``storage`` (per field array: codec, stored and raw bytes per sample, their ratio, as the
    text's ``storage`` lines: :func:`~precompute.format.storecheck.array_bytes`) and, of an
    incomplete store, ``written`` (what its shard markers say was written: ``shards``,
    ``slots``, ``valid``, ``skipped``; nothing of the slots not written) and ``stopped`` (why
    its last build stopped; None: not recorded, running or killed).

    Raises:
        StoreError: ``path`` is not a nostall store.
    """
    info = open_store_info(path, require_complete=False)
    out = dict(info.attrs)
    n = info.layout.num_samples
    try:
        out["splits"] = _split_doc(read_splits(info.path, n))
    except StoreMetadataError as exc:
        out["splits"] = {"error": str(exc)}
    complete = bool(info.attrs.get("complete"))
    out["class_counts"] = count_summary(info.path, info.layout.fields, n) if complete else {}
    written = None if complete else _written(info.path, info.layout)
    if written is not None:
        out["written"] = dataclasses.asdict(written)
        out["stopped"] = stop_reason(info.path)
    slots = None if written is None else written.slots
    try:
        found = array_bytes(info.path, info.layout, _array_names(info), slots)
    except OSError as exc:
        out["storage"] = {"error": str(exc)}
    else:
        out["storage"] = {a.name: a.to_dict() for a in found}
    return out


_ARGS_SHOWN = 40  # characters of a transform's arguments in a one-line summary


def _transform_short(t: Any) -> list[str]:
    """``transform NAME at AT, ARGS, FINGERPRINT[:8]`` of a spec's raw ``transform``, or none.

    Two stores of one source and spec that differ only in the transform (another function,
    argument, point or version of its code) differ here.
    """
    if isinstance(t, str):
        t = {"name": t}
    if not isinstance(t, Mapping) or "name" not in t:
        return []
    args = t.get("args") or {}
    shown = (
        ", ".join(f"{k}={v!r}" for k, v in sorted(args.items()))
        if isinstance(args, Mapping)
        else ""
    )
    if len(shown) > _ARGS_SHOWN:
        shown = shown[: _ARGS_SHOWN - 3] + "..."
    parts = [f"transform {t['name']} at {t.get('at', 'stored')}", shown,
             str(t.get("fingerprint", ""))[:8]]  # fmt: skip
    return [_printable(", ".join(p for p in parts if p))]


def spec_summary(spec: Mapping[str, Any]) -> str:
    """A build spec (its canonical dict) in one line, each field as its kind describes it.

    ``16 px center-crop x1 seed 0`` (a store of images and labels, format v1);
    ``image 256 px, mask 4 classes; letterbox x1; seed 0``;
    ``audio 1 s 16 kHz logmel 64 mels, label; seed 0`` (the build's mode and variants only
    where a field lives in the image frame); a user's transform last (``transform
    mylab.xray:clahe at decoded, clip_limit=2.0, 1f3a9b0c``: name, point, arguments and the
    fingerprint's first 8 hex digits). What ``cache ls`` and the status page show.
    """
    transform = _transform_short(spec.get("transform"))
    try:
        parsed = BuildSpec.from_dict(dict(spec))
    except (PrecomputeError, ValueError, TypeError, KeyError):  # a spec of a kind not installed
        names = [
            str(f.get("name", "?")) for f in spec.get("fields") or () if isinstance(f, Mapping)
        ]
        known = [f"fields {', '.join(names)}", f"seed {spec.get('seed', 0)}"] if names else []
        return "; ".join([*known, *transform]) or "?"
    if not parsed.fields:
        v1 = f"{parsed.size} px {parsed.mode} x{parsed.variants} seed {parsed.seed}"
        return "; ".join([v1, *transform])
    fields = ", ".join(f.spec.describe(f.options, parsed.size) for f in parsed.fields)
    spatial = any(f.spatial for f in parsed.fields)
    geometry = [f"{parsed.mode} x{parsed.variants}"] if spatial else []
    return "; ".join([fields, *geometry, f"seed {parsed.seed}", *transform])

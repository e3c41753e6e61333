"""Build notes: inputs kept, but with something the user should know (never silently).

A decoder that keeps an input whose values it had to change or that look wrong calls
:func:`note` with the note's name and the input's key. A shard task collects its notes
(:func:`collecting`), its marker keeps them (resume-safe), and the finalized report holds
``notes: {name: {"count", "examples", "says"}}``; the build's summary prints one line per note.
Outside a build (a loader decoding a file) notes go nowhere.

Every note's text is said once, here or (a kind's own notes) in the kind's module through
:func:`register_note`: what happened to the inputs and what to do about it.

Inputs kept with their data cut short (``report.truncated``: an audio file whose data ended
before its header said) are listed by the report apart (every key); :func:`report_notes` adds
them as the note ``truncated``, so the build's summary and ``precompute check`` print them as
every other note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

__all__ = [
    "EXAMPLES",
    "NOTES",
    "collecting",
    "fold",
    "forward",
    "note",
    "register_note",
    "report_notes",
    "source_note",
    "summary_lines",
]

_NOTES: dict[str, str] = {
    "gray_low_bits": (
        "16-bit grey with every value below 4096 (12-bit data, e.g. X-ray): scaled by 1/257 "
        "its 8-bit pixels are at most 16 of 255 (dark); build with --bit-depth 16 (the values "
        "kept as uint16), or rescale them in a transform (docs/transforms.md)"
    ),
    "grey_as_rgb": (
        "grey sources stored as 3 equal channels; where every image is grey, --channels 1 "
        "stores them in a third of the bytes (the loaders then serve [B, 1, H, W])"
    ),
    "keypoints_outside": (
        "visible keypoints outside the image (annotations of another image size or "
        "orientation?): stored with visibility 0; coordinates are pixels of the image as "
        "decoded, EXIF orientation applied (docs/FORMAT.md)"
    ),
    "keypoints_cropped": (
        "visible keypoints cut off by --mode center-crop: stored with visibility 0; "
        "letterbox or squash keep every point"
    ),
    "audio_clipped": (
        "audio samples beyond [-1, 1] (a float WAV over full scale, or resampling overshoot) "
        "clipped to int16's range; store --features logmel, or scale the files down, to keep "
        "their peaks"
    ),
    "audio_padded": (
        "shorter than the clip length (--clip-seconds): zero-padded at the end; each sample's "
        "FIELD.length holds the part that came from the file (AudioAugment crops and masks "
        "inside it); if many clips are, a shorter --clip-seconds stores less silence"
    ),
    "audio_downmix_cancelled": (
        "multi-channel audio whose mono downmix (the mean of its channels) is at least 20 dB "
        "quieter than its channels: channels in anti-phase (one with inverted polarity) cancel "
        "out; fix the file's polarity, or build with --channels 1 (the first channel only) or "
        "--channels N (every channel kept)"
    ),
    "empty_classes": (
        "classes without a single input (a class folder holding no file this build reads, "
        "e.g. .heic; a class of --classes no input names; or every line naming the class "
        "left out): kept, so each class "
        "keeps its index, as in the other splits of the dataset, but nothing teaches them; "
        "check the folder, convert its files to a format listed in docs/manifests.md"
    ),
    "truncated": (
        "data ended before its header said (a file cut short, e.g. by an interrupted copy): "
        "kept with the data that was there; copy the file again if it should be whole "
        "(precompute inspect lists every one)"
    ),
    "single_class": (
        "every input has the same class: a classifier trained on this store has nothing to "
        "tell apart; check the source (class folders missing or empty?), or build every class "
        "into one store"
    ),
}
NOTES: Mapping[str, str] = MappingProxyType(_NOTES)  # name -> what it says (read-only view)
# name -> what a note's count counts where it is not inputs (the summary's "3 clips")
_UNITS: dict[str, str] = {"audio_padded": "clip"}
EXAMPLES = 5  # keys kept per note in the report


def register_note(name: str, says: str, unit: str = "input") -> None:
    """Add note ``name`` saying ``says`` (a kind's own notes, from the kind's module).

    ``unit``: what the note counts (``input``; ``clip``: the summary says ``3 clips``).

    Raises:
        ValueError: ``name`` is a note already, saying something else.
    """
    if _NOTES.get(name, says) != says:
        raise ValueError(f"build note {name!r} is registered already")
    _NOTES[name] = says
    if unit != "input":
        _UNITS[name] = unit


_SINK: ContextVar[dict[str, list[str]] | None] = ContextVar("nostall_build_notes", default=None)


@contextmanager
def collecting() -> Iterator[dict[str, list[str]]]:
    """Collect the notes made in this context: ``{name: [key, ...]}``."""
    sink: dict[str, list[str]] = {}
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def note(name: str, key: str) -> None:
    """Record note ``name`` (one of :data:`NOTES`) for input ``key``, if a build collects."""
    if name not in NOTES:
        raise KeyError(f"unknown build note {name!r}")
    sink = _SINK.get()
    if sink is not None:
        sink.setdefault(name, []).append(key)


def forward(made: Mapping[str, Iterable[str]], holds: Callable[[str], bool]) -> None:
    """Record again the notes ``made`` (a nested :func:`collecting`) whose name ``holds``.

    How a build keeps, of the notes made of a sample's source, only those still true of what
    it stores once the user's transform changed the values (``Kind.note_holds``).
    """
    for name, keys in made.items():
        if holds(name):
            for key in keys:
                note(name, key)


def fold(per_shard: Iterable[Mapping[str, Iterable[str]]]) -> dict[str, dict[str, Any]]:
    """The report's ``notes`` from every shard's ``{name: keys}``: counts and a few keys."""
    keys: dict[str, list[str]] = {}
    for notes in per_shard:
        for name, found in notes.items():
            keys.setdefault(name, []).extend(found)
    return {
        name: {
            "count": len(found),
            "examples": sorted(found)[:EXAMPLES],
            "says": NOTES[name],
            **({"unit": _UNITS[name]} if name in _UNITS else {}),
        }
        for name, found in sorted(keys.items())
        if name in NOTES
    }


def source_note(
    name: str, count: int, examples: Iterable[str], unit: str = "input", of: str = ""
) -> dict[str, Any]:
    """A report note about the source as a whole (not one input): ``count`` units it covers.

    ``unit``: what ``count`` counts (``input``, or ``class`` for a note about classes).
    ``of``: what the examples are when not units (``class``: the class of the inputs counted).
    """
    note: dict[str, Any] = {
        "count": count,
        "examples": sorted(examples)[:EXAMPLES],
        "says": NOTES[name],
    }
    return {**note, **({"unit": unit} if unit != "input" else {}), **({"of": of} if of else {})}


def report_notes(report: Mapping[str, Any]) -> dict[str, Any]:
    """A report's notes (``notes``), with its ``truncated`` inputs as the note ``truncated``."""
    notes = dict(report.get("notes", {}))
    truncated = report.get("truncated") or ()
    if truncated and "truncated" not in notes:
        notes["truncated"] = source_note("truncated", len(truncated), truncated)
    return notes


def summary_lines(notes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per note of a report: ``note: N inputs (e.g. KEY): what it says``."""
    lines = []
    for entry in notes.values():
        n, first = entry["count"], entry["examples"][0] if entry["examples"] else "?"
        unit = entry.get("unit", "input")
        counted = f"1 {unit}" if n == 1 else f"{n} {'classes' if unit == 'class' else unit + 's'}"
        which = f"{entry['of']} {first}" if entry.get("of") else f"e.g. {first}"
        lines.append(f"note: {counted} ({which}): {entry['says']}")
    return lines

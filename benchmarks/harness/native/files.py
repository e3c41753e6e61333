"""Which files an engine's decoders take, read from their headers; the others counted and named.

A ``tf.data`` pipeline fails on the first file ``tf.io.decode_image`` or ``tf.audio.decode_wav``
cannot read (by its format, or a damaged one: a WAV whose data chunk is shorter than its header
says), and DALI's audio decoder has no MP3. Rather than fail, or leave them out silently,
the native strategies serve the files their engine takes and say, in the report, how many they
left out and which (:meth:`Split.note`); an engine that still fails on a file names it
(:func:`first_failing`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.errors import NotApplicable

__all__ = ["Split", "audio_format", "first_failing", "image_format", "split_files"]

SHOWN = 3  # file names shown per format in a note


@dataclass(frozen=True)
class Split:
    """The items an engine takes, and the files it refuses.

    Attributes:
        kept: Indices (into the paths given) of the files it decodes.
        refused: ``(path, format)`` of each file it cannot decode.
        engine: What decodes (``tf.audio.decode_wav``, ...), for the note.
    """

    kept: tuple[int, ...]
    refused: tuple[tuple[str, str], ...]
    engine: str

    def note(self) -> str | None:
        """One line: what was left out, by format, with a few names each (None: nothing)."""
        if not self.refused:
            return None
        total = len(self.kept) + len(self.refused)
        by = Counter(fmt for _, fmt in self.refused)
        parts = []
        for fmt, n in by.most_common():
            names = [p.rsplit("/", 1)[-1] for p, f in self.refused if f == fmt][:SHOWN]
            more = ", ..." if n > SHOWN else ""
            parts.append(f"{n} {fmt} ({', '.join(names)}{more})")
        return (
            f"served {len(self.kept)} of {total} files: {self.engine} cannot decode "
            + "; ".join(parts)
        )


def split_files(paths: Sequence[str], refuse: Callable[[str], str | None], engine: str) -> Split:
    """Split ``paths`` by ``refuse(path)`` (the format it cannot decode, or None).

    Raises:
        NotApplicable: It can decode none of them (saying which formats they are).
    """
    kept, refused = [], []
    for i, path in enumerate(paths):
        fmt = refuse(path)
        if fmt is None:
            kept.append(i)
        else:
            refused.append((path, fmt))
    split = Split(tuple(kept), tuple(refused), engine)
    if not kept:
        raise NotApplicable(f"{engine} decodes none of the {len(paths)} files: {split.note()}")
    return split


def first_failing(paths: Sequence[str], probe: Callable[[str], str | None]) -> str | None:
    """``PATH: ERROR`` of the first of ``paths`` whose ``probe`` returns an error, or None.

    What names the file when an engine fails mid-epoch on an error of its own that does not.
    """
    for path in paths:
        error = probe(path)
        if error is not None:
            return f"{path}: {error}"
    return None


def _head(path: str, n: int = 16) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


IMAGE_MAGIC = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG", "PNG"),
    (b"GIF8", "GIF"),
    (b"BM", "BMP"),
)


def image_format(path: str) -> str:
    """The image format of ``path`` by its first bytes (``JPEG``, ``PNG``, ... or the suffix)."""
    head = _head(path)
    for magic, name in IMAGE_MAGIC:
        if head.startswith(magic):
            return name
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    return path.rsplit(".", 1)[-1].upper() if "." in path else "unknown"


def audio_format(path: str) -> str:
    """``FORMAT`` or ``FORMAT/SUBTYPE`` of an audio file, as libsndfile names them."""
    import soundfile as sf

    try:
        info = sf.info(path)
    except (RuntimeError, OSError):  # libsndfile cannot open it (a bad file): by suffix
        return path.rsplit(".", 1)[-1].upper() if "." in path else "unknown"
    return f"{info.format}/{info.subtype}"

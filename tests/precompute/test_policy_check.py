"""Every source lister refuses an unknown ``on_error`` with the one message naming the value.

The check is :func:`precompute.sources.listing.check_policy`; each lister runs it on a real source
before anything is listed, so a huge int or an object with a long repr still gives one short
:class:`~precompute.errors.SourceError` line.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from precompute.arrays.sources import list_arrays
from precompute.audio.source import list_audio_source
from precompute.errors import SourceError
from precompute.fields import FieldSpec
from precompute.sample import make_sample_dataset
from precompute.sources.classes import Source, list_source
from precompute.sources.fields import FieldSource, list_field_manifest, list_segmentation
from tests.precompute.audio_bytes import tone
from tests.precompute.fielddata import make_labels_manifest, make_segmentation

Lister = Callable[[Path, Any], Source | FieldSource]
AUDIO = (FieldSpec("audio", "audio", {"clip_seconds": 0.5}), FieldSpec("label", "label"))
TAGS = (FieldSpec("image", "image"), FieldSpec("labels", "labels", {"classes": 5}))


class _LongRepr:
    def __repr__(self) -> str:
        return "x" * 10_000


def _images(root: Path) -> Path:
    return make_sample_dataset(root, 4, num_classes=2, size_range=(16, 20))


def _arrays(root: Path) -> Path:
    (root / "corn").mkdir(parents=True)
    np.save(root / "corn" / "a.npy", np.zeros((4, 4, 3), np.float32))
    return root


def _audio(root: Path) -> Path:
    (root / "beep").mkdir(parents=True)
    buf = io.BytesIO()
    sf.write(buf, tone(440, 16000, 0.3), 16000, format="WAV", subtype="PCM_16")
    (root / "beep" / "a.wav").write_bytes(buf.getvalue())
    return root


LISTERS: dict[str, tuple[Callable[[Path], Path], Lister]] = {
    "images": (_images, lambda p, on: list_source(p, on)),
    "segmentation": (make_segmentation, lambda p, on: list_segmentation(p, on)),
    "fields": (make_labels_manifest, lambda p, on: list_field_manifest(p, TAGS, on)),
    "arrays": (_arrays, lambda p, on: list_arrays(p, on)),
    "audio": (_audio, lambda p, on: list_audio_source(str(p), AUDIO, on)),
}
BAD = {
    "a word": ("ignore", "got 'ignore'"),
    "a huge int": (10**5000, "got <an integer of 16610 bits>"),
    "a long repr": (_LongRepr(), "got " + "x" * 57 + "..."),
    "a list": (["raise"], "got ['raise']"),
}


@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("kind", list(LISTERS), ids=list(LISTERS))
def test_an_unknown_policy_is_one_line_naming_the_value(
    tmp_path: Path, kind: str, bad: str
) -> None:
    make, lister = LISTERS[kind]
    src = make(tmp_path / "src")
    lister(src, "skip")  # a real, listable source: only the policy is wrong below
    value, shown = BAD[bad]
    with pytest.raises(SourceError) as info:
        lister(src, value)
    message = str(info.value)
    assert message == f"on_error must be 'raise' or 'skip', {shown}"
    assert "\n" not in message and len(message) < 120

"""Audio class folders are listed by ``precompute.folders.walk_classes``: its hostile rules hold.

A FIFO with an audio name, a symlink leaving the root and a symlinked folder inside it get the
same treatment as in an image or array folder.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import soundfile as sf

from precompute.audio.source import list_audio_source
from precompute.fields import FieldSpec
from precompute.folders import ESCAPES
from tests.precompute.audio_bytes import tone

RATE = 16000
FIELDS = (FieldSpec("audio", "audio", {"clip_seconds": 0.5}), FieldSpec("label", "label"))

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")


def _wav(path: Path) -> None:
    buf = io.BytesIO()
    sf.write(buf, tone(440, RATE, 0.3), RATE, format="WAV", subtype="PCM_16")
    path.write_bytes(buf.getvalue())


def test_a_fifo_and_an_escaping_symlink_are_recorded_not_listed(tmp_path: Path) -> None:
    root, outside = tmp_path / "ds", tmp_path / "outside.wav"
    (root / "cat").mkdir(parents=True)
    (root / "dog").mkdir()
    _wav(root / "cat" / "a.wav")
    _wav(root / "dog" / "b.wav")
    _wav(outside)
    os.mkfifo(root / "cat" / "pipe.wav")
    (root / "dog" / "out.wav").symlink_to(outside)
    source = list_audio_source(str(root), FIELDS, "skip")
    assert [it.key for it in source.items] == ["cat/a.wav", "dog/b.wav"]
    assert dict(source.skipped) == {
        "cat/pipe.wav": "not a regular file (a FIFO)",
        "dog/out.wav": ESCAPES,
    }


def test_a_symlinked_folder_inside_the_root_is_followed_once(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    (root / "cat" / "real").mkdir(parents=True)
    _wav(root / "cat" / "real" / "a.wav")
    (root / "cat" / "again").symlink_to(root / "cat" / "real")
    source = list_audio_source(str(root), FIELDS, "skip")
    assert [it.key for it in source.items] == ["cat/again/a.wav"]
    assert source.skipped == ()

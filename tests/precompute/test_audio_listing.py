"""Audio class folders are listed by ``precompute.sources.folders.walk_classes``: its hostile rules
hold.

A FIFO with an audio name, a symlink leaving the root and a symlinked folder inside it get the
same treatment as in an image or array folder.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
import soundfile as sf

from precompute.audio.source import list_audio_source
from precompute.fields import FieldSpec
from precompute.sources.folders import ESCAPES
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


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["a.wav", "b.flac"],
            r"no class sub-folders \(expected SRC/<class>/<audio file>; 2 audio files lie at its "
            r"top, e.g\. a\.wav: put each class's files in a sub-folder named after the class",
        ),
        (["x.npy"], r"expected SRC/<class>/<array file>; 1 array files lie at its top"),
        (["p.jpg", "notes.txt"], r"expected SRC/<class>/<image file>; 1 image files"),
        ([], r"expected SRC/<class>/<file>: one sub-folder of image, audio or array files"),
    ],
)
def test_a_folder_without_class_folders_names_the_files_at_its_top(
    tmp_path: Path, names: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from precompute.cli import main

    for name in names:
        if name.endswith((".wav", ".flac")):
            sf.write(tmp_path / name, tone(440, 8000, 0.2), 8000)
        else:
            (tmp_path / name).write_bytes(b"\0" * 16)
    flags = ["--clip-seconds", "1"] if names[:1] == ["a.wav"] else []
    with pytest.raises(SystemExit) as stop:
        main(["build", str(tmp_path), "--out", str(tmp_path.parent / "out"), "--quiet", *flags])
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)

"""A cache spec may name kinds' options by ``precompute build``'s flags, as the CLI takes them.

``StoreLoader((src, {"clip_seconds": 1, "features": "logmel"}))`` said ``unknown build spec
field(s) ['clip_seconds', 'features']`` with no pointer. The kinds' flags now set the fields the
source has, through the CLI's own machinery (``precompute.clifields.fields_from_flags``): the
same store, the same key, as the explicit ``fields`` form.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loaders import StoreLoader
from precompute.errors import SpecError
from precompute.job import build
from service import Cache
from service.http.bodies import parse_build_body
from tests.precompute.audio_bytes import encode, tone

FIELDS = [
    {"name": "audio", "kind": "audio",
     "options": {"clip_seconds": 0.5, "representation": "logmel", "n_mels": 32}},
    {"name": "label", "kind": "label"},
]  # fmt: skip


def _sequential(request) -> None:
    build(str(request.source), str(request.out), request.spec, progress=False,
          runner="sequential")  # fmt: skip


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    for i, name in enumerate(("down", "up")):
        (tmp_path / "clips" / name).mkdir(parents=True)
        for j in range(2):
            wav = encode(tone(300 + 200 * i + 20 * j, 8000, 0.4), 8000, "wav16")
            (tmp_path / "clips" / name / f"{j}.wav").write_bytes(wav)
    return tmp_path / "clips"


def test_a_loader_spec_of_flags_is_the_store_of_the_fields_form(
    clips: Path, tmp_path: Path
) -> None:
    cache = Cache(tmp_path / "cache", builder=_sequential)
    flags = {"clip_seconds": 0.5, "features": "logmel", "n_mels": 32}
    assert cache.key_for(clips, flags) == cache.key_for(clips, {"fields": FIELDS})
    with StoreLoader((str(clips), flags), 4, cache=cache, drop_last=False) as loader:
        batch = next(iter(loader))
        assert tuple(batch["audio"].shape[:2]) == (4, 32)  # 32 mel bands, log-mel
        assert sorted(batch["label"].tolist()) == [0, 0, 1, 1]
    assert len(cache.list()) == 1  # one store, built once


def test_flags_beside_fields_and_flags_without_a_source_say_what_works(clips: Path) -> None:
    cache = Cache(clips.parent / "cache", builder=_sequential)
    with pytest.raises(SpecError, match=r"with 'fields' sets every field option itself; drop "):
        cache.key_for(clips, {"fields": FIELDS, "clip_seconds": 1})
    with pytest.raises(SpecError, match=r"--n-mels: a feature option, without effect on a wave"):
        cache.key_for(clips, {"clip_seconds": 0.5, "n_mels": 40})  # a waveform: as the CLI
    body = {"source": str(clips), "spec": {"clip_seconds": 1, "features": "logmel"}}
    with pytest.raises(SpecError, match=r"\['clip_seconds', 'features'\] are precompute build"):
        parse_build_body(body)  # the HTTP body is parsed before its source is allowed

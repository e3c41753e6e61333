"""The build's field flags and which sources have fields (no Ray: nothing is built here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from precompute.cli import UsageFailure, spec_from_options
from precompute.errors import SourceError, SpecError
from precompute.sample import make_sample_dataset
from precompute.sources.resolve import infer_fields, is_segmentation
from tests.precompute.fielddata import COLORMAP, make_keypoints_manifest, make_segmentation

FIELDS = [
    {"name": "image", "kind": "image"},
    {"name": "seg", "kind": "mask", "options": {"classes": 3}},
]


@pytest.fixture(scope="module")
def seg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_segmentation(tmp_path_factory.mktemp("seg"), 3)


def test_fields_as_json_text_or_a_yaml_file(seg: Path, tmp_path: Path) -> None:
    spec = spec_from_options(None, {"fields": json.dumps(FIELDS), "size": 16}, str(seg))
    assert [(f.name, f.kind) for f in spec.fields] == [("image", "image"), ("seg", "mask")]
    assert spec.fields[1].options["ignore_index"] == 255
    (tmp_path / "f.yaml").write_text(
        "- {name: image, kind: image}\n- {name: seg, kind: mask, options: {classes: 3}}\n"
    )
    from_file = spec_from_options(None, {"fields": str(tmp_path / "f.yaml")}, str(seg))
    assert from_file.fields == spec.fields


def test_short_flags_set_the_options_of_the_sources_fields(seg: Path, tmp_path: Path) -> None:
    flags = {"mask_classes": 4, "ignore_index": 200, "colormap": json.dumps(COLORMAP)}
    spec = spec_from_options(None, flags, str(seg))
    mask = spec.fields[1]
    assert mask.options["classes"] == 4 and mask.options["ignore_index"] == 200
    assert [list(c) for c in mask.options["colormap"]] == COLORMAP
    manifest = make_keypoints_manifest(tmp_path / "kp", 3)
    spec = spec_from_options(None, {"flip_pairs": "[[0, 1]]"}, str(manifest))
    assert [f.name for f in spec.fields] == ["image", "keypoints", "label"]
    assert spec.fields[1].options["flip_pairs"] == ((0, 1),)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"fields": "[{"}, r"--fields: not JSON"),
        ({"fields": "[]"}, r"--fields must be a non-empty list"),
        (
            {"fields": json.dumps(FIELDS), "mask_classes": 3},
            r"--fields sets every field option itself; drop --mask-classes \(mask option "
            r"'classes'\), or give each in its field's \"options\" in --fields",
        ),
        (
            {"fields": json.dumps(FIELDS), "clip_seconds": 1.0, "n_mels": 40},
            r"drop --clip-seconds \(audio option 'clip_seconds'\), --n-mels \(audio option",
        ),
        ({"colormap": "[[0, 0, 0]]", "mask_classes": 4}, r"fields\.mask\.colormap has 1 colours"),
        ({"mask_classes": 0}, r"fields\.mask\.classes"),
        ({"flip_pairs": "[[0, 1]]"}, r"options for field\(s\) \['keypoints'\]"),
    ],
)
def test_bad_field_flags_are_one_line_usage_errors(
    seg: Path, flags: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageFailure, match=message):
        spec_from_options(None, dict(flags), str(seg))


def test_v1_sources_have_no_fields_and_refuse_field_flags(tmp_path: Path) -> None:
    folder = make_sample_dataset(tmp_path / "cls", 4, size_range=(8, 8), manifest=True)
    assert infer_fields(str(folder)) == ()
    assert infer_fields(str(folder / "manifest.csv")) == ()  # path,label: v1 as before
    with pytest.raises(SpecError, match=r"field options \(mask\) need a segmentation folder"):
        infer_fields(str(folder), {"mask": {"classes": 4}})


def test_a_segmentation_folder_is_exactly_images_and_masks(seg: Path, tmp_path: Path) -> None:
    assert is_segmentation(str(seg))
    (seg / "README.txt").write_text("files beside the folders do not count\n")
    assert is_segmentation(str(seg))
    other = make_segmentation(tmp_path / "three", 1)
    (other / "extra").mkdir()
    assert not is_segmentation(str(other))  # three class folders: a v1 source
    with pytest.raises(SpecError, match=r"segmentation folder.*--mask-classes"):
        infer_fields(str(seg))


def test_the_fingerprint_of_fields_covers_every_file_and_value(tmp_path: Path) -> None:
    from precompute.fields import FieldSpec
    from precompute.sources.resolve import resolve_build
    from precompute.spec import BuildSpec

    mask = (FieldSpec("image", "image"), FieldSpec("mask", "mask", {"classes": 4}))

    def fp(src: Path, content: bool) -> str:
        spec = BuildSpec(fields=mask if src.is_dir() else ())
        return resolve_build(str(src), spec, content)[2]

    manifest = make_keypoints_manifest(tmp_path / "a", 3)
    copy = tmp_path / "b"
    shutil.copytree(tmp_path / "a", copy)
    assert fp(manifest, True) == fp(copy / manifest.name, True)  # same contents
    text = manifest.read_text()
    (copy / manifest.name).write_text(text.replace('"label": "cat"', '"label": "dog"', 1))
    assert fp(manifest, True) != fp(copy / manifest.name, True)  # an inline value
    seg = make_segmentation(tmp_path / "seg", 2)
    before = fp(seg, True)
    (seg / "masks" / "001.png").write_bytes((seg / "masks" / "000.png").read_bytes())
    assert fp(seg, True) != before  # a mask file


def test_a_bad_field_flag_names_its_own_flags(tmp_path: Path) -> None:
    """A refused --flip-pairs hinted at --mask-classes; each kind names its own flags."""
    manifest = make_keypoints_manifest(tmp_path / "kp", 3)
    with pytest.raises(UsageFailure, match=r"\(on the command line: --flip-pairs '\[\[a, b\]") as e:
        spec_from_options(None, {"flip_pairs": "[[0, 0]]"}, str(manifest))
    assert "--mask-classes" not in str(e.value)
    with pytest.raises(UsageFailure, match=r"\(on the command line: --mask-classes N"):
        spec_from_options(None, {"mask_classes": 0}, str(make_segmentation(tmp_path / "s", 3)))


def test_audio_options_for_a_folder_of_images_or_of_images_and_audio(tmp_path: Path) -> None:
    import numpy as np
    import soundfile as sf

    folder = make_sample_dataset(tmp_path / "cls", 4, size_range=(8, 8))
    audio = {"audio": {"clip_seconds": 1.0}}
    with pytest.raises(SpecError, match=r"audio options \(--clip-seconds and the others\) need"):
        infer_fields(str(folder), audio)
    cls = sorted(p for p in folder.iterdir() if p.is_dir())[0]
    sf.write(cls / "zz.wav", np.zeros(800, np.float32), 8000)  # a recording beside the images
    with pytest.raises(SourceError, match=r"mixes image files \(4, .*\) and audio files \(1, "):
        infer_fields(str(folder), audio)

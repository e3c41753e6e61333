"""Rules a kind declares, not a kind's name: a kind registered here gets them with no other change.

``count_option`` (a manifest's rows must agree on a value's entry count) and ``class_index``
(the target ``AudioAugment`` mixes) are attributes of :class:`precompute.fields.Kind`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import precompute.audio.kind  # noqa: F401  (registers the audio kind)
from loaders.augment.audio.fields import check_audio_policies
from loaders.augment.audio.policy import AudioAugment
from loaders.augment.errors import AugmentError
from precompute.errors import SourceError
from precompute.fields import FieldSpec, Kind, Storage, register_kind
from precompute.fields import kinds as kinds_module
from precompute.fields.options import Option, check_count, optional
from precompute.sources.fields import list_field_manifest


class Polyline(Kind):
    """Test kind: ``(vertices, 2)`` float32 points, the count fixed by option ``vertices``."""

    name = "polyline_test"
    source = "inline"
    count_option = "vertices"
    options = {"vertices": Option(None, optional(check_count))}

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((opts["vertices"] or 0, 2), "float32", 0.0)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(value, np.float32)

    def parse_inline(self, raw: Any) -> Any:
        return tuple(tuple(float(c) for c in point) for point in raw)


class Grade(Kind):
    """Test kind: one class index per sample, under another name than ``label``."""

    name = "grade_test"
    source = "inline"
    mixup, cutmix = "blend", "area"
    class_index = True
    options = {"classes": Option(None, optional(check_count))}

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((), "int64", -1)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(value, np.int64)

    def parse_inline(self, raw: Any) -> Any:
        return int(raw)


@pytest.fixture(autouse=True)
def kinds() -> Iterator[None]:
    """The two test kinds registered for one test, removed after it."""
    register_kind(Polyline())
    register_kind(Grade())
    yield
    del kinds_module._KINDS["polyline_test"], kinds_module._KINDS["grade_test"]


def test_a_kinds_count_option_makes_manifest_rows_agree(tmp_path: Path) -> None:
    rows = ['{"image": "0.jpg", "line": [[1, 2], [3, 4]]}', '{"image": "1.jpg", "line": [[1, 2]]}']
    (tmp_path / "m.jsonl").write_text("\n".join(rows) + "\n")
    line = FieldSpec("line", "polyline_test")
    with pytest.raises(SourceError, match=r"line 2: 1 polyline_test in 'line'; every .* needs 2"):
        list_field_manifest(tmp_path / "m.jsonl", [FieldSpec("image", "image"), line])


def test_audio_mixing_finds_a_class_index_field_of_any_kind_name() -> None:
    fields = [
        FieldSpec("audio", "audio", {"clip_seconds": 1.0}),
        FieldSpec("grade", "grade_test", {"classes": 4}),
    ]
    augment = AudioAugment(mixup_alpha=0.4, num_classes=5)
    with pytest.raises(AugmentError, match="the label field has 4 classes"):
        check_audio_policies(fields, augment, None)

"""Source readers and command-line flags are the kinds': registered, then asked by name-free code.

A test kind registers a reader of ``*.tally`` files (one ``path value`` line per image) and a
flag; :func:`precompute.sources.resolve.infer_fields` and ``list_build_source`` read such a
source through the reader, and the field flags set the kind's option.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from PIL import Image

from precompute.clifields import fields_from_flags, kind_flags
from precompute.fields import FieldSpec, Kind, Storage, register_kind
from precompute.fields import kinds as kinds_module
from precompute.fields.options import Flag, Option, integer
from precompute.kinds import hooks
from precompute.kinds.hooks import SourceQuery, SourceReader
from precompute.sources.fields import FieldItem, FieldSource
from precompute.sources.resolve import infer_fields, list_build_source
from precompute.spec import BuildSpec


class Tally(Kind):
    """Test kind: one int32 count per image, scaled by option ``scale``."""

    name = "tally_src_test"
    source = "inline"
    options = MappingProxyType({"scale": Option(1, integer(1, 100))})
    flags = MappingProxyType({"tally_scale": Flag("scale", "Tally: the scale.", int)})

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((), "int32", 0)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(int(value) * opts["scale"], np.int32)

    def parse_inline(self, raw: Any) -> Any:
        return int(raw)


SEEN: list[SourceQuery] = []


def _accepts(q: SourceQuery) -> bool:
    SEEN.append(q)
    return q.src.endswith(".tally")


def _infer(q: SourceQuery) -> tuple[FieldSpec, ...]:
    opts = dict(q.options.get("tally_src_test", {}))
    return FieldSpec("image", "image", {"fill": q.fill}), FieldSpec("n", "tally_src_test", opts)


def _lister(q: SourceQuery) -> FieldSource:
    root = os.path.dirname(q.src)
    rows = [line.split() for line in Path(q.src).read_text().splitlines()]
    items = tuple(FieldItem(p, (("image", p),), (("n", int(v)),)) for p, v in sorted(rows))
    return FieldSource(root, ("image", "n"), items)


@pytest.fixture(autouse=True)
def tally() -> Iterator[None]:
    register_kind(Tally())
    hooks.register_source(SourceReader("tally", _accepts, _infer, _lister))
    SEEN.clear()
    yield
    del kinds_module._KINDS["tally_src_test"], hooks._SOURCES["tally"]


def _source(tmp_path: Path) -> str:
    for i in range(3):
        Image.new("RGB", (8, 8), (i, 0, 0)).save(tmp_path / f"{i}.png")
    (tmp_path / "a.tally").write_text("2.png 5\n0.png 1\n1.png 3\n")
    return str(tmp_path / "a.tally")


def test_a_registered_reader_infers_and_lists_its_source(tmp_path: Path) -> None:
    src = _source(tmp_path)
    fields = infer_fields(src, {"tally_src_test": {"scale": 2}}, fill=9)
    assert [f.to_dict() for f in fields] == [
        {"name": "image", "kind": "image", "options": {"channels": 3, "fill": 9}},
        {"name": "n", "kind": "tally_src_test", "options": {"scale": 2}},
    ]
    source, spec = list_build_source(src, BuildSpec(size=8, fields=fields))
    assert [(it.key, it.value("n")) for it in source.items] == [
        ("0.png", 1), ("1.png", 3), ("2.png", 5)
    ]  # fmt: skip
    assert spec.fields == fields
    assert SEEN[-1].fields == fields and SEEN[-1].text is None  # not a CSV/JSONL manifest


def test_a_kinds_flag_sets_its_option_on_the_inferred_field(tmp_path: Path) -> None:
    assert kind_flags()["tally_scale"] == (
        "tally_src_test",
        Flag("scale", "Tally: the scale.", int),
    )
    flags: dict[str, Any] = {"tally_scale": 4, "size": None}
    fields = fields_from_flags(_source(tmp_path), flags, fill=0)
    assert fields is not None and fields[1]["options"] == {"scale": 4}
    assert "tally_scale" not in flags  # taken by the field flags


def test_two_kinds_declaring_one_flag_are_named(tmp_path: Path) -> None:
    class Twin(Tally):
        name = "tally_twin_test"

    register_kind(Twin())
    try:  # a warning, not an error: raised when the CLI is imported, it stopped every command
        with pytest.warns(
            RuntimeWarning,
            match=r"^the flag --tally-scale is declared by kinds 'tally_src_test' and "
            r"'tally_twin_test': it sets 'tally_src_test''s option",
        ):
            assert kind_flags()["tally_scale"][0] == "tally_src_test"
    finally:
        del kinds_module._KINDS["tally_twin_test"]

"""Property tests of the parsers that face users: manifests (CSV, JSONL) and build specs.

Any input gives a value or the package's own error (SourceError, SpecError, a one-line usage
error), never another exception; and what parses keeps its invariants.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from precompute import SourceError, SpecError
from precompute.cli import UsageFailure, spec_from_options
from precompute.sources.classes import list_source
from precompute.sources.manifests import MAX_LABEL, parse_manifest
from precompute.spec import BuildSpec

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
labels = st.one_of(
    json_values,
    st.integers(min_value=-3, max_value=MAX_LABEL + 3),
    st.sampled_from(["", " ", "7", "-0", "007", "cat", "²", "1e3", "0x1", "\udcff", "dog"]),
)
paths = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["a.jpg", "b/c.png", "/abs/x.jpg", "http://h/x.jpg", "", "a\0b", "\udcfe"]),
    json_values,
)


def _check_rows(rows: list[tuple[int, str, int]], classes: tuple[str, ...]) -> None:
    for _, path, label in rows:
        assert isinstance(path, str) and path and "\0" not in path
        assert isinstance(label, int) and 0 <= label <= MAX_LABEL
        assert not classes or label < len(classes)
    assert list(classes) == sorted(set(classes))


def _parse(name: str, text: str, on_error: str) -> None:
    try:
        rows, classes, skipped = parse_manifest(name, text, on_error)
    except SourceError as exc:
        assert name in str(exc) and "\n" not in str(exc)
        return
    _check_rows(rows, classes)
    assert on_error == "skip" or not skipped
    for key, reason in skipped:
        assert key and reason.startswith("line ")


@SETTINGS
@given(text=st.text(), on_error=st.sampled_from(["raise", "skip"]))
@example(text="a.jpg,\x00\n", on_error="raise")
@example(text="a.jpg,²\n", on_error="raise")
@example(text="p,l\na.jpg,99999999999999999999999\n", on_error="skip")
def test_any_csv_text_parses_or_is_a_source_error(text: str, on_error: str) -> None:
    _parse("m.csv", text, on_error)


@SETTINGS
@given(text=st.text(), on_error=st.sampled_from(["raise", "skip"]))
@example(text='{"path": "a", "label": 1}\u2028\n', on_error="raise")
@example(text="[" * 100_000, on_error="raise")
def test_any_jsonl_text_parses_or_is_a_source_error(text: str, on_error: str) -> None:
    _parse("m.jsonl", text, on_error)


@SETTINGS
@given(
    rows=st.lists(st.tuples(paths, labels), max_size=6),
    on_error=st.sampled_from(["raise", "skip"]),
)
def test_structured_jsonl_parses_or_is_a_source_error(
    rows: list[tuple[Any, Any]], on_error: str
) -> None:
    text = "".join(json.dumps({"path": p, "label": lab}) + "\n" for p, lab in rows)
    _parse("m.jsonl", text, on_error)


@SETTINGS
@given(
    rows=st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12)), max_size=6),
    header=st.booleans(),
    on_error=st.sampled_from(["raise", "skip"]),
)
def test_structured_csv_parses_or_is_a_source_error(
    rows: list[tuple[str, str]], header: bool, on_error: str
) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf)
    if header:
        writer.writerow(["path", "label"])
    writer.writerows(rows)
    _parse("m.csv", buf.getvalue(), on_error)


@SETTINGS
@given(
    names=st.lists(st.sampled_from(["cat", "dog", "emu", "7x"]), min_size=1, max_size=8),
    ints=st.lists(st.integers(0, MAX_LABEL), min_size=1, max_size=8),
)
def test_valid_manifests_keep_their_labels(names: list[str], ints: list[int]) -> None:
    text = "".join(json.dumps({"path": f"{i}.jpg", "label": n}) + "\n" for i, n in enumerate(names))
    rows, classes, _ = parse_manifest("m.jsonl", text)
    assert classes == tuple(sorted(set(names)))
    assert [classes[lab] for _, _, lab in rows] == names
    text = "".join(f"{i}.jpg,{n}\n" for i, n in enumerate(ints))
    rows, classes, _ = parse_manifest("m.csv", text)
    assert classes == () and [lab for _, _, lab in rows] == ints


@SETTINGS
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".csv", ".jsonl", ".ndjson"]))
@example(data=b"\xef\xbb\xbfpath,label\na.jpg,1\n", suffix=".csv")
@example(data=b"a.jpg,1\n\xff\n", suffix=".csv")
def test_any_manifest_file_lists_or_is_a_source_error(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m" + suffix)
        with open(path, "wb") as f:
            f.write(data)
        try:
            src = list_source(path, on_error="skip")
        except SourceError as exc:
            assert path in str(exc)
            return
        keys = [k for k, _ in src.items]
        assert keys == sorted(set(keys)) and len(keys) > 0
        json.dumps([src.items, src.classes, src.skipped]).encode("utf-8")  # storable as is


spec_keys = st.sampled_from(
    [f.name for f in BuildSpec.__dataclass_fields__.values() if f.name != "extra"]
    + ["colour", "augment"]
)
spec_values = st.one_of(
    json_values,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(["letterbox", "squash", "skip", "raise", 8, 32, 64, 256, 2]),
    st.fixed_dictionaries(
        {},
        optional={
            "scale": st.one_of(json_values, st.lists(st.floats(), min_size=2, max_size=2)),
            "brightness": json_values,
            "ratio": st.lists(st.integers(-(2**1100), 2**1100), min_size=2, max_size=2),
        },
    ),
)


@SETTINGS
@given(data=st.one_of(st.dictionaries(spec_keys, spec_values, max_size=6), json_values))
@example(data={"size": 10**5000})
@example(data={"variants": 2, "augment": {"brightness": 10**400}})
@example(data={1: 2, "a": 3})
@example(data={"variants": 2, "augment": {1: 2, "x": 1}})
def test_any_spec_dict_parses_or_is_a_spec_error(data: Any) -> None:
    try:
        spec = BuildSpec.from_dict(data)
    except SpecError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    again = BuildSpec.from_dict(json.loads(spec.canonical_json()))
    assert again == spec and again.digest() == spec.digest()
    assert BuildSpec.from_dict(spec.to_dict()) == spec


@SETTINGS
@given(text=st.one_of(st.text(max_size=200).map(str.encode), st.binary(max_size=100)))
@example(text=b"size: 1e999\n")
@example(text=b"{1: 2, a: 3}\n")
@example(text=b"augment: !!python/object:os.system {}\n")
@example(text=b"size: \xff\n")
@example(text=b"size: [1, 2\n")
def test_any_spec_file_parses_or_is_a_usage_error(text: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spec.yaml")
        with open(path, "wb") as f:
            f.write(text)
        try:
            spec_from_options(path, {})
        except UsageFailure as exc:
            assert "\n" not in exc.format_message() and path in exc.format_message()

"""Manifest labels (issue 11, items 6 and 7): one kind per manifest, bounded integers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from precompute import SourceError, list_source
from precompute.sources.manifests import MAX_LABEL


def _csv(tmp_path: Path, text: str) -> str:
    (tmp_path / "m.csv").write_text(text)
    return str(tmp_path / "m.csv")


def _jsonl(tmp_path: Path, docs: list[object]) -> str:
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return str(tmp_path / "m.jsonl")


def test_integer_labels_are_kept_as_given_without_a_class_list(tmp_path: Path) -> None:
    src = list_source(_csv(tmp_path, "path,label\na.jpg,2\nb.jpg,10\nc.jpg,007\n"))
    assert src.items == (("a.jpg", 2), ("b.jpg", 10), ("c.jpg", 7))
    assert src.classes == () and src.num_classes == 11


def test_one_name_among_integers_is_refused_naming_its_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"m\.csv: line 4: label \"cat\" is a class name but "):
        list_source(_csv(tmp_path, "path,label\na.jpg,2\nb.jpg,10\nc.jpg,cat\nd.jpg,1\n"))
    with pytest.raises(SourceError, match=r"line 2: label 3 is an integer but line 1's"):
        list_source(_jsonl(tmp_path, [{"path": "a", "label": "dog"}, {"path": "b", "label": 3}]))
    with pytest.raises(SourceError, match="all integers or all class names"):
        list_source(_csv(tmp_path, "a.jpg,2\nb.jpg,x\n"), on_error="skip")  # not a line error


@pytest.mark.parametrize(
    ("label", "reason"),
    [
        ("", "empty label"),
        ("   ", "empty label"),
        (None, "got null"),
        ([1], "got a list"),
        ({"name": "cat"}, "got an object"),
        (True, "got true"),
        (2.5, "got 2.5"),
    ],
)
def test_unusable_labels_are_line_errors_under_the_policy(
    tmp_path: Path, label: object, reason: str
) -> None:
    docs = [{"path": "a.jpg", "label": "cat"}, {"path": "b.jpg", "label": label}]
    with pytest.raises(SourceError, match=f"m.jsonl: line 2: .*{reason}"):
        list_source(_jsonl(tmp_path, docs))
    src = list_source(_jsonl(tmp_path, docs), on_error="skip")
    assert src.items == (("a.jpg", 0),) and src.classes == ("cat",)
    assert len(src.skipped) == 1 and src.skipped[0][0] == "b.jpg"
    assert src.skipped[0][1].startswith("line 2: ") and reason in src.skipped[0][1]


@pytest.mark.parametrize("label", ["1.0", "0.5", "+3", "1e3", "-2.5", ".5"])
def test_number_text_that_is_no_integer_is_a_line_error_not_a_class_name(
    tmp_path: Path, label: str
) -> None:
    """pandas writes an integer column with a gap as 1.0, 2.0, ..., 10.0: as class names they
    would sort as text (10.0 before 2.0) and every label would be wrong."""
    text = f"path,label\na.jpg,0\nb.jpg,{label}\nc.jpg,2\n"
    with pytest.raises(SourceError, match=r"line 3: label '.*' is a number but not an integer"):
        list_source(_csv(tmp_path, text))
    src = list_source(_csv(tmp_path, text), on_error="skip")
    assert src.items == (("a.jpg", 0), ("c.jpg", 2)) and src.classes == ()
    assert src.skipped[0][0] == "b.jpg" and "not an integer" in src.skipped[0][1]


def test_a_field_manifests_number_text_label_is_a_line_error(tmp_path: Path) -> None:
    from precompute.fields import FieldSpec
    from precompute.sources.fields import list_field_manifest

    (tmp_path / "m.csv").write_text("image,label\na.png,1.0\nb.png,2.0\n")
    fields = [FieldSpec("image", "image"), FieldSpec("label", "label")]
    with pytest.raises(SourceError, match=r"line 2: label '1\.0' is a number but not an integer"):
        list_field_manifest(str(tmp_path / "m.csv"), fields)


@pytest.mark.parametrize(
    "text",
    [
        "filename,species\npics/a.png,dog\npics/b.png,cat\n",  # names, paths with a dot
        "file,breed\na.jpg,dog\n",
        "id,label\n0001,3\n0002,4\n",  # no dot in any path: the label tells
        "path,class\na.jpg,1\n",
    ],
)
def test_a_header_not_named_path_label_is_refused_not_read_as_a_sample(
    tmp_path: Path, text: str
) -> None:
    """Read as data, it was a missing file and a class of its own (every index shifted)."""
    for policy in ("raise", "skip"):
        with pytest.raises(SourceError, match=r"m\.csv: line 1 \(.*\) looks like a header: name"):
            list_source(_csv(tmp_path, text), on_error=policy)


def test_rows_that_only_look_like_a_header_are_data(tmp_path: Path) -> None:
    src = list_source(_csv(tmp_path, "cat_photo,cat\ndog_photo,dog\n"))  # no dot anywhere
    assert src.items == (("cat_photo", 0), ("dog_photo", 1))
    with pytest.raises(
        SourceError, match=r"line 2: label 1 is an integer but line 1.s label \"cat\""
    ):
        list_source(_csv(tmp_path, "b.jpg,cat\na.jpg,1\nc.jpg,2\n"))  # a path: not a header


def test_empty_csv_label_is_a_line_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="line 3: empty label"):
        list_source(_csv(tmp_path, "path,label\na.jpg,0\nb.jpg,\n"))
    src = list_source(_csv(tmp_path, "path,label\na.jpg,0\nb.jpg,\n"), on_error="skip")
    assert src.items == (("a.jpg", 0),) and src.skipped == (("b.jpg", "line 3: empty label"),)


def test_large_integer_label_needs_no_class_list(tmp_path: Path) -> None:
    src = list_source(_csv(tmp_path, "a.jpg,3000000\nb.jpg,0\n"))
    assert src.classes == () and src.num_classes == 3_000_001
    assert dict(src.items) == {"a.jpg": 3_000_000, "b.jpg": 0}


@pytest.mark.parametrize("label", [str(MAX_LABEL + 1), "10000000000", "9" * 5000])
def test_label_over_the_limit_is_refused(tmp_path: Path, label: str) -> None:
    with pytest.raises(SourceError, match=f"line 2: label .* is larger than MAX_LABEL {MAX_LABEL}"):
        list_source(_csv(tmp_path, f"a.jpg,1\nb.jpg,{label}\n"))


def test_label_at_the_limit_is_kept(tmp_path: Path) -> None:
    src = list_source(_jsonl(tmp_path, [{"path": "a.jpg", "label": MAX_LABEL}]))
    assert src.items == (("a.jpg", MAX_LABEL),) and src.classes == ()


def test_huge_label_is_refused_quickly_with_little_memory(tmp_path: Path) -> None:
    """Label 10**10 once built a class list of every integer (killed for memory)."""
    path = _csv(tmp_path, "a.jpg,10000000000\n")
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from precompute.sources.classes import list_source\n"
        "from precompute.errors import SourceError\n"
        f"try:\n    list_source({path!r})\nexcept SourceError as exc:\n    print(exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "line 1: label 10000000000 is larger than MAX_LABEL" in run.stdout


def test_cli_names_the_manifest_line_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from precompute.cli import main

    path = _csv(tmp_path, "a.jpg,2\nb.jpg,10\nc.jpg,cat\n")
    with pytest.raises(SystemExit) as info:
        main(["build", path, "--out", str(tmp_path / "out" / "s")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert f'{path}: line 3: label "cat" is a class name' in err
    assert not (tmp_path / "out").exists()


def test_unknown_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="on_error must be 'raise' or 'skip', got 'ignore'"):
        list_source(_csv(tmp_path, "a.jpg,1\n"), on_error="ignore")

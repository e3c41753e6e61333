"""Listing sources: class folders, manifests, symlinks, fingerprints, bad paths."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from precompute import SourceError, fingerprint, list_source
from precompute.sample import make_sample_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_dataset(
        tmp_path_factory.mktemp("src"), 24, num_classes=3, size_range=(16, 24), manifest=True
    )


def test_folder_source(dataset: Path) -> None:
    src = list_source(str(dataset))
    assert src.classes == ("circles", "crosses", "dots")
    assert len(src) == 24
    assert [k for k, _ in src.items] == sorted(k for k, _ in src.items)
    for key, label in src.items:
        assert key.split("/")[0] == src.classes[label]
        assert Path(src.locate(key)).is_file()
    assert src.skipped == ()


def test_csv_and_jsonl_manifests_match_folder(dataset: Path, tmp_path: Path) -> None:
    folder = list_source(dataset)
    csv_src = list_source(str(dataset / "manifest.csv"))
    assert csv_src.items == folder.items
    assert csv_src.root == str(dataset)
    lines = [
        json.dumps({"path": str(dataset / k), "label": folder.classes[lab]})
        for k, lab in folder.items
    ]
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    js = list_source(str(tmp_path / "m.jsonl"))
    assert js.classes == folder.classes  # string labels -> sorted class names
    assert [lab for _, lab in js.items] == [lab for _, lab in folder.items]
    assert js.read_bytes(js.items[0][0]) == (dataset / folder.items[0][0]).read_bytes()


def test_escaping_symlinks_not_followed(dataset: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    outside = tmp_path / "outside.jpg"
    outside.write_bytes((dataset / list_source(dataset).items[0][0]).read_bytes())
    (root / "a" / "real.jpg").write_bytes(outside.read_bytes())
    os.symlink(outside, root / "a" / "escape.jpg")
    os.symlink(tmp_path, root / "b" / "loop_out")
    os.symlink(root / "a" / "real.jpg", root / "b" / "inside.jpg")
    src = list_source(root)
    assert src.items == (("a/real.jpg", 0), ("b/inside.jpg", 1))
    assert {k for k, _ in src.skipped} == {"a/escape.jpg", "b/loop_out"}
    assert all("symlink" in reason for _, reason in src.skipped)


def test_manifest_paths_through_escaping_symlinks_are_not_followed(
    dataset: Path, tmp_path: Path
) -> None:
    root = tmp_path / "ds"
    root.mkdir()
    outside = tmp_path / "outside.jpg"
    outside.write_bytes((dataset / list_source(dataset).items[0][0]).read_bytes())
    (root / "real.jpg").write_bytes(outside.read_bytes())
    os.symlink(outside, root / "escape.jpg")
    manifest = root / "m.csv"
    manifest.write_text(f"path,label\nreal.jpg,0\nescape.jpg,1\n{outside},2\n")
    src = list_source(manifest)
    # an absolute path names its file on purpose; a relative one may not leave through a link
    assert src.items == ((str(outside), 2), ("real.jpg", 0))
    assert src.skipped == (("escape.jpg", "symlink leaves the source root; not followed"),)


def test_class_folders_of_escaping_symlinks_only_say_what_was_left_out(
    dataset: Path, tmp_path: Path
) -> None:
    """A split made of links to the full set: not "no image files", but why none was taken."""
    first = dataset / list_source(dataset).items[0][0]
    (tmp_path / "split" / "cat").mkdir(parents=True)
    os.symlink(first, tmp_path / "split" / "cat" / "1.jpg")
    with pytest.raises(SourceError, match=r"no image files .* found under the class folders "
                       r"\(1 left out while listing, e.g. cat/1\.jpg: symlink leaves the "
                       r"source root; not followed\)"):  # fmt: skip
        list_source(tmp_path / "split")


def test_fingerprint(dataset: Path, tmp_path: Path) -> None:
    src = list_source(dataset)
    assert fingerprint(src) == fingerprint(list_source(dataset))
    assert len(fingerprint(src, content_hash=True)) == 64
    copy = tmp_path / "copy"
    for key, _ in src.items:
        (copy / key).parent.mkdir(parents=True, exist_ok=True)
        (copy / key).write_bytes((dataset / key).read_bytes())
    other = list_source(copy)
    assert fingerprint(other, content_hash=True) == fingerprint(src, content_hash=True)
    before = fingerprint(other)
    os.utime(copy / src.items[0][0], ns=(1, 1))
    assert fingerprint(list_source(copy)) != before


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: p, "no class sub-folders"),
        (lambda p: (p / "c").mkdir() or p, "no image files"),
        (lambda p: p / "none.csv", "manifest does not exist"),
        (
            lambda p: (p / "e.csv").write_text("path,label\n") and p / "e.csv",
            "lists no image files",
        ),
        (lambda p: (p / "b.jsonl").write_text("{oops\n") and p / "b.jsonl", "line 1"),
        (lambda p: (p / "d.csv").write_text("a.jpg,0\na.jpg,1\n") and p / "d.csv", "duplicate"),
        (
            lambda p: (
                (p / "d.csv").write_text(f"x/a.jpg,0\nb.jpg,1\n{p}/x//a.jpg,1\n") and p / "d.csv"
            ),
            r"line 3: duplicate path '.*x//a\.jpg': line 1 \('x/a\.jpg'\) names that file",
        ),
        (
            lambda p: (p / "d.csv").write_text("./a.jpg,0\nx/../a.jpg,0\n") and p / "d.csv",
            r"line 2: duplicate path 'x/\.\./a\.jpg': line 1 \('\./a\.jpg'\) names",
        ),
        (lambda p: (p / "n.csv").write_text("a.jpg,-1\n") and p / "n.csv", "negative label"),
        (
            lambda p: (p / "s.tar.gz").write_bytes(b"\x1f\x8b") and p / "s.tar.gz",
            r"s\.tar\.gz: a file that no source reader takes: compressed archives \(s\.tar\.gz\)",
        ),
        (
            lambda p: (p / "s.tar.gz").write_bytes(b"\x1f\x8b") and p,
            r"no class sub-folders \(expected SRC/<class>/<file>: compressed archives \(s\.tar",
        ),
    ],
)
def test_bad_sources(tmp_path: Path, make, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SourceError, match=match):
        list_source(make(tmp_path))

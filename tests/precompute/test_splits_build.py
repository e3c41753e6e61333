"""What a build stores for choosing samples: a manifest's split column, a mask's class counts.

Real builds (the sequential runner: the same shard tasks as Ray's) of real PNG files: the
``split`` column is recorded with the store and is part of the source fingerprint, a bad part
name is refused naming its line; a segmentation store carries each mask's pixels per class,
shown by ``inspect`` and used by ``balance="mask"``; a store without them says to rebuild.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from loaders import StoreLoader
from precompute.errors import SourceError
from precompute.format.classcounts import read_class_counts
from precompute.format.summary import store_summary
from precompute.job import build
from precompute.spec import BuildSpec
from precompute.splits import read_splits
from tests.contracts.index_store import cat, collect
from tests.precompute.fielddata import make_segmentation


def _manifest(root: Path, splits: list[str] | None, name: str = "m.csv") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rows = ["path,label" + (",split" if splits is not None else "")]
    for i in range(12):
        path = root / f"img{i:02d}.png"
        if not path.exists():
            Image.new("RGB", (6, 5), (i * 20, 0, 0)).save(path)
        rows.append(f"img{i:02d}.png,{i % 2}" + (f",{splits[i]}" if splits is not None else ""))
    (root / name).write_text("\n".join(rows) + "\n")
    return root / name


def _build(src: Path, out: Path, **spec: object) -> dict[str, object]:
    return build(str(src), str(out), BuildSpec(size=8, **spec), runner="sequential", progress=False)


def test_a_manifests_split_column_is_recorded_and_served(tmp_path: Path) -> None:
    parts = ["train"] * 8 + ["val"] * 3 + [""]  # the last row is in no part
    manifest = _manifest(tmp_path / "src", parts)
    attrs = _build(manifest, tmp_path / "store")
    recorded = read_splits(tmp_path / "store", 12)
    assert recorded is not None and recorded.counts() == {"train": 8, "val": 3}
    assert recorded.rule == {"column": "split"}
    val = StoreLoader(tmp_path / "store", 1, split="val", keys=True, drop_last=False)
    assert sorted(k for b in collect(val) for k in b["key"]) == [
        "img08.png",
        "img09.png",
        "img10.png",
    ]
    assert "splits     train 8, val 3 (from the manifest column 'split')" in store_summary(
        tmp_path / "store"
    )
    # the split column is part of the source: another split is another store (cache key)
    moved = _manifest(tmp_path / "src", ["val", *parts[1:]], name="m2.csv")
    plain = _manifest(tmp_path / "src", None, name="m3.csv")
    other = _build(moved, tmp_path / "other")
    without = _build(plain, tmp_path / "plain")
    fps = {a["source_fingerprint"] for a in (attrs, other, without)}  # type: ignore[index]
    assert len(fps) == 3
    assert read_splits(tmp_path / "plain", 12) is None


def test_a_bad_part_name_is_refused_naming_its_line(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path / "src", ["train"] * 5 + ["Val set"] + ["val"] * 6)
    with pytest.raises(SourceError, match=r"line 7: split 'Val set' is not a part name"):
        _build(manifest, tmp_path / "store")


@pytest.fixture(scope="module")
def seg_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("seg")
    src = make_segmentation(root / "src", n=16)
    out = root / "store"
    build(str(src), str(out), BuildSpec.from_dict({"size": 16, "fields": [
        {"name": "image", "kind": "image"},
        {"name": "mask", "kind": "mask", "options": {"classes": 4}},
    ]}), runner="sequential", progress=False)  # fmt: skip
    return out


def test_a_masks_pixels_per_class_are_stored_shown_and_balanced(seg_store: Path) -> None:
    counts = read_class_counts(seg_store, "mask", 16, 4)
    assert counts is not None
    plain = StoreLoader(seg_store, 1, shuffle=False, drop_last=False)
    masks = {int(b["index"][0]): b["mask"][0] for b in collect(plain)}
    for slot, mask in masks.items():  # the stored counts are the stored masks' pixels
        got = np.bincount(mask[mask < 4].ravel(), minlength=4)
        rows = counts.samples == slot
        want = np.zeros(4, np.int64)
        want[counts.classes[rows]] = counts.counts[rows]
        np.testing.assert_array_equal(got, want)
    assert "counts     mask per class (share, samples holding it): 0: " in store_summary(seg_store)
    balanced = StoreLoader(seg_store, 4, balance="mask", samples_per_epoch=4000, seed=1)
    shares = np.zeros(4)
    for b in collect(balanced):
        m = b["mask"]
        shares += np.bincount(m[m < 4].ravel(), minlength=4)
    total = np.bincount(counts.classes, counts.counts, 4)
    # balanced by pixels: every class's share moves toward a quarter
    before = np.abs(total / total.sum() - 0.25)
    after = np.abs(shares / shares.sum() - 0.25)
    assert after.max() < before.max()


def test_a_store_without_stored_counts_says_to_rebuild(seg_store: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(seg_store, copy)
    (copy / "_nostall" / "class_counts" / "mask.npy").unlink()
    with pytest.raises(ValueError, match=r"'mask' \(mask\) has no stored class counts: .*rebuild"):
        StoreLoader(copy, 4, balance="mask")
    assert "mask: none stored" in store_summary(copy)
    np.testing.assert_array_equal(  # and otherwise serves as before
        cat(collect(StoreLoader(copy, 4, seed=2)), "index"),
        cat(collect(StoreLoader(seg_store, 4, seed=2)), "index"),
    )


def test_inspect_json_holds_the_split_and_the_class_counts(
    seg_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` is every attribute: what the text shows beside the group's attributes too."""
    import json
    import shutil

    from precompute.cli import main

    store = tmp_path / "s"
    shutil.copytree(seg_store, store)
    main(["inspect", str(store), "--json"])
    before = json.loads(capsys.readouterr().out)
    assert before["splits"] is None  # none recorded yet
    main(["split", str(store), "--fractions", "train=0.75,val=0.25", "--seed", "2"])
    capsys.readouterr()
    main(["inspect", str(store), "--json"])
    got = json.loads(capsys.readouterr().out)
    recorded = read_splits(store, 16)
    assert recorded is not None
    assert got["splits"] == {
        "names": ["train", "val"],
        "counts": recorded.counts(),
        "rule": {"fractions": {"train": 0.75, "val": 0.25}, "seed": 2, "stratify": None,
                 "group_by": None},
    }  # fmt: skip
    counts = read_class_counts(store, "mask", 16, 4)
    assert counts is not None
    mask = got["class_counts"]["mask"]
    assert mask["counts"] == np.bincount(counts.classes, counts.counts, 4).astype(int).tolist()
    assert mask["samples"] == np.bincount(counts.classes, minlength=4).tolist()
    assert abs(sum(mask["share"]) - 1) < 1e-9
    assert got["report"] == before["report"] and got["spec_hash"] == before["spec_hash"]

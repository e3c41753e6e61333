"""A stratified, grouped split of a segmentation store keeps the rare class in proportion.

A group's stratum was the class its samples hold most of: background for every patient of a
segmentation set, so ``--stratify mask --group-by`` did nothing while ``inspect`` said
"stratified by mask". A unit's stratum is now the rarest class it holds at all; where every
group holds the same classes (every patient shows the rare class somewhere) there is one
stratum, and the split says so: a warning, and ``strata: 1`` in the record and ``inspect``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from loaders import StoreLoader
from precompute.cli import main
from precompute.errors import SplitWarning
from precompute.fields.base import ClassCounts
from precompute.format.summary import store_summary
from precompute.splits import Split, assign, read_splits

RARE = 3  # the rare class of a 4-class mask: a few pixels in some slices


def _slices(per_patient: list[int]) -> list[str]:
    return [
        f"images/P{p + 1:02d}_s{s:02d}.png" for p, n in enumerate(per_patient) for s in range(n)
    ]


def _holds(keys: list[str], rare: set[str]) -> ClassCounts:
    """Every slice holds background 0 (most pixels), 1 and 2; the slices in ``rare`` class 3."""
    samples, classes, counts = [], [], []
    for i, key in enumerate(keys):
        held = [(0, 900), (1, 300), (2, 40)] + ([(RARE, 9)] if key in rare else [])
        for c, n in held:
            samples.append(i)
            classes.append(c)
            counts.append(n)
    return ClassCounts(np.array(samples), np.array(classes), np.array(counts), 4)


def _patients(keys: list[str], parts: np.ndarray, part: int) -> set[str]:
    return {k.split("/")[1][:3] for k, p in zip(keys, parts, strict=True) if p == part}


def test_the_patients_holding_the_rare_class_are_dealt_in_proportion() -> None:
    """12 patients of 10 slices; 4 show the rare class: a quarter of them in val, every seed."""
    keys = _slices([10] * 12)
    lesion = {"P01", "P04", "P07", "P10"}
    rare = {k for k in keys if k.split("/")[1][:3] in lesion and int(k[-6:-4]) % 3 == 0}
    holds = _holds(keys, rare)
    member = np.ones(len(keys), bool)
    for seed in range(10):
        rule = Split({"train": 0.75, "val": 0.25}, seed, "mask", r"/(P\d+)_")
        groups = [k.split("/")[1][:3] for k in keys]
        parts = assign(rule, keys, member, holds, groups)
        val = _patients(keys, parts, 1)
        assert len(val) == 3 and len(val & lesion) == 1, (seed, sorted(val))
        assert not val & _patients(keys, parts, 0)  # no patient on two sides


def test_a_label_is_its_samples_stratum_as_before() -> None:
    keys = [f"{i:03d}.png" for i in range(40)]
    labels = np.arange(40) % 4
    holds = ClassCounts(np.arange(40), labels, np.ones(40, np.int64), 4)
    parts = assign(Split({"a": 0.5, "b": 0.5}, 1, "label"), keys, np.ones(40, bool), holds)
    assert np.bincount(labels[parts == 1], minlength=4).tolist() == [5, 5, 5, 5]


def _seg_source(root: Path, per_patient: list[int], rare_every: int) -> Path:
    """images/ + masks/ of 12x12 slices; every ``rare_every``-th slice holds class 3."""
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    rng = np.random.default_rng(0)
    i = 0
    for p, n in enumerate(per_patient):
        for s in range(n):
            name = f"P{p + 1:02d}_s{s:02d}.png"
            mask = np.zeros((12, 12), np.uint8)
            mask[3:9, 3:9] = 1
            mask[5:7, 5:7] = 2
            if i % rare_every == 0:
                mask[0:2, 0:2] = RARE
            i += 1
            Image.fromarray(mask).save(root / "masks" / name)
            grey = (rng.random((12, 12)) * 255).astype(np.uint8)
            Image.fromarray(grey).save(root / "images" / name)
    return root


def test_every_patient_holding_the_rare_class_is_said_and_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviewer's shape: 12 patients, the rare class in a third of the slices."""
    src = _seg_source(tmp_path / "seg", [3 + p % 3 for p in range(12)], rare_every=3)
    store = str(tmp_path / "s.zarr")
    main(["build", str(src), "--out", store, "--size", "8", "--mask-classes", "4",
          "--runner", "sequential", "--quiet"])  # fmt: skip
    capsys.readouterr()
    args = ["--fractions", "train=0.75,val=0.25", "--stratify", "mask", "--group-by", r"(P\d+)_"]
    main(["split", store, *args])
    got = capsys.readouterr()
    assert (
        "precompute: WARNING: split stratified by 'mask': every group holds the same classes "
        "(0, 1, 2, 3), so all fall into one stratum" in got.err
    )
    recorded = read_splits(store, 48)
    assert recorded is not None and recorded.rule["strata"] == 1
    assert "stratified by mask to no effect: every unit in one stratum" in got.out
    assert "stratified by mask to no effect" in store_summary(store)
    rule = Split({"train": 0.75, "val": 0.25}, 0, "mask", r"(P\d+)_")
    with pytest.warns(SplitWarning, match="every group holds the same classes"):
        StoreLoader(store, 4, split="val", splits=rule).plan()  # a loader's split says so too


def test_a_split_whose_strata_differ_records_their_number(tmp_path: Path) -> None:
    src = _seg_source(tmp_path / "seg", [4] * 6, rare_every=8)  # P01, P03, P05 hold it
    store = str(tmp_path / "s.zarr")
    main(["build", str(src), "--out", store, "--size", "8", "--mask-classes", "4",
          "--runner", "sequential", "--quiet"])  # fmt: skip
    args = ["--fractions", "a=0.5,b=0.5", "--stratify", "mask", "--group-by", r"(P\d+)_"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SplitWarning)
        main(["split", store, *args])
    recorded = read_splits(store, 24)
    assert recorded is not None and recorded.rule["strata"] == 2
    assert "stratified by mask (2 strata)" in store_summary(store)

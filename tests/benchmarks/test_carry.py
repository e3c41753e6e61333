"""Every field of a source is followed: labels carried beside points, masks and boxes.

The seg review: a landmarks manifest with ``image``, ``keypoints`` and ``label`` columns was
measured as image classification, its points dropped without a word. A workload follows the
most fields it can: landmarks (or segmentation) that carries the label, every strategy serving
``(targets, label)`` with each sample's own label; a field no workload serves with the others
is named as left out in the report, never dropped silently.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from benchmarks.errors import BenchConfigError, NotApplicable
from benchmarks.fields_data import make_landmarks, make_segmentation
from benchmarks.harness.consumers import parse_consumer
from benchmarks.harness.loop import RunOptions
from benchmarks.harness.run import run_benchmark
from benchmarks.harness.sources import plan_source
from benchmarks.harness.strategies import RunConfig, get_strategy
from benchmarks.harness.workloads import choose

N = 16


def brighten(path: Path) -> None:
    """Label 1's images are brighter: a batch's labels can be checked against its pixels."""
    with Image.open(path) as im:
        pixels = np.asarray(im).astype(np.int16)
        mode = im.mode
    Image.fromarray((pixels + 60).clip(0, 255).astype(np.uint8), mode).save(path)


def _build(data: Path, store: Path, flags: list[str]) -> None:
    from precompute.cli import main as precompute

    precompute(["build", str(data), "--out", str(store), *flags, "--quiet",
                "--runner", "sequential"])  # fmt: skip


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str], Path]]:
    root = tmp_path_factory.mktemp("carry")
    marks = make_landmarks(root / "marks", N, 48, 5).parent
    rows = list(csv.DictReader((marks / "landmarks.csv").read_text().splitlines()))
    with open(marks / "views.jsonl", "w") as f:  # the review's columns: image, keypoints, label
        for i, row in enumerate(rows):
            view = ["a-dark", "b-bright"][i % 2]  # class names: sorted, so the index is i % 2
            if i % 2:
                brighten(marks / row["image"])
            f.write(json.dumps({"image": row["image"], "keypoints": json.loads(row["keypoints"]),
                                "label": view}) + "\n")  # fmt: skip
    seg = make_segmentation(root / "seg", N, (40, 64))
    with open(seg / "cases.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["image", "mask", "label"])
        for i in range(N):
            if i % 2:
                brighten(seg / "images" / f"case_{i:05d}.png")
            out.writerow([f"images/case_{i:05d}.png", f"masks/case_{i:05d}.png", i % 2])
    made = {
        "landmarks": (str(marks / "views.jsonl"), ["--size", "48", "--mode", "letterbox"]),
        "masks": (str(seg / "cases.csv"), ["--size", "48", "--mask-classes", "4"]),
    }
    out_: dict[str, tuple[str, list[str], Path]] = {}
    for name, (data, flags) in made.items():
        store = root / f"store-{name}"
        _build(Path(data), store, flags)
        out_[name] = (data, flags, store)
    return out_


def _spec(data: str, flags: list[str]) -> Any:
    from precompute.cli import spec_from_options

    options = {
        flags[i].lstrip("-").replace("-", "_"): flags[i + 1] for i in range(0, len(flags), 2)
    }
    options["size"] = int(options["size"])
    if "mask_classes" in options:
        options["mask_classes"] = int(options["mask_classes"])
    return spec_from_options(None, options, data)


def _cfg(sources: Any, kind: str, **kw: Any) -> RunConfig:
    data, flags, store = sources[kind]
    spec = _spec(data, flags)
    return RunConfig(data, str(store), 4, 0, int(spec.size), 0, "cpu", spec=spec, **kw)


@pytest.mark.parametrize(("kind", "workload"), [("landmarks", "landmarks"),
                                                ("masks", "segmentation")])  # fmt: skip
def test_the_workload_serves_its_fields_and_carries_the_label(sources, kind, workload):
    cfg = _cfg(sources, kind)
    chosen = cfg.workload
    assert chosen.name == workload, chosen.task  # never image classification
    assert chosen.carried == ("label",) and chosen.left_out == ()
    assert chosen.title.endswith(", carrying label")
    assert chosen.batch_text().endswith(", label int64 [B]")
    strategies = ["workers", "precompute", "tf-store"] + (["gpu-decode"] if kind == "masks" else [])
    for name in strategies:
        strategy = get_strategy(name)
        if strategy.unavailable(cfg):
            continue
        source = strategy.open(cfg)
        try:
            batches = [(x.clone(), (y.clone(), lab.clone())) for x, (y, lab) in source.epoch(0)]
        finally:
            source.close()
        x = torch.cat([b[0] for b in batches]).float()
        labels = torch.cat([b[1][1] for b in batches])
        assert sorted(labels.tolist()) == sorted(i % 2 for i in range(N)) and len(x) == N, name
        assert labels.dtype == torch.int64, name
        bright = x.mean((1, 2, 3))
        assert float(bright[labels == 1].min()) > float(bright[labels == 0].max()) - 0.3, name
        assert float(bright[labels == 1].mean()) > float(bright[labels == 0].mean()) + 0.5, name


def test_the_model_consumer_trains_a_head_for_the_carried_label(sources):
    cfg = _cfg(sources, "landmarks")
    source = get_strategy("workers").open(cfg)
    try:
        x, y = next(iter(source.epoch(0)))
    finally:
        source.close()
    step = parse_consumer("model", torch.device("cpu"), 2, cfg.workload)
    step(x, y)
    assert step.last_loss is not None and np.isfinite(step.last_loss)


def test_pipelines_that_serve_one_label_refuse_a_second_and_say_why(tiny_data, tmp_path):
    """Two label fields (``--fields``): classification carries the second; the tf.data
    pipeline and mixup, which take one label, say so instead of dropping it."""
    from precompute.cli import spec_from_options

    manifest = tmp_path / "two.jsonl"
    with open(manifest, "w") as f:
        for i, p in enumerate(sorted(tiny_data.rglob("*.png"))):
            row = {"image": str(p), "label": p.parent.name, "group": i % 2}
            f.write(json.dumps(row) + "\n")
    fields = [{"name": "image", "kind": "image"}, {"name": "label", "kind": "label"},
              {"name": "group", "kind": "label"}]  # fmt: skip
    spec = spec_from_options(None, {"size": 16, "fields": json.dumps(fields)}, str(manifest))
    plan = plan_source(str(manifest), spec)
    assert choose(plan).name == "classification" and choose(plan).carried == ("group",)
    with pytest.raises(BenchConfigError, match="mixup blends one class label per sample"):
        choose(plan, 0.2)
    cfg = RunConfig(str(manifest), None, 4, 0, 16, 0, "cpu", spec=spec)
    with pytest.raises(NotApplicable, match="this source also has group"):
        cfg.workload.tf_native(cfg)


def test_a_field_no_workload_serves_with_the_others_is_named_loudly(sources, tmp_path):
    marks = Path(sources["landmarks"][0]).parent
    make_segmentation(tmp_path / "both", 8, 48)
    rows = [json.loads(line) for line in (marks / "views.jsonl").read_text().splitlines()][:8]
    manifest = tmp_path / "both" / "both.jsonl"
    with open(manifest, "w") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({"image": f"images/case_{i:05d}.png",
                                "mask": f"masks/case_{i:05d}.png",
                                "keypoints": row["keypoints"]}) + "\n")  # fmt: skip
    spec = _spec(str(manifest), ["--size", "48", "--mask-classes", "4"])
    report, paths = run_benchmark(str(manifest), tmp_path / "out", strategies=["workers"],
                                  epochs=1, batch_size=4, spec=spec, workers=0,
                                  options=RunOptions(epochs=1, max_steps=1))  # fmt: skip
    assert report["workload"]["name"] == "segmentation"
    md = paths["md"].read_text()
    assert "**Warning: LEFT OUT: keypoints (keypoints): no workload here serves it" in md
    assert "- **workers**: torch DataLoader" in md
    assert "; **LEFT OUT: keypoints (keypoints)**" in md

"""Every strategy on every kind of data serves the same samples, or says why it cannot.

Each kind's source comes from the committed generators and its store from ``precompute build``
(:mod:`tests.benchmarks.kinds`). Every strategy serves one whole epoch; the batches must have
the same shapes across strategies, the value ranges of the kind (normalised pixels, class ids,
points inside the crop, boxes inside the frame, log-mel decibels), and the labels of the items
each strategy served (all of them, or, where an engine cannot decode some files, exactly those
of the files it names as served). A strategy that cannot take the kind is ``not applicable``
with a reason.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch

from benchmarks.errors import NotApplicable
from benchmarks.harness.loop import mixed
from benchmarks.harness.run import DEFAULT_STRATEGIES
from benchmarks.harness.strategies import RunConfig, get_strategy
from tests.benchmarks.kinds import KindSource, audio_labels, make_sources

APPLIES = {
    "images": {"workers", "precompute", "precompute-dali", "gpu-decode", "tf-native", "tf-store"},
    "audio": {"workers", "precompute", "gpu-decode", "tf-native", "tf-store"},
    "masks": {"workers", "precompute", "gpu-decode", "tf-store"},
    "keypoints": {"workers", "precompute", "tf-store"},
    "boxes": {"workers", "precompute", "tf-store"},
    "spectral": {"workers", "precompute", "tf-store", "memmap"},
}
NEEDS = {  # strategy -> the backend whose absence makes it "unavailable"
    "precompute-dali": "nvidia.dali",
    "gpu-decode": "nvidia.dali",
    "tf-native": "tensorflow",
    "tf-store": "tensorflow",
}
PIXELS = (-2.2, 2.7)  # (0 - mean) / std .. (255 - mean) / std of the ImageNet normalisation


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KindSource]:
    return make_sources(tmp_path_factory.mktemp("kinds"))


def _installed(name: str) -> bool:
    module = NEEDS.get(name)
    return module is None or importlib.util.find_spec(module) is not None


def serve(k: KindSource, name: str, batch: int | None = None) -> dict[str, Any]:
    """One epoch of strategy ``name`` on ``k``: its status, batches (copied) and note."""
    spec = k.spec()
    cfg = RunConfig(k.data, str(k.store), batch or k.batch, 0, spec.size, 0, "cpu",
                    spec=spec)  # fmt: skip
    strategy = get_strategy(name)
    reason = strategy.unavailable(cfg)
    if reason is not None:
        return {"status": "unavailable", "reason": reason}
    try:
        source = strategy.open(cfg)
    except NotApplicable as exc:
        return {"status": "not applicable", "reason": str(exc)}
    try:  # copies: loaders may reuse their batch buffers
        batches = [(x.clone(), y.clone()) for x, y in source.epoch(0)]
    finally:
        source.close()
    return {"status": "ok", "batches": batches, "note": getattr(source, "note", None)}


def _all(res: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*res["batches"], strict=True)
    return torch.cat(xs).float(), torch.cat(ys)


def _labels(res: dict[str, Any]) -> list[int]:
    return sorted(_all(res)[1].tolist())


def _class_means(res: dict[str, Any], reduce: Any) -> torch.Tensor:
    """``[classes, F]``: the mean of ``reduce(x)`` over each label's samples."""
    x, y = _all(res)
    feats = reduce(x)
    return torch.stack([feats[y == c].mean(0) for c in sorted(set(y.tolist()))])


def assert_labels_follow_samples(ok: dict[str, dict[str, Any]], reduce: Any) -> None:
    """Each strategy's class means are nearest the ``workers``' of the same class.

    A label served with another sample's input (a batch out of step with its labels) fails.
    """
    ref = _class_means(ok["workers"], reduce)
    for name, res in ok.items():
        means = _class_means(res, reduce)
        nearest = torch.cdist(means, ref).argmin(1)
        assert nearest.tolist() == list(range(len(ref))), name


def share(hits: list[bool]) -> float:
    """The share of true checks (at least a handful of them)."""
    assert len(hits) >= 8, hits
    return sum(hits) / len(hits)


def mask_on_tint(x: torch.Tensor, y: torch.Tensor) -> list[bool]:
    """Per sample and shape class in it: its mask's pixels carry that class's tint.

    The generator tints ellipses (1) red, rectangles (2) green and triangles (3) blue.
    """
    hits = []
    for img, mask in zip(x, y, strict=True):
        for cls, (hot, cold) in {1: (0, 1), 2: (1, 0), 3: (2, 0)}.items():
            inside, outside = mask == cls, mask == 0
            if inside.sum() >= 16 and outside.sum() >= 16:
                tint = img[hot] - img[cold]
                hits.append(float(tint[inside].mean()) > float(tint[outside].mean()) + 0.3)
    return hits


def points_on_blobs(x: torch.Tensor, y: torch.Tensor) -> list[bool]:
    """Per visible point: the image is brighter there than at 90% of its pixels."""
    hits = []
    for img, pts in zip(x[:, 0], y, strict=True):
        top = float(torch.quantile(img.flatten(), 0.9))
        for px, py, v in pts.tolist():
            if v > 0:
                hits.append(float(img[int(py), int(px)]) >= top)
    return hits


def boxes_on_shapes(x: torch.Tensor, y: torch.Tensor) -> list[bool]:
    """Per box of 3+ pixels a side: its class's colour (red, green, blue) fills it."""
    hits = []
    for img, rows in zip(x, y, strict=True):
        for x0, y0, x1, y1, cls in rows.tolist():
            if cls >= 0 and x1 - x0 >= 3 and y1 - y0 >= 3:
                c = int(cls)
                part = img[:, int(y0) + 1 : int(y1), int(x0) + 1 : int(x1)]
                own = part[c] - part[[i for i in range(3) if i != c]].mean(0)
                hits.append(float(own.mean()) > 0.5)
    return hits


def _strategies(sources: dict[str, KindSource], kind: str) -> dict[str, dict[str, Any]]:
    k = sources[kind]
    out = {name: serve(k, name) for name in DEFAULT_STRATEGIES}
    for name, res in out.items():
        if not _installed(name):
            assert res["status"] == "unavailable", (name, res)
        elif name in APPLIES[kind]:
            assert res["status"] == "ok", (name, res.get("reason"))
        else:  # listed, with its reason, never left out
            assert res["status"] == "not applicable", (name, res)
            assert len(res["reason"]) > 20
    ok = {n: r for n, r in out.items() if r["status"] == "ok"}
    shapes = {n: (_all(r)[0].shape[1:], _all(r)[1].shape[1:]) for n, r in ok.items()}
    assert len(set(shapes.values())) == 1, shapes  # one batch form for every strategy
    for res in ok.values():
        x, _ = _all(res)
        assert torch.isfinite(x).all()
    return ok


def test_images(sources: dict[str, KindSource]) -> None:
    ok = _strategies(sources, "images")
    labels = sorted(i % 3 for i in range(24))  # make_sample_dataset: 24 images of 3 classes
    for name, res in ok.items():
        x, _ = _all(res)
        assert x.shape[1:] == (3, 32, 32)
        assert PIXELS[0] <= float(x.min()) and float(x.max()) <= PIXELS[1], name
        assert _labels(res) == labels, name
    assert_labels_follow_samples(ok, lambda x: x.mean((2, 3)))  # the class's hue


def test_audio(sources: dict[str, KindSource]) -> None:
    ok = _strategies(sources, "audio")
    served = {"tf-native": (0,), "gpu-decode": (0, 1, 2, 3)}  # WAV 16-bit; all but MP3
    workers = float(_all(ok["workers"])[0].mean())
    for name, res in ok.items():
        x, _ = _all(res)
        assert x.shape[1:] == (64, 91)  # 64 mel bands, 90% of the 101 frames of 1 s
        assert float(x.min()) >= -100.5 and float(x.max()) < 60, name  # log-mel decibels
        assert abs(float(x.mean()) - workers) < 8, name  # the same features, not the same crops
        kept = served.get(name, range(5))
        assert _labels(res) == audio_labels(kept), name
        if name in served:  # what it left out is counted and named
            note = res["note"]
            assert f"served {len(audio_labels(kept))} of 20 files" in note
            assert "MP3/MPEG_LAYER_III (" in note and ".mp3" in note
        else:
            assert res["note"] is None
    if "tf-native" in ok:
        assert all(f in ok["tf-native"]["note"] for f in ("FLAC", "OGG/VORBIS", "WAV/PCM_24"))
    assert_labels_follow_samples(ok, lambda x: x.mean(2))  # each class's spectrum


def test_masks(sources: dict[str, KindSource]) -> None:
    ok = _strategies(sources, "masks")
    for name, res in ok.items():
        x, y = _all(res)
        assert x.shape[1:] == (3, 48, 48) and y.shape[1:] == (48, 48)
        assert PIXELS[0] <= float(x.min()) and float(x.max()) <= PIXELS[1], name
        ids = set(y.unique().tolist())
        assert ids <= {0, 1, 2, 3, 255} and 0 in ids and len(ids - {0, 255}) >= 2, (name, ids)
        assert x.shape[0] == 16  # every pair once
        assert share(mask_on_tint(x, y)) >= 0.9, name  # each mask lies on its image's shapes


def test_keypoints(sources: dict[str, KindSource]) -> None:
    ok = _strategies(sources, "keypoints")
    for name, res in ok.items():
        _, y = _all(res)
        assert y.shape[1:] == (5, 3) and y.dtype == torch.float32
        seen = y[..., 2] > 0
        assert set(y[..., 2].unique().tolist()) <= {0.0, 1.0}
        inside = y[seen][:, :2]
        assert float(inside.min()) >= 0 and float(inside.max()) < 48, name
        assert float(seen.float().mean()) > 0.5, name  # a crop keeps most of the skull
        x, _ = _all(res)
        assert share(points_on_blobs(x, y)) >= 0.9, name  # each point on its bright blob


def test_boxes(sources: dict[str, KindSource]) -> None:
    ok = _strategies(sources, "boxes")
    for name, res in ok.items():
        _, y = _all(res)
        assert y.dtype == torch.float32 and y.shape[-1] == 5
        real = y[y[..., 4] >= 0]
        assert (y[y[..., 4] < 0] == -1).all()  # padding rows are -1 throughout
        assert len(real) >= 8, name
        assert float(real[:, :4].min()) >= 0 and float(real[:, :4].max()) <= 48, name
        assert (real[:, 2] > real[:, 0]).all() and (real[:, 3] > real[:, 1]).all(), name
        assert set(real[:, 4].tolist()) <= {0.0, 1.0, 2.0}
        x, _ = _all(res)
        assert share(boxes_on_shapes(x, y)) >= 0.9, name  # each box around its shape


def test_spectral(sources: dict[str, KindSource]) -> None:
    k = sources["spectral"]
    gt = np.load(k.data.replace("scene.npy", "gt.npy"))
    labels = sorted((gt[gt > 0] - 1).tolist())
    batch = max(d for d in range(1, 33) if len(labels) % d == 0)  # every patch once
    k = KindSource(k.name, k.data, k.options, k.store, batch)
    ok = _strategies({"spectral": k}, "spectral")
    for name, res in ok.items():
        x, _ = _all(res)
        assert x.shape[1:] == (12, 5, 5)
        assert _labels(res) == labels, name
        per_band = x.transpose(0, 1).reshape(12, -1)
        assert float(per_band.mean(1).abs().max()) < 0.3, name  # normalised per band
        assert 0.6 < float(per_band.std(1).mean()) < 1.4, name
    assert Counter(_labels(ok["memmap"])) == Counter(labels)
    assert_labels_follow_samples(ok, lambda x: x.mean((2, 3)))  # each class's spectrum


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["audio", "masks"])
def test_run_and_doctor_take_the_build_flags_and_report_every_strategy(
    sources: dict[str, KindSource], kind: str, tmp_path: Any
) -> None:
    """``benchmarks run --data SRC FLAGS`` as a user types it: one row per strategy, the
    not-applicable ones with their reason, the ratios, the same form as for images."""
    import json

    from click.testing import CliRunner

    from benchmarks.cli import bench

    k = sources[kind]
    argv = ["run", "--data", k.data, *k.flags, "--store", str(k.store), "--out", str(tmp_path)]
    argv += ["--epochs", "1", "--max-steps", "3", "--batch-size", "4", "--workers", "1"]
    argv += ["--consumer", "model"]
    res = CliRunner().invoke(bench, argv)
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text())
    status = {s["name"]: s["status"] for s in report["strategies"]}
    for name in DEFAULT_STRATEGIES:
        want = "ok" if name in APPLIES[kind] else "not applicable"
        assert status[name] == (want if _installed(name) else "unavailable"), name
    md = (tmp_path / "report.md").read_text()
    for s in report["strategies"]:
        if s["status"] == "not applicable":
            assert f"| {s['name']} | not applicable: {s['reason'][:40]}" in md
    task = {
        "audio": "audio classification (audio + label)",
        "masks": "segmentation (image + mask)",
    }[kind]
    assert report["workload"]["task"] == task
    assert "- precompute / workers: " in md and "samples per CPU second" in md
    assert "| strategy | GPU util 70-90%, steady | data wait < 30% | step CV < 20% |" in md
    doctor = CliRunner().invoke(bench, ["doctor", "--data", k.data, *k.flags, "--json",
                                        "--store", str(k.store), "--max-files", "8"])  # fmt: skip
    assert doctor.exit_code == 0, doctor.output
    doc = json.loads(doctor.output)
    assert doc["decode"]["samples"] == 8 and doc["decode"]["pipeline_per_s"] > 0
    assert doc["store_loader"]["samples"] > 0
    assert {"workers", "precompute", "gpu-decode"} <= set(doc["feed_rates"])


def _soft(res: dict[str, Any], classes: int) -> torch.Tensor:
    _, y = _all(res)
    assert y.shape[1:] == (classes,) and y.dtype == torch.float32
    assert torch.allclose(y.sum(1), torch.ones(len(y)), atol=1e-5)
    return y


@pytest.mark.parametrize("kind", ["images", "audio"])
def test_mixup_where_asked_every_strategy_serves_soft_targets(
    sources: dict[str, KindSource], kind: str
) -> None:
    """``--mixup``: the store loaders mix with their own mixup, the others as a training loop
    mixes their batches; all serve soft targets that blend two classes of the batch."""
    k = sources[kind]
    spec, classes = k.spec(), {"images": 3, "audio": 4}[kind]
    for name in ("workers", "precompute", "tf-store", "gpu-decode"):
        if not _installed(name):
            continue
        cfg = RunConfig(k.data, str(k.store), k.batch, 0, int(spec.size), 0, "cpu", spec=spec,
                        mixup=0.4)  # fmt: skip
        source = mixed(get_strategy(name).open(cfg), cfg)  # as run_strategy opens it
        try:
            res = {"batches": [(x.clone(), y.clone()) for x, y in source.epoch(0)]}
        finally:
            source.close()
        y = _soft(res, classes)
        assert int((y > 1e-6).sum(1).max()) == 2, name  # two classes at most in a row
        assert bool((y.max(1).values < 0.95).any()), name  # and blended, not one-hot


def test_mixup_is_refused_where_there_is_no_class_label(sources: dict[str, KindSource]) -> None:
    from benchmarks.errors import BenchConfigError

    k = sources["masks"]
    spec = k.spec()
    cfg = RunConfig(k.data, str(k.store), 4, 0, int(spec.size), spec=spec, mixup=0.2)
    with pytest.raises(BenchConfigError, match=r"--mixup 0\.2: segmentation .* not one class"):
        assert cfg.workload is None

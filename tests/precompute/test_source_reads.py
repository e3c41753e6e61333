"""A build reads its manifest, and decodes its scene, once in the driver (real files, counted).

The counters wrap the real functions (``builtins.open``, the scene reader) and call them: every
read still happens, it is only counted.
"""

from __future__ import annotations

import builtins
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from benchmarks.spectral_data import make_scene
from precompute.arrays import scenesrc
from precompute.cli import main
from precompute.fields import FieldSpec
from precompute.format.layout import open_store_info
from precompute.sample import make_sample_dataset
from precompute.sources.resolve import infer_fields, resolve_build
from precompute.spec import BuildSpec
from tests.precompute.audio_bytes import tone
from tests.precompute.fielddata import (
    make_keypoints_manifest,
    make_labels_manifest,
    make_segmentation,
)


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count every ``open`` of a file in this process by its path (the open still happens)."""
    seen: Counter[str] = Counter()
    real = builtins.open

    def counting(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | Path):
            seen[str(file)] += 1
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    return seen


def _image_manifest(root: Path) -> Path:
    data = make_sample_dataset(root / "data", 8, size_range=(16, 24))
    rows = ["path,label"] + [
        f"{p.relative_to(root).as_posix()},{p.parent.name}" for p in sorted(data.rglob("*.*"))
    ]
    (root / "list.csv").write_text("\n".join(rows) + "\n")
    return root / "list.csv"


def _array_manifest(root: Path) -> Path:
    lines = []
    for i in range(4):
        np.save(root / f"{i}.npy", np.full((6, 6, 3), i, dtype=np.float32))
        lines.append(json.dumps({"path": f"{i}.npy", "label": i % 2}))
    (root / "arrays.jsonl").write_text("\n".join(lines) + "\n")
    return root / "arrays.jsonl"


def _audio_manifest(root: Path) -> Path:
    rows = ["path,label"]
    for i in range(3):
        sf.write(root / f"{i}.wav", tone(220.0 * (i + 1), 8000, 0.5), 8000, subtype="PCM_16")
        rows.append(f"{i}.wav,{i % 2}")
    (root / "clips.csv").write_text("\n".join(rows) + "\n")
    return root / "clips.csv"


AUDIO = (FieldSpec("audio", "audio", {"clip_seconds": 0.25}), FieldSpec("label", "label"))
MANIFESTS: dict[str, tuple[Callable[[Path], Path], BuildSpec]] = {
    "images (v1)": (_image_manifest, BuildSpec(size=16)),
    "keypoints": (make_keypoints_manifest, BuildSpec(size=16)),
    "labels": (make_labels_manifest, BuildSpec(size=16)),
    "arrays": (_array_manifest, BuildSpec(size=6)),
    "audio": (_audio_manifest, BuildSpec(size=16, fields=AUDIO)),
}


@pytest.mark.parametrize("kind", sorted(MANIFESTS))
def test_a_manifest_is_read_once_per_listing(
    kind: str, tmp_path: Path, opens: Counter[str]
) -> None:
    make, spec = MANIFESTS[kind]
    manifest = make(tmp_path)
    opens.clear()
    source, _, _ = resolve_build(str(manifest), spec)
    assert len(source.items) > 0
    assert opens[str(manifest)] == 1


@pytest.mark.ray
def test_a_scene_is_decoded_once_in_the_driver(
    ray_local: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opens: Counter[str]
) -> None:
    cube, gt = make_scene(20, 18, 5, 3, seed=2)
    np.save(tmp_path / "scene.npy", cube)
    np.save(tmp_path / "gt.npy", gt)
    scene = str(tmp_path / "scene.npy")
    decoded: Counter[str] = Counter()
    real = scenesrc.read_array  # type: ignore[attr-defined]

    def counting(data: bytes, key: str, *args: Any, **kwargs: Any) -> np.ndarray:
        decoded[key] += 1
        return real(data, key, *args, **kwargs)

    monkeypatch.setattr(scenesrc, "read_array", counting)  # in this process: the driver
    opens.clear()  # np.save opened the scene
    main(["build", scene, "--out", str(tmp_path / "s"), "--labels", "gt.npy", "--patch", "5",
          "--shard-samples", "64", "--quiet"])  # fmt: skip
    assert decoded[scene] == 1 and opens[scene] == 1  # the shards decode it in the workers
    assert open_store_info(tmp_path / "s").layout.num_samples == int((gt > 0).sum())


def _mask_manifest(root: Path) -> Path:
    seg = make_segmentation(root / "seg", n=6)
    rows = ["image,mask"] + [
        f"seg/images/{p.name},seg/masks/{p.stem}.png" for p in sorted((seg / "images").iterdir())
    ]
    (root / "pairs.csv").write_text("\n".join(rows) + "\n")
    return root / "pairs.csv"


def _npz_manifest(root: Path) -> Path:
    rows = ["path,label"]
    for i in range(4):
        np.savez(root / f"{i}.npz", cube=np.full((6, 6, 3), i, dtype=np.float32))
        rows.append(f"{i}.npz,{i % 2}")
    (root / "cubes.csv").write_text("\n".join(rows) + "\n")
    return root / "cubes.csv"


# A manifest and the field flag that makes the CLI infer its fields before the build lists it.
FLAGGED: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    "mask": (_mask_manifest, ["--mask-classes", "4", "--size", "16"]),
    "keypoints": (make_keypoints_manifest, ["--flip-pairs", "[[0, 1]]", "--size", "16"]),
    "audio": (_audio_manifest, ["--clip-seconds", "0.25"]),
    "arrays": (_npz_manifest, ["--key", "cube", "--size", "6"]),
}


@pytest.mark.ray
@pytest.mark.parametrize("kind", sorted(FLAGGED))
def test_a_cli_build_with_field_flags_reads_its_manifest_once(
    ray_local: None, kind: str, tmp_path: Path, opens: Counter[str]
) -> None:
    make, flags = FLAGGED[kind]
    manifest = make(tmp_path)
    opens.clear()
    main(["build", str(manifest), "--out", str(tmp_path / "s"), "--quiet", *flags])
    assert opens[str(manifest)] == 1  # the fields inferred and the build listed from one read
    assert open_store_info(tmp_path / "s").layout.num_samples > 0


def test_the_kept_text_is_taken_once_and_never_for_a_changed_file(
    tmp_path: Path, opens: Counter[str]
) -> None:
    manifest = make_labels_manifest(tmp_path)
    spec = BuildSpec(size=16)
    fields = infer_fields(str(manifest), keep_text=True)
    opens.clear()
    source, _, _ = resolve_build(str(manifest), BuildSpec(size=16, fields=fields))
    assert opens[str(manifest)] == 0 and len(source.items) == 16  # the CLI's read, taken
    resolve_build(str(manifest), spec)
    assert opens[str(manifest)] == 1  # given out once: a later build reads the file
    infer_fields(str(manifest), keep_text=True)
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join(lines[:5]) + "\n")  # edited after the inference read it
    opens.clear()
    source, _, _ = resolve_build(str(manifest), spec)
    assert opens[str(manifest)] == 1 and len(source.items) == 4

"""What a transform is told and held to: its data files, its arguments, the dtypes it gets.

Real user packages (``tests/precompute/userpkg.py``) on ``sys.path``, real stores built in
process (the sequential runner), the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from PIL import Image

from precompute import BuildSpec, build
from precompute.cli import main
from precompute.errors import SpecError
from precompute.transforms import TransformSpec
from tests.precompute.boxdata import make_coco
from tests.precompute.userpkg import importable_package


def _build(
    src: Path, out: Path, spec: BuildSpec, fn: str | None = None, args: Any = None, at: str = ""
) -> dict[str, Any]:
    """The build in this process (no Ray), with transform ``fn`` at ``at`` if given."""
    kw: dict[str, Any] = {"transform": fn, "transform_args": args, "transform_at": at or None}
    kw = {k: v for k, v in kw.items() if v is not None} if fn is not None else {}
    return build(str(src), str(out), spec, runner="sequential", progress=False, **kw)


@pytest.fixture()
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    return importable_package(tmp_path, monkeypatch)


def test_a_data_file_is_not_fingerprinted_and_the_help_says_what_to_do(
    pkg: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, name = pkg
    table = root / name / "gain.json"
    table.write_text('{"gain": 1}')
    before = TransformSpec(f"{name}.ops:reads_table").fingerprint
    table.write_text('{"gain": 2}')  # the data changed, not the code: the same fingerprint
    assert TransformSpec(f"{name}.ops:reads_table").fingerprint == before
    main(["build", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Files it reads (a JSON lookup table, weights) are NOT covered" in help_text
    assert "change fn.version (or an arg) to get a new store" in help_text


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_coco(tmp_path_factory.mktemp("det"), n=4, per_image=2)[0]


def _boxes(store: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(str(store / "boxes"), mode="r")[:])


@pytest.mark.parametrize("at", ["decoded", "stored"])
def test_boxes_reach_a_transform_in_their_stored_dtype_and_come_back_so(
    pkg: tuple[Path, str], coco: Path, tmp_path: Path, at: str
) -> None:
    _, name = pkg
    seen = tmp_path / "seen.json"
    spec = BuildSpec(size=32, mode="letterbox")
    _build(coco, tmp_path / "d", spec, f"{name}.ops:dtypes", {"seen": str(seen)}, at)
    assert json.loads(seen.read_text())["boxes"] == "float32"  # as stored, as keypoints are
    plain = _build(coco, tmp_path / "plain", spec)
    cast = _build(coco, tmp_path / "f", spec, f"{name}.ops:boxes_as_float32", {}, at)
    assert cast["num_valid"] == plain["num_valid"] == 4
    assert np.array_equal(_boxes(tmp_path / "f"), _boxes(tmp_path / "plain"))  # exact


def test_boxes_moved_at_decoded_are_stored_moved(
    pkg: tuple[Path, str], coco: Path, tmp_path: Path
) -> None:
    _, name = pkg
    spec = BuildSpec(size="64x64", mode="squash")
    _build(coco, tmp_path / "plain", spec)
    _build(coco, tmp_path / "m", spec, f"{name}.ops:boxes_shifted", {"dx": 1.0}, "decoded")
    plain, moved = _boxes(tmp_path / "plain"), _boxes(tmp_path / "m")
    real = plain[..., 4] >= 0
    assert (moved[..., 0][real] > plain[..., 0][real]).all()  # moved right, then resized
    assert (moved[~real] == -1).all()  # padding rows stay padding


def test_at_stored_a_transform_that_asks_is_handed_the_valid_region(
    pkg: tuple[Path, str], tmp_path: Path
) -> None:
    _, name = pkg
    src = tmp_path / "wide" / "a"
    src.mkdir(parents=True)
    Image.fromarray(np.zeros((10, 40, 3), np.uint8)).save(src / "0.png")  # 4:1, letterboxed
    spec = BuildSpec(size=16, mode="letterbox")
    attrs = _build(src.parent, tmp_path / "s", spec, f"{name}.ops:valid_region")
    top, left, h, w = zarr.open_array(str(tmp_path / "s" / "extent"), mode="r")[0]
    assert (top, left, h, w) == (6, 0, 4, 16) and attrs["num_valid"] == 1
    image = np.asarray(zarr.open_array(str(tmp_path / "s" / "image"), mode="r")[0])
    assert (image[top : top + h] == 255).all()  # the image painted...
    assert (image[:top] == 0).all() and (image[top + h :] == 0).all()  # ...the padding not


def test_arguments_the_function_does_not_take_are_refused_before_anything_is_written(
    pkg: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, name = pkg
    src = tmp_path / "src" / "a"
    src.mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(src / "0.png")
    out = tmp_path / "s"
    argv = ["build", str(src.parent), "--out", str(out), "--size", "8", "--runner",
            "sequential", "--transform", f"{name}.ops:invert"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--transform-args", '{"topp": 3}'])
    assert exit_.value.code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert (
        "transform " in err
        and "ops:invert does not take the argument(s) ['topp']; it takes ['top']" in err
    )
    with pytest.raises(
        SpecError, match=r"with args \['high'\] \(missing a required argument: 'low'\)"
    ):
        TransformSpec(f"{name}.ops:window", {"high": 3})  # a required one missing
    with pytest.raises(SpecError, match="'extent' is handed by the build"):
        TransformSpec(f"{name}.ops:valid_region", {"extent": [0, 0, 1, 1]})
    assert TransformSpec(f"{name}.ops:takes_any", {"anything": 1}).fingerprint  # **kwargs

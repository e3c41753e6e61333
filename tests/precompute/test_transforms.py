"""The user's transform in the build: identity, checked outputs, errors, both points of the build.

Real user packages (``tests/precompute/userpkg.py``) on ``sys.path``, real images, real stores
built in process (the auto runner's, on small sources).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from PIL import Image

from precompute import BuildSpec, build
from precompute.cli import main
from precompute.errors import DecodeError, SpecError, StoreMismatchError
from precompute.format.layout import open_store_info
from precompute.format.summary import store_summary
from precompute.sample import make_sample_dataset
from precompute.transforms import TransformSpec
from precompute.transforms.fingerprint import user_roots
from tests.precompute.userpkg import edit, importable_package

SPEC = {"size": 16, "shard_samples": 8, "chunk_samples": 4}


@pytest.fixture()
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    return importable_package(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_dataset(tmp_path_factory.mktemp("src"), 12, 3, size_range=(20, 40))


def _build(src: str, out: str, spec: BuildSpec, **kw: Any) -> dict[str, Any]:
    """The build, in this process (the shard tasks one after another: no Ray)."""
    return build(src, out, spec, runner="sequential", progress=False, **kw)


def _image(store: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(str(store / "image"), mode="r")[:])


def test_an_edited_transform_is_another_store_and_a_reverted_one_the_first(
    pkg: tuple[Path, str], src: Path, tmp_path: Path
) -> None:
    root, name = pkg
    spec = BuildSpec(**SPEC)
    first = _build(str(src), str(tmp_path / "a"), spec, transform=f"{name}.ops:invert")
    plain = _build(str(src), str(tmp_path / "plain"), spec)
    assert (_image(tmp_path / "a") == 255 - _image(tmp_path / "plain")).all()  # it ran
    assert first["spec_hash"] != plain["spec_hash"]
    helpers = (root / name / "helpers.py").read_text()
    new = "\n\ndef inverted(img, top=None):\n    return (img // 2).astype(img.dtype)\n"
    edit(root, name, "helpers", new)  # a module it imports, edited in this running process
    with pytest.raises(StoreMismatchError, match="transform's code or arguments changed"):
        _build(str(src), str(tmp_path / "a"), spec, transform=f"{name}.ops:invert")
    second = _build(str(src), str(tmp_path / "b"), spec, transform=f"{name}.ops:invert")
    assert second["spec_hash"] != first["spec_hash"]
    assert (_image(tmp_path / "b") == _image(tmp_path / "plain") // 2).all()  # the new code ran
    (root / name / "helpers.py").write_text(helpers)  # reverted: the first store again
    again = _build(str(src), str(tmp_path / "a"), spec, transform=f"{name}.ops:invert")
    assert again["spec_hash"] == first["spec_hash"] and again["report"] == first["report"]


def test_the_fingerprint_covers_the_users_modules_the_arguments_and_version(
    pkg: tuple[Path, str],
) -> None:
    root, name = pkg
    base = TransformSpec(f"{name}.ops:invert")
    assert TransformSpec(f"{name}.ops:invert").fingerprint == base.fingerprint
    assert TransformSpec(f"{name}.ops:invert", {"top": 200}).fingerprint != base.fingerprint
    assert TransformSpec(f"{name}.ops:as_float").fingerprint != base.fingerprint  # the name
    edit(root, name, "unused", "Y = 2\n")  # a module nothing imports: the same code
    assert base.current().fingerprint == base.fingerprint
    versioned = TransformSpec(f"{name}.ops:versioned")
    edit(root, name, "ops", "\n# a comment\n")  # the source changed...
    assert base.current().fingerprint != base.fingerprint
    assert versioned.current().fingerprint == versioned.fingerprint  # ...its version did not
    assert user_roots(f"{name}.ops:invert") == [str((root / name).resolve())]


def test_a_stored_spec_keeps_its_fingerprint_and_imports_nothing(tmp_path: Path) -> None:
    text = {"name": "not_installed_anywhere.mod:fn", "fingerprint": "ab" * 32}
    spec = BuildSpec.from_dict({**SPEC, "transform": text})
    assert spec.transform is not None and spec.transform.fingerprint == "ab" * 32
    assert spec.to_dict()["transform"] == {**text, "args": {}, "at": "stored"}
    with pytest.raises(SpecError, match=r"cannot import not_installed_anywhere\.mod"):
        spec.transform.current()  # a build takes the code as it is now: refused here
    assert "transform" not in BuildSpec(**SPEC).to_dict()  # no transform: the hash of old


def test_a_store_says_its_transform_and_inspect_shows_it(
    pkg: tuple[Path, str], src: Path, tmp_path: Path
) -> None:
    _, name = pkg
    attrs = _build(
        str(src), str(tmp_path / "s"), BuildSpec(**SPEC), transform=f"{name}.ops:invert",
        transform_args={"top": 200},
    )  # fmt: skip
    got = attrs["spec"]["transform"]
    assert got["name"] == f"{name}.ops:invert" and got["args"] == {"top": 200}
    assert got["at"] == "stored" and len(got["fingerprint"]) == 64
    line = next(x for x in store_summary(tmp_path / "s").splitlines() if x.startswith("transf"))
    assert line == (
        f"transform  {name}.ops:invert at stored, top=200, fingerprint {got['fingerprint'][:16]}"
    )


@pytest.mark.parametrize(
    ("fn", "why"),
    [
        ("as_float", "field 'image' (image) is float32 (16, 16, 3); it stores uint8 (16, 16, 3)"),
        ("squash_half", "field 'image' (image) is uint8 (8, 16, 3); it stores uint8 (16, 16, 3)"),
        ("drops_label", "returned fields ['image']; the sample's are ['image', 'label']"),
        ("label_out_of_range", "field 'label' (label): label -5 is outside the classes"),
    ],
)
def test_outputs_are_checked_against_the_fields_naming_the_sample(
    pkg: tuple[Path, str], src: Path, tmp_path: Path, fn: str, why: str
) -> None:
    _, name = pkg
    with pytest.raises(DecodeError) as err:
        _build(str(src), str(tmp_path / "s"), BuildSpec(**SPEC), transform=f"{name}.ops:{fn}")
    assert err.value.key.endswith((".jpg", ".png"))  # the sample
    assert err.value.reason.startswith(f"transform {name}.ops:{fn}: {why}")


def test_a_transform_that_raises_follows_on_error_and_is_named_in_the_report(
    pkg: tuple[Path, str], src: Path, tmp_path: Path
) -> None:
    _, name = pkg
    bad = "circles/0000.png"
    fn = f"{name}.ops:fails_on"
    with pytest.raises(DecodeError, match=f"transform {fn}: raised ValueError: refused {bad}"):
        _build(str(src), str(tmp_path / "r"), BuildSpec(**SPEC), transform=fn,
              transform_args={"suffix": bad})  # fmt: skip
    assert not open_store_info(tmp_path / "r", require_complete=False).attrs["complete"]
    spec = BuildSpec(**{**SPEC, "on_error": "skip"})
    attrs = _build(str(src), str(tmp_path / "s"), spec, transform=fn,
                  transform_args={"suffix": bad})  # fmt: skip
    assert attrs["report"]["skipped"] == [
        {"key": bad, "reason": f"transform {fn}: raised ValueError: refused {bad}"}
    ]
    assert attrs["num_valid"] == 11


def test_a_transform_that_cannot_be_imported_is_refused_before_anything_is_written(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SpecError, match="cannot import no_such_pkg_here"):
        _build(str(src), str(tmp_path / "s"), BuildSpec(**SPEC),
              transform="no_such_pkg_here.ops:fn")  # fmt: skip
    assert not (tmp_path / "s").exists()

    def in_a_script(sample: Any, key: str) -> Any:
        return sample

    in_a_script.__module__, in_a_script.__qualname__ = "__main__", "in_a_script"
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None)  # python script.py
    with pytest.raises(SpecError, match=r"a script \(__main__\)"):
        TransformSpec.of(in_a_script)
    with pytest.raises(SpecError, match="<lambda>' cannot be imported by name"):
        TransformSpec.of(lambda s, k: s)


def test_build_takes_the_function_itself(pkg: tuple[Path, str], src: Path, tmp_path: Path) -> None:
    import importlib

    _, name = pkg
    fn = importlib.import_module(f"{name}.ops").invert
    by_fn = _build(str(src), str(tmp_path / "a"), BuildSpec(**SPEC), transform=fn)
    by_name = _build(
        str(src), str(tmp_path / "a"), BuildSpec(**SPEC), transform=f"{name}.ops:invert",
    )  # fmt: skip
    assert by_fn["spec_hash"] == by_name["spec_hash"]


def _xrays(root: Path) -> Path:
    """Class folders of 16-bit grey PNGs (a ramp per image, a CT-like range)."""
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            ramp = np.linspace(0, 4000 + 1000 * i, 40 * 30).reshape(30, 40).astype(np.uint16)
            Image.fromarray(ramp).save(root / c / f"{i}.png")
    return root


def test_at_decoded_a_16_bit_source_is_windowed_to_8_bits_before_the_resize(
    pkg: tuple[Path, str], tmp_path: Path
) -> None:
    _, name = pkg
    src = _xrays(tmp_path / "ct")
    spec = BuildSpec(size="40x30", mode="squash")
    _build(str(src), str(tmp_path / "s"), spec, transform=f"{name}.ops:window",
          transform_args={"low": 1000, "high": 3000}, transform_at="decoded",)  # fmt: skip
    stored = _image(tmp_path / "s")
    assert stored.shape == (6, 30, 40, 3) and stored.dtype == np.uint8
    for k, key in enumerate(zarr.open_array(str(tmp_path / "s" / "key"), mode="r")[:]):
        ramp = np.asarray(Image.open(src / key), dtype=np.float64)  # 40x30: no resize
        want = np.rint(np.clip((ramp - 1000) / 2000, 0, 1) * 255).astype(np.uint8)
        assert (stored[k, ..., 0] == want).all() and (stored[k, ..., 2] == want).all()


def test_at_decoded_a_crop_gives_every_spatial_field_a_new_frame(
    pkg: tuple[Path, str], tmp_path: Path
) -> None:
    _, name = pkg
    seg = tmp_path / "seg"
    (seg / "images").mkdir(parents=True)
    (seg / "masks").mkdir()
    image = np.zeros((40, 40, 3), np.uint8)
    image[:20, :20] = 200
    mask = np.zeros((40, 40), np.uint8)
    mask[:20, :20] = 1
    Image.fromarray(image).save(seg / "images" / "x.png")
    Image.fromarray(mask).save(seg / "masks" / "x.png")
    spec = BuildSpec(
        size=20, mode="squash",
        fields=(FieldSpecs.image, FieldSpecs.mask),
    )  # fmt: skip
    _build(str(seg), str(tmp_path / "s"), spec, transform=f"{name}.ops:crop_top_left",
          transform_at="decoded")  # fmt: skip
    assert (_image(tmp_path / "s") == 200).all()  # the quarter kept, at full resolution
    assert (np.asarray(zarr.open_array(str(tmp_path / "s" / "mask"), mode="r")[:]) == 1).all()


class FieldSpecs:
    """The fields of a segmentation store."""

    from precompute.fields import FieldSpec

    image = FieldSpec("image", "image", {})
    mask = FieldSpec("mask", "mask", {"classes": 2})


def test_the_cli_takes_a_transform_with_arguments(
    pkg: tuple[Path, str], src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, name = pkg
    out = tmp_path / "s"
    argv = ["build", str(src), "--out", str(out), "--size", "16", "--quiet", "--runner",
            "sequential",
            "--transform", f"{name}.ops:invert", "--transform-args", '{"top": 100}']  # fmt: skip
    main(argv)
    spec: dict[str, Any] = open_store_info(out).spec.to_dict()
    assert spec["transform"]["args"] == {"top": 100}
    with pytest.raises(SystemExit) as exit_:
        main([*argv[:-1], "{top: 1}"])
    assert exit_.value.code == 2
    assert "--transform-args: not JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["build", str(src), "--out", str(tmp_path / "t"), "--transform-at", "decoded",
              "--runner", "sequential"])  # fmt: skip
    assert "need --transform" in capsys.readouterr().err
    assert json.loads((out / "zarr.json").read_text())  # the store is whole

"""Real builds of stores with fields (format v2): segmentation folders and field manifests."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from PIL import Image

from precompute.cli import main
from precompute.errors import DecodeError, SourceError, SpecError, StoreIncompleteError
from precompute.fields import KINDS, FieldSpec, Kind, Storage, register_kind
from precompute.format.layout import open_store_info
from precompute.format.verify import verify_store
from precompute.job import build
from precompute.spec import BuildSpec
from tests.precompute.fielddata import (
    COLORMAP,
    make_keypoints_manifest,
    make_labels_manifest,
    make_segmentation,
    mask_ids,
    palette_mask,
    rgb_mask,
    save,
    size_of,
)

S = 32
SEG = (FieldSpec("image", "image"), FieldSpec("mask", "mask", {"classes": 4}))


def _spec(**kw: object) -> BuildSpec:
    base: dict[str, object] = {"size": S, "shard_samples": 8, "chunk_samples": 4, "seed": 5}
    return BuildSpec(**{**base, **kw})  # type: ignore[arg-type]


def _read(store: Path) -> dict[str, np.ndarray]:
    names = [p.parent.name for p in store.glob("*/zarr.json")]
    return {name: np.asarray(zarr.open_array(str(store / name), mode="r")[:]) for name in names}


def _files(store: Path) -> dict[str, bytes]:
    """Every array file and shard marker's ``files`` (not the timed report)."""
    out = {
        p.relative_to(store).as_posix(): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.parent != store and "_nostall" not in p.parts
    }
    for marker in sorted((store / "_nostall" / "shards").glob("*.json")):
        out[marker.name] = json.dumps(json.loads(marker.read_text())["files"]).encode()
    return out


@pytest.fixture(scope="module")
def seg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_segmentation(tmp_path_factory.mktemp("seg"), 20)


def _nearest(n_out: int, n_src: int) -> np.ndarray:
    """Source index of each of ``n_out`` output pixels spread over ``n_src`` (pixel centres)."""
    return np.floor((np.arange(n_out) + 0.5) * n_src / n_out).astype(int)


def test_v1_spec_hashes_are_unchanged() -> None:
    # computed before BuildSpec had fields: v1 stores and cache keys keep their identity
    assert BuildSpec().digest() == (
        "001f46fd816f222d59b340cad2702e929bf9daec8d4b06be9cbe05488f4503d7"
    )
    spec = BuildSpec(size=32, mode="letterbox", variants=2, on_error="skip")
    assert spec.digest() == "804800e8cd7a8d5433df35f9c81d28fcf2f37cb19ab9aa830a1bc8262f1d2f40"
    assert "fields" not in BuildSpec().to_dict()
    with_fields = BuildSpec(fields=SEG)
    assert with_fields.to_dict()["fields"][1] == SEG[1].to_dict()
    assert BuildSpec.from_dict(with_fields.to_dict()) == with_fields
    assert with_fields.digest() != BuildSpec().digest()


def test_variants_with_fields_are_refused_naming_the_option() -> None:
    with pytest.raises(SpecError, match=r"variants 2 with fields"):
        BuildSpec(variants=2, fields=SEG)


@pytest.mark.ray
def test_a_segmentation_folder_is_never_two_classes(
    ray_local: None, seg: Path, tmp_path: Path
) -> None:
    with pytest.raises(SpecError, match=r"segmentation folder.*mask\.classes.*--mask-classes"):
        build(str(seg), str(tmp_path / "s"), _spec(), progress=False)
    assert not (tmp_path / "s" / "zarr.json").exists()


@pytest.mark.ray
def test_segmentation_letterbox_masks_nearest_and_padded(
    ray_local: None, seg: Path, tmp_path: Path
) -> None:
    attrs = build(
        str(seg), str(tmp_path / "a"), _spec(mode="letterbox", fields=SEG), progress=False
    )
    assert attrs["version"] == 2 and attrs["num_valid"] == 20
    assert attrs["fields"]["mask"]["fill"] == 255 and attrs["report"]["classes"] == {}
    data = _read(tmp_path / "a")
    assert set(data) == {"image", "mask", "extent", "valid", "key"}
    assert data["valid"].tolist() == [1] * 20
    for slot, key in enumerate(data["key"]):
        i = int(Path(key).stem)
        w, h = size_of(i)
        nw, nh = (S, max(1, round(h * S / w))) if w >= h else (max(1, round(w * S / h)), S)
        top, left = (S - nh) // 2, (S - nw) // 2
        assert data["extent"][slot].tolist() == [top, left, nh, nw]
        want = np.full((S, S), 255, np.uint8)
        src = mask_ids(i, (w, h))
        want[top : top + nh, left : left + nw] = src[_nearest(nh, h)[:, None], _nearest(nw, w)]
        assert np.array_equal(data["mask"][slot], want), key
        rgb = Image.open(seg / key).convert("RGB").resize((nw, nh), Image.Resampling.BILINEAR)
        assert np.array_equal(data["image"][slot][top : top + nh, left : left + nw], rgb)
    assert verify_store(tmp_path / "a") == []
    again = build(
        str(seg), str(tmp_path / "b"), _spec(mode="letterbox", fields=SEG), progress=False
    )
    assert again["spec_hash"] == attrs["spec_hash"]
    assert _files(tmp_path / "a") == _files(tmp_path / "b")  # same spec, same bytes


@pytest.mark.ray
def test_rgb_masks_through_the_colormap(ray_local: None, tmp_path: Path) -> None:
    src = make_segmentation(tmp_path / "rgb", 6, rgb=True)
    fields = (SEG[0], FieldSpec("mask", "mask", {"classes": 4, "colormap": COLORMAP}))
    build(str(src), str(tmp_path / "s"), _spec(mode="squash", fields=fields), progress=False)
    data = _read(tmp_path / "s")
    for slot, key in enumerate(data["key"]):
        i = int(Path(key).stem)
        w, h = size_of(i)
        want = mask_ids(i, (w, h))[_nearest(S, h)[:, None], _nearest(S, w)]
        assert np.array_equal(data["mask"][slot], want)


@pytest.fixture
def bad_seg(tmp_path: Path) -> Path:
    root = make_segmentation(tmp_path / "bad", 8)
    save(root / "images" / "x_size.png", Image.new("RGB", (30, 30), "red"))
    save(root / "masks" / "x_size.png", palette_mask(np.zeros((20, 20), np.uint8)))
    save(root / "images" / "x_range.png", Image.new("RGB", (30, 30), "red"))
    save(root / "masks" / "x_range.png", palette_mask(np.full((30, 30), 9, np.uint8)))
    save(root / "images" / "x_rgb.png", Image.new("RGB", (30, 30), "red"))
    save(root / "masks" / "x_rgb.png", rgb_mask(np.zeros((30, 30), np.uint8)))
    save(root / "masks" / "x_lonely.png", palette_mask(np.zeros((30, 30), np.uint8)))
    return root


@pytest.mark.ray
def test_bad_pairs_are_skipped_as_holes_or_raised(
    ray_local: None, bad_seg: Path, tmp_path: Path
) -> None:
    attrs = build(
        str(bad_seg), str(tmp_path / "s"), _spec(fields=SEG, on_error="skip"), progress=False
    )
    reasons = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    assert reasons["masks/x_lonely.png"] == "no image images/x_lonely.*"
    assert reasons["masks/x_size.png"] == "field 'mask' is 20x20 but the image is 30x30"
    assert "mask values [9] are outside the classes 0..3" in reasons["masks/x_range.png"]
    assert "needs a colormap" in reasons["masks/x_rgb.png"]
    assert attrs["num_valid"] == 8 and attrs["layout"]["num_samples"] == 11
    data = _read(tmp_path / "s")
    holes = data["valid"] == 0
    assert holes.sum() == 3 and set(data["key"][holes]) == {""}
    assert (data["mask"][holes] == 255).all() and not data["image"][holes].any()
    assert not data["extent"][holes].any()
    assert verify_store(tmp_path / "s") == []
    with pytest.raises(SourceError, match=r"masks/x_lonely\.png: no image images/x_lonely\.\*"):
        build(str(bad_seg), str(tmp_path / "r"), _spec(fields=SEG), progress=False)
    (bad_seg / "masks" / "x_lonely.png").unlink()
    with pytest.raises(DecodeError, match=r"masks/(x_size|x_range|x_rgb)\.png"):
        build(str(bad_seg), str(tmp_path / "r"), _spec(fields=SEG), progress=False)
    assert not open_store_info(tmp_path / "r", require_complete=False).attrs["complete"]


def _frame_map(w: int, h: int, mode: str) -> tuple[float, float, float, float, float, float]:
    """``(left, top, scale_x, scale_y, off_x, off_y)``: ``x' = (x - left) * scale_x + off_x``."""
    if mode == "center-crop":
        side = min(w, h)
        return (w - side) / 2, (h - side) / 2, S / side, S / side, 0, 0
    nw, nh = (S, max(1, round(h * S / w))) if w >= h else (max(1, round(w * S / h)), S)
    return 0, 0, nw / w, nh / h, (S - nw) // 2, (S - nh) // 2


@pytest.mark.ray
@pytest.mark.parametrize("mode", ["center-crop", "letterbox"])
def test_keypoints_are_the_exact_map_into_the_stored_frame(
    ray_local: None, tmp_path: Path, mode: str
) -> None:
    manifest = make_keypoints_manifest(tmp_path / "kp", 12)
    attrs = build(str(manifest), str(tmp_path / "s"), _spec(mode=mode), progress=False)
    assert attrs["fields"]["keypoints"]["options"]["points"] == 5  # learned from the source
    assert attrs["fields"]["label"]["options"]["classes"] == 3
    assert attrs["report"]["classes"] == {"label": ["cat", "dog", "eel"]}
    data = _read(tmp_path / "s")
    lines = {json.loads(t)["image"]: json.loads(t) for t in manifest.read_text().splitlines()}
    cut = 0
    for slot, key in enumerate(data["key"]):
        doc = lines[key]
        w, h = Image.open(manifest.parent / key).size
        left, top, sx, sy, ox, oy = _frame_map(w, h, mode)
        t, lf, eh, ew = data["extent"][slot].tolist()
        for (x, y, v), got in zip(doc["keypoints"], data["keypoints"][slot], strict=True):
            xs, ys = (x - left) * sx + ox, (y - top) * sy + oy
            inside = lf <= xs < lf + ew and t <= ys < t + eh
            cut += not inside
            assert got.tolist() == pytest.approx([xs, ys, v if inside else 0.0], abs=1e-4)
        assert data["label"][slot] == ["cat", "dog", "eel"].index(doc["label"])
    assert (cut > 0) == (mode == "center-crop")  # only the crop cuts points off
    assert verify_store(tmp_path / "s") == []


@pytest.mark.ray
def test_a_labels_manifest_is_multi_hot(ray_local: None, tmp_path: Path) -> None:
    manifest = make_labels_manifest(tmp_path / "tags", 12)
    attrs = build(str(manifest), str(tmp_path / "s"), _spec(), progress=False)
    assert attrs["fields"]["labels"]["shape"] == [5]
    data = _read(tmp_path / "s")
    for slot, key in enumerate(data["key"]):
        i = int(Path(key).stem)
        want = np.zeros(5, np.uint8)
        want[sorted({i % 5, (i * 3) % 5}) if i % 4 else []] = 1
        assert data["labels"][slot].tolist() == want.tolist()


def _reopen_incomplete(store: Path, shard: int) -> None:
    """Undo a completed build down to a killed one: no completion marker, one shard lost."""
    meta = store / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["nostall"]["complete"] = False
    meta.write_text(json.dumps(doc))
    (store / "_nostall" / "shards" / f"{shard:06d}.json").unlink()
    for name in ("image", "mask", "valid"):
        (store / name / "c" / str(shard)).rename(store / f"gone-{name}")


@pytest.mark.ray
def test_an_interrupted_v2_build_resumes_to_the_same_bytes(
    ray_local: None, seg: Path, tmp_path: Path
) -> None:
    spec = _spec(fields=SEG)
    build(str(seg), str(tmp_path / "s"), spec, progress=False)
    before = _files(tmp_path / "s")
    _reopen_incomplete(tmp_path / "s", 1)
    for name in ("image", "mask", "valid"):
        (tmp_path / "s" / f"gone-{name}").rename(tmp_path / f"gone-{name}")
    with pytest.raises(StoreIncompleteError, match="incomplete"):
        open_store_info(tmp_path / "s")
    attrs = build(str(seg), str(tmp_path / "s"), spec, progress=False)
    assert attrs["report"]["shards_built"] == 1 and attrs["report"]["shards_resumed"] == 2
    assert _files(tmp_path / "s") == before


@pytest.mark.ray
def test_verify_names_a_damaged_shard_and_values_written_behind_its_back(
    ray_local: None, seg: Path, tmp_path: Path
) -> None:
    store = tmp_path / "s"
    build(str(seg), str(store), _spec(fields=SEG), progress=False)
    shard_file = store / "mask" / "c" / "1" / "0" / "0"
    raw = bytearray(shard_file.read_bytes())
    raw[10] ^= 0xFF
    shard_file.write_bytes(bytes(raw))
    problems = verify_store(store)
    assert len(problems) == 1 and problems[0].startswith("shard 1: mask: unreadable")
    shard_file.write_bytes(bytes(raw[:10]) + bytes([raw[10] ^ 0xFF]) + bytes(raw[11:]))
    assert verify_store(store) == []
    zarr.open_array(str(store / "mask"), mode="r+")[3, 0, 0] = 7  # a value outside classes
    zarr.open_array(str(store / "valid"), mode="r+")[17] = 2
    problems = verify_store(store)
    bad_mask = "shard 0: field 'mask' (mask): mask values [7] are outside the classes 0..3"
    assert any(p.startswith(bad_mask) for p in problems), problems
    assert "shard 2: valid: values [2] are not 0 or 1" in problems
    assert "shard 2: marker says 4 valid samples, the valid array has 3" in problems


class StampKind(Kind):
    """A tiny kind known only to this test: an inline integer and a companion ``double``."""

    name = "stamp"
    source = "inline"

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((), "int32", -1)

    def companions(self, opts: Mapping[str, Any], size: int) -> Mapping[str, Storage]:
        return {"double": Storage((), "int32", 0)}

    def companion_values(self, value: Any, opts: Mapping[str, Any]) -> Mapping[str, Any]:
        if not isinstance(value, int):
            raise ValueError(f"no double of {value!r}")
        return {"double": np.int32(2 * value)}

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"a stamp is a non-negative integer, got {value!r}")
        return np.asarray(value, dtype=np.int32)

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        if (stored < 0).any():
            raise ValueError("a negative stamp")

    def parse_inline(self, raw: Any) -> Any:
        return int(raw)


if "stamp" not in KINDS:  # also when a Ray worker imports this module to unpickle the kind
    register_kind(StampKind())


@pytest.mark.ray
def test_a_kind_registered_here_needs_no_change_to_the_build(
    ray_local: None, tmp_path: Path
) -> None:
    rows = ["image,stamp"]
    for i in range(10):
        save(tmp_path / "src" / f"{i}.png", Image.new("RGB", (20 + i, 24), (i, 0, 0)))
        rows.append(f"{i}.png,{i if i != 4 else -3}")
    (tmp_path / "src" / "m.csv").write_text("\n".join(rows) + "\n")
    spec = _spec(on_error="skip")
    attrs = build(str(tmp_path / "src" / "m.csv"), str(tmp_path / "s"), spec, progress=False)
    assert list(attrs["fields"]) == ["image", "stamp"]
    assert attrs["report"]["skipped"][0]["key"] == "4.png"
    data = _read(tmp_path / "s")
    assert {"stamp", "stamp.double", "valid"} <= set(data)
    for slot, key in enumerate(data["key"]):
        stamp = int(key.split(".")[0]) if key else -1
        assert data["stamp"][slot] == stamp and data["stamp.double"][slot] == max(0, 2 * stamp)
    assert verify_store(tmp_path / "s") == []
    zarr.open_array(str(tmp_path / "s" / "stamp"), mode="r+")[0] = -5
    assert any("field 'stamp' (stamp): a negative stamp" in p for p in verify_store(tmp_path / "s"))


@pytest.mark.ray
def test_the_cli_builds_a_segmentation_folder(
    ray_local: None, seg: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "s")
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(seg), "--out", out, "--size", "16", "--quiet"])
    assert exit_info.value.code == 2
    assert "--mask-classes" in capsys.readouterr().err
    main(["build", str(seg), "--out", out, "--size", "16", "--quiet", "--mask-classes", "4"])
    info = open_store_info(out)
    assert [f.kind for f in info.fields] == ["image", "mask"]
    assert info.fields[1].options["classes"] == 4
    main(["inspect", out])
    shown = capsys.readouterr().out
    assert "field      mask: mask, 16x16 uint8, classes 4, ignore_index 255" in shown


class RawKind(Kind):
    """A file kind whose decoder and build rule are registered only inside the test below."""

    name = "rawbytes"
    source = "file"
    decoder = "rawbytes"
    spatial = True
    resample = "corner"

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((size, size), "uint8", 0)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(value, dtype=np.uint8)


if "rawbytes" not in KINDS:
    register_kind(RawKind())


def _raw_decoder(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("L"))


def _corner(value: np.ndarray, p: Any, pad: Any) -> np.ndarray:
    out = np.zeros((p.size, p.size), np.uint8)
    out[: min(p.size, value.shape[0]), : min(p.size, value.shape[1])] = value[: p.size, : p.size]
    return out


@pytest.mark.ray
def test_decoders_and_build_rules_are_registries_checked_before_ray(
    ray_local: None, tmp_path: Path
) -> None:
    from precompute.fields.assemble import DECODE, register_decoder
    from precompute.fields.geometry import PLACE, register_rule

    rows = ["image,rawbytes"]
    for i in range(4):
        save(tmp_path / "src" / f"{i}.png", Image.new("RGB", (20, 20), (i * 50, 0, 0)))
        rows.append(f"{i}.png,{i}.png")
    (tmp_path / "src" / "m.csv").write_text("\n".join(rows) + "\n")
    manifest, out = str(tmp_path / "src" / "m.csv"), str(tmp_path / "s")
    fields = (FieldSpec("image", "image"), FieldSpec("rawbytes", "rawbytes"))
    if "rawbytes" not in DECODE:
        with pytest.raises(SpecError, match=r"decodes with 'rawbytes', which no module"):
            build(manifest, out, _spec(fields=fields), progress=False)
        register_decoder("rawbytes", _raw_decoder)
    with pytest.raises(SpecError, match=r"already"):
        register_decoder("rawbytes", _raw_decoder)
    if "corner" not in PLACE:
        with pytest.raises(SpecError, match=r"placed by rule 'corner', which the build lacks"):
            build(manifest, out, _spec(fields=fields), progress=False)
        register_rule("corner", _corner)
    assert not (tmp_path / "s" / "zarr.json").exists()  # refused before anything was written
    build(manifest, out, _spec(fields=fields), progress=False)  # the workers get them too
    data = _read(tmp_path / "s")
    for slot, key in enumerate(data["key"]):
        grey = np.asarray(Image.open(tmp_path / "src" / key).convert("L"))
        assert np.array_equal(data["rawbytes"][slot][:20, :20], grey)
    assert verify_store(tmp_path / "s") == []

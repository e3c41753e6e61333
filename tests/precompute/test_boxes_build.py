"""Real builds of boxes stores: JSONL manifests and COCO files, on the sequential runner and Ray.

Every stored box must be the analytic map of its source box through the sample's placement
(``x' = (x - box_left) * out_w / box_w + offset_left``, clipped to the extent, dropped by the
cut rule), with ``boxes.count`` the boxes kept and the rows after them padding.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr

from precompute.cli import main
from precompute.errors import DecodeError, SourceError
from precompute.fields import FieldSpec
from precompute.fields.geometry import placement
from precompute.format.layout import open_store_info
from precompute.format.verify import verify_store
from precompute.job import build
from precompute.spec import MODES, BuildSpec
from tests.precompute.boxdata import CATEGORIES, draw, frame_of, make_coco

S = 32
ROOT = Path(__file__).resolve().parents[2]


def _spec(mode: str = "letterbox", **fields: object) -> BuildSpec:
    base = {"size": S, "mode": mode, "shard_samples": 8, "chunk_samples": 4, "seed": 3}
    return BuildSpec(**base, **fields)  # type: ignore[arg-type]


def _read(store: Path) -> dict[str, np.ndarray]:
    names = [p.parent.name for p in store.glob("*/zarr.json")]
    return {n: np.asarray(zarr.open_array(str(store / n), mode="r")[:]) for n in names}


def _by_key(store: Path) -> dict[str, tuple[np.ndarray, int]]:
    a = _read(store)
    return {
        str(k): (a["boxes"][i], int(a["boxes.count"][i]))
        for i, k in enumerate(a["key"])
        if a["valid"][i]
    }


def _expected(rows: list[list[float]], w: int, h: int, mode: str, mv: float) -> np.ndarray:
    """The documented rule, written out independently of the build's code."""
    p = placement(w, h, S, mode)
    left, top, right, bottom = p.box
    t, lf, eh, ew = p.extent
    kept = []
    for x0, y0, x1, y1, c in rows:
        cx0, cx1 = np.clip([x0, x1], left, right)
        cy0, cy1 = np.clip([y0, y1], top, bottom)
        if (cx1 - cx0) * (cy1 - cy0) < mv * (x1 - x0) * (y1 - y0):
            continue
        xs = np.clip((np.array([cx0, cx1]) - left) * (p.out[0] / (right - left)) + p.offset[0],
                     lf, lf + ew)  # fmt: skip
        ys = np.clip((np.array([cy0, cy1]) - top) * (p.out[1] / (bottom - top)) + p.offset[1],
                     t, t + eh)  # fmt: skip
        box = np.asarray([xs[0], ys[0], xs[1], ys[1], c], dtype=np.float32)
        if box[2] > box[0] and box[3] > box[1]:
            kept.append(box)
    return np.asarray(kept, dtype=np.float32).reshape(-1, 5)


def _manifest(root: Path, n: int = 12) -> tuple[Path, dict[str, list[list[float]]]]:
    """A JSONL manifest ``image,boxes`` over drawn images; one image with no box."""
    lines, truth = [], {}
    for i in range(n):
        w, h = frame_of(i)
        rows = [] if i == 5 else [[x0 + 0.25, y0, x1, y1 - 0.5, c] for x0, y0, x1, y1, c in
                                  _boxes(i, w, h)]  # fmt: skip
        name = f"pics/{i:02d}.{'png' if i % 3 else 'jpg'}"
        draw(root / name, w, h, rows)
        lines.append(json.dumps({"image": name, "boxes": rows}))
        truth[name] = rows
    (root / "boxes.jsonl").write_text("\n".join(lines) + "\n")
    return root / "boxes.jsonl", truth


def _boxes(i: int, w: int, h: int) -> list[list[float]]:
    """Three boxes: the frame's corners (center-crop cuts them) and one inside."""
    return [[0, 0, w / 3, h / 3, 0], [w / 3, h / 3, 2 * w / 3, 2 * h / 3, 1],
            [w - 9, h - 9, w, h, 2]]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_a_manifests_boxes_are_stored_where_the_placement_maps_them(
    tmp_path: Path, mode: str
) -> None:
    src, truth = _manifest(tmp_path / "src")
    attrs = build(str(src), str(tmp_path / "out"), _spec(mode), runner="sequential", progress=False)
    boxes = next(f for f in open_store_info(tmp_path / "out").spec.fields if f.kind == "boxes")
    assert boxes.options["max_boxes"] == 3 and boxes.options["classes"] == 3  # learned
    assert attrs["fields"]["boxes"]["shape"] == [3, 5] and attrs["fields"]["boxes"]["fill"] == -1
    stored = _by_key(tmp_path / "out")
    assert len(stored) == 12
    dropped = 0
    for key, rows in truth.items():
        w, h = frame_of(int(key[5:7]))
        want = _expected(rows, w, h, mode, 0.1)
        got, count = stored[key]
        assert count == len(want), key
        assert np.array_equal(got[:count], want), (key, got, want)
        assert (got[count:] == -1).all()
        dropped += len(rows) - count
    assert (dropped > 0) == (mode == "center-crop")  # only center-crop cuts the corner boxes
    assert verify_store(tmp_path / "out") == []


def test_a_coco_file_builds_with_its_categories_as_the_class_names(tmp_path: Path) -> None:
    coco, doc = make_coco(tmp_path / "set", n=9, per_image=2, empty=2)
    attrs = build(str(coco), str(tmp_path / "out"), _spec(), runner="sequential", progress=False)
    assert attrs["report"]["classes"] == {"boxes": [c["name"] for c in CATEGORIES]}
    assert attrs["fields"]["boxes"]["options"]["classes"] == 3
    stored = _by_key(tmp_path / "out")
    counts = {key: count for key, (_, count) in stored.items()}
    assert sorted(counts.values()) == [0, 0] + [2] * 7  # images without boxes: count 0
    first = doc["annotations"][0]
    x, y, w, h = first["bbox"]
    cls = [c["id"] for c in CATEGORIES].index(first["category_id"])
    want = _expected([[x, y, x + w, y + h, cls]], *frame_of(0), "letterbox", 0.1)
    assert np.array_equal(stored["images/000.png"][0][0], want[0])


def test_a_box_outside_the_decoded_image_is_noted_and_one_category_is_not(
    tmp_path: Path,
) -> None:
    # a phone photo: stored 80 x 40 with EXIF orientation 6, decoded 40 x 80; its COCO entry
    # (as a tool that ignores EXIF writes it) puts the box in the stored frame, right of x=40
    from PIL import Image

    tmp_path.mkdir(exist_ok=True)
    pixels = np.zeros((40, 80, 3), np.uint8)
    pixels[:, 60:] = 255
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(pixels).save(tmp_path / "turned.jpg", exif=exif.tobytes())
    Image.fromarray(pixels).save(tmp_path / "plain.png")
    doc = {
        "images": [
            {"id": 1, "file_name": "turned.jpg", "width": 80, "height": 40},
            {"id": 2, "file_name": "plain.png", "width": 80, "height": 40},
        ],
        "annotations": [
            {"id": i, "image_id": i, "bbox": [60, 0, 20, 40], "category_id": 1, "iscrowd": 0}
            for i in (1, 2)
        ],
        "categories": [{"id": 1, "name": "person"}],  # one class: a detector's usual task
    }
    (tmp_path / "instances.json").write_text(json.dumps(doc))
    attrs = build(
        str(tmp_path / "instances.json"), str(tmp_path / "out"), _spec(), runner="sequential",
        progress=False,
    )  # fmt: skip
    notes = attrs["report"].get("notes", {})
    assert set(notes) == {"boxes_outside"}  # and no "single_class"
    assert (notes["boxes_outside"]["count"], notes["boxes_outside"]["examples"]) == (
        1,
        ["turned.jpg"],
    )
    counts = {key: count for key, (_, count) in _by_key(tmp_path / "out").items()}
    assert counts == {"turned.jpg": 0, "plain.png": 1}


def test_more_boxes_than_max_boxes_names_the_file_and_both_counts(tmp_path: Path) -> None:
    src, _ = _manifest(tmp_path / "src")
    fields = (FieldSpec("image", "image"), FieldSpec("boxes", "boxes", {"max_boxes": 2}))
    with pytest.raises(DecodeError, match=r"pics/00.jpg: field 'boxes' \(boxes\): 3 boxes, "
                       r"more than max_boxes 2"):  # fmt: skip
        build(str(src), str(tmp_path / "out"), _spec(fields=fields), runner="sequential",
              progress=False)  # fmt: skip


def test_a_bad_box_in_a_manifest_names_the_line_and_the_box(tmp_path: Path) -> None:
    src, _ = _manifest(tmp_path / "src", n=3)
    lines = src.read_text().splitlines()
    row = json.loads(lines[1])
    row["boxes"][1] = [5, 5, 5, 9, 1]  # no width
    lines[1] = json.dumps(row)
    src.write_text("\n".join(lines) + "\n")
    fields = (FieldSpec("image", "image"), FieldSpec("boxes", "boxes", {"max_boxes": 3}))
    with pytest.raises(DecodeError, match=r"pics/01.png: .*box 1 \[5.0, 5.0, 5.0, 9.0, 1.0\]: "
                       r"x0 >= x1"):  # fmt: skip
        build(str(src), str(tmp_path / "o"), _spec(fields=fields), runner="sequential",
              progress=False)  # fmt: skip
    row["boxes"][1] = [5, 5, 6, "x", 1]
    lines[1] = json.dumps(row)
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(SourceError, match=r"line 2: a box coordinate must be a finite number"):
        build(str(src), str(tmp_path / "o2"), _spec(), runner="sequential", progress=False)


def test_the_cli_builds_a_coco_file_with_its_images_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pics = tmp_path / "pics"
    coco, _ = make_coco(tmp_path / "ann", n=6, images=pics)
    out = tmp_path / "store"
    argv = ["build", str(coco), "--out", str(out), "--images", str(pics), "--size", str(S),
            "--max-boxes", "4", "--min-visibility", "0.5", "--runner", "sequential"]  # fmt: skip
    main(argv)  # in-process: the console script's entry point, its exit codes and messages
    assert "fields: image image, boxes boxes" in capsys.readouterr().err
    boxes = next(f for f in open_store_info(out).spec.fields if f.kind == "boxes")
    assert dict(boxes.options) == {
        "classes": 3, "max_boxes": 4, "min_visibility": 0.5, "images": str(pics)
    }  # fmt: skip
    assert sorted(_by_key(out)) == [f"{i:03d}.{'jpg' if i % 2 else 'png'}" for i in range(6)]
    with pytest.raises(SystemExit) as missing:
        main([*argv[:2], "--out", str(tmp_path / "s2"), *argv[6:]])
    assert missing.value.code == 1  # without --images the names are read beside the file
    assert f"No such file or directory: '{tmp_path / 'ann'}/00" in capsys.readouterr().err


def test_the_cli_in_process_without_images_reads_beside_the_file(tmp_path: Path) -> None:
    coco, _ = make_coco(tmp_path / "set", n=4)
    main(["build", str(coco), "--out", str(tmp_path / "o"), "--size", "24", "--runner",
          "sequential", "--quiet"])  # fmt: skip
    info = open_store_info(tmp_path / "o")
    assert info.num_valid == 4 and info.layout.size == 24


@pytest.mark.ray
def test_ray_builds_the_same_boxes_as_the_sequential_runner(
    ray_local: None, tmp_path: Path
) -> None:
    coco, _ = make_coco(tmp_path / "set", n=10, per_image=3, empty=1)
    one = build(str(coco), str(tmp_path / "seq"), _spec("center-crop"), runner="sequential",
                progress=False)  # fmt: skip
    two = build(str(coco), str(tmp_path / "ray"), _spec("center-crop"), progress=False)
    assert one["spec_hash"] == two["spec_hash"]
    a, b = _read(tmp_path / "seq"), _read(tmp_path / "ray")
    for name in ("boxes", "boxes.count", "image", "key", "valid", "extent"):
        assert np.array_equal(a[name], b[name]), name


def test_verify_names_a_stored_box_after_a_padding_row(tmp_path: Path) -> None:
    coco, _ = make_coco(tmp_path / "set", n=6, per_image=2)
    spec = BuildSpec(size=S, mode="letterbox", shard_samples=4, chunk_samples=2)
    build(str(coco), str(tmp_path / "out"), spec, runner="sequential", progress=False)
    assert verify_store(tmp_path / "out") == []
    boxes = zarr.open_array(str(tmp_path / "out" / "boxes"), mode="r+")
    rows = boxes[3]
    rows[0] = -1  # the first box becomes padding, the second stays after it
    boxes[3] = rows
    assert verify_store(tmp_path / "out") == [
        "shard 0: field 'boxes' (boxes): sample 3: a box after a padding row, or a partial pad row"
    ]


def test_a_csv_manifest_takes_the_boxes_flags_on_the_command_line(tmp_path: Path) -> None:
    draw(tmp_path / "a.png", 30, 20, [[1, 2, 10, 12, 0]])
    draw(tmp_path / "b.png", 30, 20, [])
    (tmp_path / "m.csv").write_text('image,boxes\na.png,"[[1, 2, 10, 12, 1]]"\nb.png,[]\n')
    main(["build", str(tmp_path / "m.csv"), "--out", str(tmp_path / "o"), "--size", "15",
          "--mode", "squash", "--max-boxes", "4", "--min-visibility", "0.5", "--runner",
          "sequential", "--quiet"])  # fmt: skip
    boxes = next(f for f in open_store_info(tmp_path / "o").spec.fields if f.kind == "boxes")
    assert dict(boxes.options) == {
        "classes": 2, "max_boxes": 4, "min_visibility": 0.5, "images": None
    }  # fmt: skip
    stored = _by_key(tmp_path / "o")
    assert stored["b.png"][1] == 0 and (stored["b.png"][0] == -1).all()
    assert stored["a.png"][1] == 1 and stored["a.png"][0][0].tolist() == [0.5, 1.5, 5, 9, 1]

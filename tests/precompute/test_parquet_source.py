"""Parquet sources: files written by ``datasets`` build the store of a folder of their images."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.cli import main
from precompute.errors import DecodeError, SourceError, SpecError, StoreMismatchError
from precompute.sources.readers.parquet import (
    infer_parquet_fields,
    is_parquet_source,
    list_parquet,
)
from precompute.sources.resolve import resolve_build
from tests.precompute.fielddata import mask_ids, palette_mask, points_of, save
from tests.precompute.packeddata import (
    CLASSES,
    Rec,
    build_seq,
    by_key,
    packed_spec,
    records,
    resumes_as_a_clean_build,
    store,
    write_folder,
    write_parquet,
)


@pytest.fixture(scope="module")
def recs() -> list:
    """The records of this module's sources (``folder_store`` builds their class folders)."""
    return records(30)


def _hub_layout(root: Path, recs: list, **kw: object) -> Path:
    """A dataset repository's layout: README.md on top, two files under data/."""
    root.mkdir(parents=True)
    (root / "README.md").write_text("# a dataset card\n")
    half = len(recs) // 2
    write_parquet(root / "data" / "train-00000-of-00002.parquet", recs[:half], **kw)
    write_parquet(root / "data" / "train-00001-of-00002.parquet", recs[half:], **kw)
    return root


def test_a_datasets_parquet_builds_the_folder_store_byte_for_byte(
    recs: list, folder_store: Path, tmp_path: Path
) -> None:
    src = _hub_layout(tmp_path / "hub", recs)  # id column = the folder key
    assert is_parquet_source(str(src)) and not is_parquet_source(str(folder_store.parent / "src"))
    attrs = build_seq(src, tmp_path / "out")
    got, want = store(tmp_path / "out"), store(folder_store)
    assert attrs["num_valid"] == len(recs)
    assert attrs["report"]["classes"] == {"label": list(CLASSES)}  # the ClassLabel's names
    assert [f["name"] for f in attrs["spec"]["fields"]] == ["image", "label"]
    for name in ("key", "image", "label"):  # same keys: same plan, same slots
        np.testing.assert_array_equal(got[name], want[name])


def test_keys_are_file_and_row_without_an_id_column_and_columns_pick_the_fields(
    recs: list, folder_store: Path, tmp_path: Path
) -> None:
    coarse = {"coarse_label": [r.label % 2 for r in recs]}
    src = write_parquet(
        tmp_path / "cifar.parquet", recs, ids=False, image="img", label="fine_label",
        extra=coarse, features={"coarse_label": _class_label(["even", "odd"])},
    )  # fmt: skip
    with pytest.raises(SpecError, match=r"fine_label, coarse_label.*--columns label=fine_label"):
        infer_parquet_fields(str(src))
    attrs = build_seq(src, tmp_path / "out", columns={"label": "fine_label"})
    assert [(f["name"], f["kind"]) for f in attrs["spec"]["fields"]] == [
        ("image", "image"),
        ("label", "label"),
    ]
    got, want = store(tmp_path / "out"), store(folder_store)
    slots = by_key(want)
    assert sorted(by_key(got)) == sorted(f"cifar.parquet#{n}" for n in range(len(recs)))
    for key, i in by_key(got).items():
        j = slots[recs[int(key.split("#")[1])].key]
        np.testing.assert_array_equal(got["image"][i], want["image"][j])
        assert got["label"][i] == want["label"][j]


def _class_label(names: list[str]) -> object:
    from datasets import ClassLabel

    return ClassLabel(names=names)


@pytest.mark.parametrize(
    ("columns", "error", "message"),
    [
        ({"image": "picture"}, SourceError, r"no column 'picture' \(--columns image=picture\)"),
        ({"mask2": "image"}, SpecError, r"--columns names 'mask2', which is no kind"),
    ],
)
def test_columns_that_name_nothing_are_refused(
    recs: list, tmp_path: Path, columns: dict, error: type, message: str
) -> None:
    src = write_parquet(tmp_path / "a.parquet", recs[:4])
    with pytest.raises(error, match=message):
        resolve_build(str(src), packed_spec(columns=columns))


def test_columns_on_a_folder_source_are_refused(recs: list, tmp_path: Path) -> None:
    src = write_folder(tmp_path / "f", recs[:6])
    with pytest.raises(
        SpecError, match=r"--columns.*Parquet or WebDataset source; this source has none"
    ):
        resolve_build(str(src), packed_spec(columns={"image": "img"}))


def _damaged(tmp_path: Path, recs: list) -> tuple[Path, str, str]:
    """Row 5's image cut in half, row 9's label null, and a file that is not Parquet."""
    data = [r.data for r in recs]
    data[5] = data[5][: len(data[5]) // 2]
    labels: list[int | None] = [r.label for r in recs]
    labels[9] = None
    root = tmp_path / "bad"
    _write_rows(root / "data.parquet", data, labels, [r.key for r in recs])
    (root / "zz-broken.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    return root, recs[5].key, recs[9].key


def _write_rows(path: Path, data: list, labels: list, ids: list) -> None:
    import datasets
    from datasets import ClassLabel, Dataset, Image

    datasets.disable_progress_bars()
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [{"bytes": d, "path": None} for d in data]
    ds = Dataset.from_dict({"id": ids, "image": images, "label": labels})
    ds = ds.cast_column("image", Image()).cast_column("label", ClassLabel(names=list(CLASSES)))
    ds.to_parquet(str(path), batch_size=4)


def test_bad_rows_and_files_are_skipped_with_their_reasons(recs: list, tmp_path: Path) -> None:
    src, cut, unlabelled = _damaged(tmp_path, recs)
    attrs = build_seq(src, tmp_path / "out", on_error="skip")
    skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    assert skipped["data.parquet#5:image"].startswith("not a readable image")
    assert skipped[unlabelled] == "data.parquet row 9: no label"
    assert skipped["zz-broken.parquet"].startswith("not a readable Parquet file")
    assert attrs["num_valid"] == len(recs) - 2
    keys = set(by_key(store(tmp_path / "out")))
    assert cut not in keys and unlabelled not in keys and len(keys) == len(recs) - 2


def test_bad_rows_and_files_under_raise_name_the_file_and_row(recs: list, tmp_path: Path) -> None:
    src, _, _ = _damaged(tmp_path, recs)
    with pytest.raises(SourceError, match=r"zz-broken\.parquet: not a readable Parquet file"):
        build_seq(src, tmp_path / "o1")
    (src / "zz-broken.parquet").unlink()
    with pytest.raises(SourceError, match=r"data\.parquet row 9: no label"):
        build_seq(src, tmp_path / "o2")
    labels = [r.label for r in recs]
    data = [r.data for r in recs]
    data[5] = data[5][: len(data[5]) // 2]
    _write_rows(src / "data.parquet", data, labels, [r.key for r in recs])
    with pytest.raises(DecodeError) as info:
        build_seq(src, tmp_path / "o3")
    assert info.value.key == "data.parquet#5:image"
    assert _attrs(tmp_path / "o3")["complete"] is False  # resumable, not published


def _label_types() -> dict[str, object]:
    import pyarrow as pa

    return {
        "string": pa.string(),
        "large_string": pa.large_string(),  # Polars' strings
        "dictionary": pa.dictionary(pa.int8(), pa.string()),  # a pandas category
    }


@pytest.mark.parametrize("kind", ["large_string", "dictionary"])
def test_class_names_of_any_arrow_text_type_build_the_string_column_store(
    recs: list, tmp_path: Path, kind: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [CLASSES[r.label] for r in recs[:8]]
    image = pa.array([r.data for r in recs[:8]], pa.binary())
    for name, t in (("string", pa.string()), (kind, _label_types()[kind])):
        labels = pa.array(names, pa.string()).cast(t)
        pq.write_table(pa.table({"image": image, "label": labels}), tmp_path / f"{name}.parquet")
    want = build_seq(tmp_path / "string.parquet", tmp_path / "want")
    got = build_seq(tmp_path / f"{kind}.parquet", tmp_path / "got")
    assert [f["name"] for f in got["spec"]["fields"]] == ["image", "label"]  # not left out
    assert got["report"]["classes"] == want["report"]["classes"] == {"label": sorted(set(names))}
    np.testing.assert_array_equal(
        store(tmp_path / "got")["label"], store(tmp_path / "want")["label"]
    )


def test_a_column_named_as_a_field_that_no_field_reads_is_refused(
    recs: list, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.array([r.data for r in recs[:4]], pa.binary())
    src = tmp_path / "float.parquet"
    pq.write_table(pa.table({"image": image, "label": pa.array([0.0, 1.0, 0.0, 1.0])}), src)
    with pytest.raises(SourceError, match=r"column 'label' holds double, which no field"):
        resolve_build(str(src), packed_spec())


def test_image_cells_that_hold_only_a_path_read_that_file(
    recs: list, folder_store: Path, tmp_path: Path
) -> None:
    # Dataset.to_parquet() of images datasets loaded from local files: {bytes: None, path}
    import datasets
    from datasets import ClassLabel, Dataset, Image

    datasets.disable_progress_bars()
    files = write_folder(tmp_path / "files", recs)
    cols = {
        "id": [r.key for r in recs],
        "image": [str(files / r.key) for r in recs],  # absolute: the file where it lies
        "label": [r.label for r in recs],
    }
    ds = Dataset.from_dict(cols).cast_column("image", Image())
    ds.cast_column("label", ClassLabel(names=list(CLASSES))).to_parquet(str(files / "t.parquet"))
    import pyarrow.parquet as pq

    cells = pq.read_table(files / "t.parquet").column("image").to_pylist()
    assert all(c["bytes"] is None for c in cells)  # what the reader must follow
    attrs = build_seq(files / "t.parquet", tmp_path / "out")
    got, want = store(tmp_path / "out"), store(folder_store)
    assert attrs["num_valid"] == len(recs)
    for name in ("key", "image", "label"):
        np.testing.assert_array_equal(got[name], want[name])
    # a relative path is the Parquet file's neighbour; one that is not there, or a FIFO (whose
    # open() would wait for a writer forever), is named
    import pyarrow as pa

    os.mkfifo(files / "pipe.png")
    table = pq.read_table(files / "t.parquet")
    rows = {"id": [recs[0].key, "x", "y"], "label": [recs[0].label, 0, 0]}
    rows["image"] = [{"bytes": None, "path": p} for p in (recs[0].key, "missing.png", "pipe.png")]
    pq.write_table(pa.Table.from_pydict(rows, schema=table.schema), files / "rel.parquet")
    rel = build_seq(files / "rel.parquet", tmp_path / "rel", on_error="skip")
    missing, pipe = rel["report"]["skipped"]
    assert missing["key"] == "rel.parquet#1:image"
    assert "the cell holds no bytes and its path cannot be read" in missing["reason"]
    assert str(files / "missing.png") in missing["reason"]
    assert pipe == {
        "key": "rel.parquet#2:image",
        "reason": f"{files / 'pipe.png'}: not a regular file (a FIFO)",
    }
    one = store(tmp_path / "rel")
    mine, theirs = by_key(one)[recs[0].key], by_key(want)[recs[0].key]
    np.testing.assert_array_equal(one["image"][mine], want["image"][theirs])


def test_integers_and_names_mixed_over_files_name_both_rows(recs: list, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.array([r.data for r in recs[:2]], pa.binary())
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.table({"image": image, "label": [0, 1]}), tmp_path / "pq" / "a.parquet")
    pq.write_table(pa.table({"image": image, "label": ["x", "y"]}), tmp_path / "pq" / "b.parquet")
    message = r"b\.parquet row 0: label 'x' and a\.parquet row 0's 0 mix integers and class names"
    with pytest.raises(SourceError, match=message):
        build_seq(tmp_path / "pq", tmp_path / "out", on_error="skip")


def test_labels_past_65536_classes_build_and_past_max_label_are_per_row_errors(
    recs: list, tmp_path: Path
) -> None:
    # a landmark set (Google Landmarks v2: 200,000 classes) has labels well past 2**16
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.array([r.data for r in recs[:3]], pa.binary())
    labels = pa.array([0, 200_000, 2**31], pa.int64())  # the last: past MAX_LABEL
    pq.write_table(pa.table({"image": image, "label": labels}), tmp_path / "big.parquet")
    attrs = build_seq(tmp_path / "big.parquet", tmp_path / "out", on_error="skip")
    assert attrs["fields"]["label"]["options"]["classes"] == 200_001
    assert sorted(store(tmp_path / "out")["label"].tolist()) == [0, 200_000]
    assert attrs["report"]["skipped"] == [
        {"key": "big.parquet#2", "reason": "big.parquet row 2: label 2147483648 is larger "
         "than MAX_LABEL 2147483647"}
    ]  # fmt: skip


def _attrs(out: Path) -> dict:
    return json.loads((out / "zarr.json").read_text())["attributes"].get("nostall", {})


def test_a_null_image_cell_is_a_per_input_error(recs: list, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = write_parquet(tmp_path / "n" / "a.parquet", recs[:6])
    table = pq.read_table(path)
    images = table.column("image").to_pylist()
    images[2] = None
    table = table.set_column(1, "image", pa.array(images, table.schema.field("image").type))
    pq.write_table(table, path)
    attrs = build_seq(path.parent, tmp_path / "out", on_error="skip")
    assert attrs["report"]["skipped"] == [
        {"key": "a.parquet#2:image", "reason": "the cell holds no bytes (null)"}
    ]


def test_masks_keypoints_and_tags_build_the_manifest_store(tmp_path: Path) -> None:
    from datasets import Image as ImageFeature
    from datasets import Sequence

    n, lines, cols = 12, [], {"mask": [], "keypoints": [], "labels": []}
    recs = records(n, seed=4)
    for i, r in enumerate(recs):
        w, h = Image.open(io.BytesIO(r.data)).size
        mask = save(tmp_path / "m" / f"{i:03d}.png", palette_mask(mask_ids(i, (w, h), 3)))
        write_folder(tmp_path / "m", [r])
        points, tags = points_of(i, (w, h), 4), sorted({i % 3, (i * 2) % 3})
        cols["mask"].append({"bytes": mask.read_bytes(), "path": None})
        cols["keypoints"].append(points)
        cols["labels"].append(tags)
        doc = {"image": r.key, "mask": f"{i:03d}.png", "keypoints": points, "labels": tags}
        lines.append(json.dumps(doc))
    (tmp_path / "m" / "fields.jsonl").write_text("\n".join(lines) + "\n")
    src = write_parquet(
        tmp_path / "p" / "seg.parquet", recs, extra=cols,
        features={"mask": ImageFeature(), "labels": Sequence(_class_label(list(CLASSES)))},
    )  # fmt: skip
    fields = infer_parquet_fields(str(src), {"mask": {"classes": 3}})
    assert [(f.name, f.kind) for f in fields] == [
        ("image", "image"), ("mask", "mask"), ("label", "label"), ("labels", "labels"),
        ("keypoints", "keypoints"),
    ]  # fmt: skip
    fields = tuple(f for f in fields if f.name != "label")  # the manifest has no label
    spec = [f.to_dict() for f in fields]
    build_seq(tmp_path / "m" / "fields.jsonl", tmp_path / "from-manifest", fields=spec)
    build_seq(src, tmp_path / "from-parquet", fields=spec)
    names = ("key", "image", "mask", "keypoints", "labels", "valid")
    got, want = store(tmp_path / "from-parquet", names), store(tmp_path / "from-manifest", names)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name])
    assert got["valid"].sum() == n


def test_a_killed_build_resumes_to_the_store_of_a_clean_build(tmp_path: Path) -> None:
    recs = records(48, seed=6, side=(400, 600))  # big enough that a shard takes a while
    src = write_parquet(tmp_path / "src" / "big.parquet", recs, rows_per_group=6)
    resumes_as_a_clean_build(src.parent, tmp_path, len(recs))


def test_the_fingerprint_follows_the_files(recs: list, tmp_path: Path) -> None:
    src = _hub_layout(tmp_path / "hub", recs[:12])
    spec = packed_spec()

    def fp(content_hash: bool = False) -> str:
        return resolve_build(str(src), spec, content_hash)[2]

    first, first_content = fp(), fp(True)
    assert fp() == first
    copy = shutil.copytree(src, tmp_path / "copy")
    assert resolve_build(str(copy), spec, True)[2] == first_content  # content: where-free
    path = src / "data" / "train-00001-of-00002.parquet"
    os.utime(path, ns=(1, 1))  # touched: same bytes
    assert fp() != first and fp(True) == first_content
    build_seq(src, tmp_path / "out")
    changed = recs[:12]
    changed[8] = Rec(changed[8].key, recs[20].data, changed[8].label)
    write_parquet(path, changed[6:])  # one image replaced
    assert fp(True) != first_content
    with pytest.raises(StoreMismatchError, match="another spec or source"):
        build_seq(src, tmp_path / "out")


def test_listing_keeps_the_rows_of_every_row_group(recs: list, tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "a.parquet", recs, rows_per_group=7)
    fields = infer_parquet_fields(str(path))
    source = list_parquet(str(path), fields)
    assert [it.key for it in source.items] == sorted(r.key for r in recs)
    by = {r.key: r for r in recs}
    for item in source.items:  # every row group's rows, the right bytes for each key
        assert source.read_bytes(item, "image") == by[item.key].data
        assert item.value("label") == by[item.key].label


@pytest.mark.ray
def test_the_cli_builds_a_parquet_source_with_ray(
    ray_local: None, recs: list, folder_store: Path, tmp_path: Path, capsys
) -> None:
    src = write_parquet(tmp_path / "c.parquet", recs, image="img", label="fine_label")
    out = tmp_path / "out"
    argv = ["build", str(src), "--out", str(out), "--columns", "image=img,label=fine_label"]
    argv += ["--size", "16", "--shard-samples", "8", "--chunk-samples", "4", "--seed", "3"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--quiet"])
        raise SystemExit(0)
    assert info.value.code == 0, capsys.readouterr().err
    got, want = store(out), store(folder_store)
    for name in ("key", "image", "label"):
        np.testing.assert_array_equal(got[name], want[name])
    assert _attrs(out)["spec"]["columns"] == {"image": "img", "label": "fine_label"}

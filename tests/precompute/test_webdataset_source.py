"""WebDataset sources: shards written by ``webdataset.ShardWriter`` build the folder's store."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.cli import main
from precompute.errors import DecodeError, SourceError, SpecError, StoreMismatchError
from precompute.sources.readers.webdataset import (
    infer_webdataset_fields,
    is_webdataset_source,
    list_webdataset,
)
from precompute.sources.resolve import resolve_build
from tests.precompute.fielddata import mask_ids, palette_mask, points_of, save
from tests.precompute.packeddata import (
    build_seq,
    by_key,
    packed_spec,
    records,
    resumes_as_a_clean_build,
    store,
    write_folder,
    write_shards,
)


@pytest.fixture(scope="module")
def recs() -> list:
    """The records of this module's sources (``folder_store`` builds their class folders)."""
    return records(30, seed=1)


def _same_per_key(got: dict, want: dict, recs: list) -> None:
    """Every key of ``got`` (a WebDataset key) holds the pixels and label of its folder key."""
    folder_key = {r.stem: r.key for r in recs}
    slots = by_key(want)
    assert sorted(by_key(got)) == sorted(folder_key)
    for key, i in by_key(got).items():
        j = slots[folder_key[key]]
        np.testing.assert_array_equal(got["image"][i], want["image"][j])
        assert got["label"][i] == want["label"][j]


def test_shardwriter_shards_build_the_folder_store(
    recs: list, folder_store: Path, tmp_path: Path
) -> None:
    src = write_shards(tmp_path / "shards", recs, per_shard=7)  # 5 shards, png + jpg members
    assert is_webdataset_source(str(src)) and not is_webdataset_source(str(folder_store))
    attrs = build_seq(src, tmp_path / "out")
    assert [(f["name"], f["kind"]) for f in attrs["spec"]["fields"]] == [
        ("image", "image"),
        ("label", "label"),
    ]
    assert attrs["num_valid"] == len(recs)
    assert attrs["report"]["bytes_read"] == sum(len(r.data) for r in recs)  # each member once
    _same_per_key(store(tmp_path / "out"), store(folder_store), recs)


def test_one_shard_and_columns_name_the_members(
    recs: list, folder_store: Path, tmp_path: Path
) -> None:
    import webdataset as wds

    path = tmp_path / "one.tar"
    with wds.TarWriter(str(path)) as sink:  # image under "img.png"/"img.jpg", label as text
        for r in recs:
            sink.write({"__key__": r.stem, f"img.{r.ext}": r.data, "txt": str(r.label)})
    with pytest.raises(SourceError, match=r"no image member"):
        infer_webdataset_fields(str(path))
    attrs = build_seq(path, tmp_path / "out", columns={"image": "img.png;img.jpg"})
    assert attrs["report"]["skipped"] == []
    _same_per_key(store(tmp_path / "out"), store(folder_store), recs)


def test_pngs_after_the_first_samples_of_jpgs_are_images_too(tmp_path: Path) -> None:
    """A converted dataset: 20 .jpg samples, then .png ones; every one builds, none refused."""
    recs = records(40, seed=2)
    ordered = sorted(recs, key=lambda r: (r.ext != "jpg", r.stem))  # the jpgs first
    assert [r.ext for r in ordered[:20]] == ["jpg"] * 20
    src = write_shards(tmp_path / "shards", ordered, per_shard=40)  # one shard
    attrs = build_seq(src, tmp_path / "out")
    assert attrs["report"]["skipped"] == [] and attrs["report"]["num_valid"] == len(recs)
    build_seq(write_folder(tmp_path / "folder", recs), tmp_path / "folder-out")
    _same_per_key(store(tmp_path / "out"), store(tmp_path / "folder-out"), recs)
    fields = infer_webdataset_fields(str(src))
    assert dict(list_webdataset(str(src), fields).columns)["image"] == "jpg;png"  # those read
    jpgs = write_shards(tmp_path / "jpgs", ordered[:15])  # the columns of a source of jpgs
    assert dict(list_webdataset(str(jpgs), fields).columns)["image"] == "jpg"


def test_a_mapped_suffix_missing_from_a_sample_is_a_per_input_error(
    recs: list, tmp_path: Path
) -> None:
    src = write_shards(tmp_path / "s", recs[:6])
    with pytest.raises(SourceError, match=r"cat/000: shard-000000\.tar: no jpg member"):
        resolve_build(str(src), packed_spec(columns={"image": "jpg"}))
    source = resolve_build(str(src), packed_spec(columns={"image": "jpg"}, on_error="skip"))[0]
    assert [it.key for it in source.items] == sorted(r.stem for r in recs[:6] if r.ext == "jpg")
    assert len(source.skipped) == 3


def _damaged(tmp_path: Path, recs: list) -> Path:
    """Three shards: sample 4's jpg cut in half, sample 7's cls empty, the last shard cut."""
    data = {i: r.data for i, r in enumerate(recs)}
    data[4] = data[4][: len(data[4]) // 2]
    src = tmp_path / "bad"
    src.mkdir()
    import webdataset as wds

    with wds.ShardWriter(str(src / "shard-%06d.tar"), maxcount=10, verbose=0) as sink:
        for i, r in enumerate(recs):
            sink.write({"__key__": r.stem, r.ext: data[i], "cls": "" if i == 7 else r.label})
    last = src / "shard-000002.tar"
    with tarfile.open(last) as tar:
        third = tar.getmembers()[2].offset  # the header of the second sample's first member
    last.write_bytes(last.read_bytes()[: third + 100])  # cut inside that header
    return src


def test_bad_members_and_shards_are_skipped_with_their_reasons(recs: list, tmp_path: Path) -> None:
    src = _damaged(tmp_path, recs)
    attrs = build_seq(src, tmp_path / "out", on_error="skip")
    skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    cut = f"shard-000000.tar#{recs[4].stem}.{recs[4].ext}"
    assert skipped[cut] == "cannot decode (OSError: image file is truncated)"
    assert skipped[recs[7].stem] == "shard-000000.tar: no label"
    assert skipped["shard-000002.tar"].startswith("not a readable tar shard after ")
    assert "no valid tar header at byte" in skipped["shard-000002.tar"]
    keys = set(by_key(store(tmp_path / "out")))
    assert {recs[i].stem for i in range(20) if i not in (4, 7)} <= keys
    assert recs[4].stem not in keys and recs[7].stem not in keys
    assert len(keys) == attrs["num_valid"] < 28


def test_bad_members_and_shards_under_raise_name_the_shard_and_member(
    recs: list, tmp_path: Path
) -> None:
    src = _damaged(tmp_path, recs)
    with pytest.raises(SourceError, match=r"shard-000002\.tar: not a readable tar shard"):
        build_seq(src, tmp_path / "o1")
    (src / "shard-000002.tar").unlink()
    with pytest.raises(SourceError, match=rf"{recs[7].stem}: shard-000000\.tar: no label"):
        build_seq(src, tmp_path / "o2")
    with pytest.raises(DecodeError) as info:
        build_seq(src, tmp_path / "o3", fields=_image_only())
    assert info.value.key == f"shard-000000.tar#{recs[4].stem}.{recs[4].ext}"


def _image_only() -> list[dict]:
    return [{"name": "image", "kind": "image"}]


def test_a_member_past_the_end_of_its_shard_is_named(recs: list, tmp_path: Path) -> None:
    src = write_shards(tmp_path / "s", recs[:4])
    fields = infer_webdataset_fields(str(src))
    shard = src / "shard-000000.tar"
    with tarfile.open(shard) as tar:
        image = next(m for m in tar if m.name.startswith(recs[1].stem) and m.size > 100)
    shard.write_bytes(shard.read_bytes()[: image.offset_data + 50])  # cut inside that image
    message = r"shard-000000\.tar: not a readable tar shard after 2 samples \(cut short in member "
    message += image.name
    with pytest.raises(SourceError, match=message):
        list_webdataset(str(src), fields)
    skipped = list_webdataset(str(src), fields, "skip")
    assert [it.key for it in skipped.items] == [recs[0].stem]  # the cut sample has no image


def test_a_shard_cut_between_two_members_is_named(recs: list, tmp_path: Path) -> None:
    # what a tar writer killed before it closed the shard leaves: whole members, no end blocks
    src = write_shards(tmp_path / "s", recs[:4])
    fields = infer_webdataset_fields(str(src))
    shard = src / "shard-000000.tar"
    with tarfile.open(shard) as tar:
        members = tar.getmembers()
    last = next(m for m in reversed(members) if m.name.startswith(recs[1].stem))
    end = last.offset_data + -(-last.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
    shard.write_bytes(shard.read_bytes()[:end])  # the second sample whole, then nothing
    message = r"shard-000000\.tar: not a readable tar shard after 2 samples \(no end-of-archive"
    with pytest.raises(SourceError, match=message):
        list_webdataset(str(src), fields)
    skipped = list_webdataset(str(src), fields, "skip")
    assert [it.key for it in skipped.items] == [r.stem for r in recs[:2]]


def test_json_keypoints_tags_and_seg_png_masks_build_the_manifest_store(tmp_path: Path) -> None:
    import webdataset as wds

    n, lines = 12, []
    recs = records(n, seed=5)
    (tmp_path / "w").mkdir()
    with wds.ShardWriter(str(tmp_path / "w" / "%04d.tar"), maxcount=5, verbose=0) as sink:
        for i, r in enumerate(recs):
            w, h = Image.open(io.BytesIO(r.data)).size
            mask = save(tmp_path / "m" / f"{i:03d}.png", palette_mask(mask_ids(i, (w, h), 3)))
            write_folder(tmp_path / "m", [r])
            doc = {"keypoints": points_of(i, (w, h), 4), "labels": sorted({i % 3, (i * 2) % 3})}
            sink.write(
                {"__key__": r.stem, r.ext: r.data, "seg.png": mask.read_bytes(), "json": doc}
            )
            lines.append(json.dumps({"image": r.key, "mask": f"{i:03d}.png", **doc}))
    (tmp_path / "m" / "fields.jsonl").write_text("\n".join(lines) + "\n")
    src = tmp_path / "w"
    fields = infer_webdataset_fields(str(src), {"mask": {"classes": 3}})
    assert [(f.name, f.kind) for f in fields] == [
        ("image", "image"), ("mask", "mask"), ("labels", "labels"), ("keypoints", "keypoints"),
    ]  # fmt: skip
    listed = list_webdataset(str(src), fields)
    assert dict(listed.columns) == {
        "image": "jpg;png", "mask": "seg.png", "labels": "json:labels",
        "keypoints": "json:keypoints",
    }  # fmt: skip
    spec = [f.to_dict() for f in fields]
    build_seq(tmp_path / "m" / "fields.jsonl", tmp_path / "from-manifest", fields=spec)
    build_seq(src, tmp_path / "from-shards", fields=spec)
    names = ("image", "mask", "keypoints", "labels", "valid")
    got = store(tmp_path / "from-shards", (*names, "key"))
    want = store(tmp_path / "from-manifest", (*names, "key"))
    slots = by_key(want)
    folder_key = {r.stem: r.key for r in recs}
    for key, i in by_key(got).items():
        for name in names:
            np.testing.assert_array_equal(got[name][i], want[name][slots[folder_key[key]]])
    assert got["valid"].sum() == n


def test_a_killed_build_resumes_to_the_store_of_a_clean_build(tmp_path: Path) -> None:
    recs = records(48, seed=7, side=(400, 600))  # big enough that a shard takes a while
    src = write_shards(tmp_path / "src", recs, per_shard=10)
    resumes_as_a_clean_build(src, tmp_path, len(recs))


def test_the_fingerprint_follows_the_shards(recs: list, tmp_path: Path) -> None:
    src = write_shards(tmp_path / "s", recs[:12], per_shard=6)
    spec = packed_spec()

    def fp(content_hash: bool = False, where: Path = src) -> str:
        return resolve_build(str(where), spec, content_hash)[2]

    first, first_content = fp(), fp(True)
    assert fp() == first
    copy = shutil.copytree(src, tmp_path / "copy")
    assert fp(True, copy) == first_content
    shard = src / "shard-000001.tar"
    os.utime(shard, ns=(1, 1))
    assert fp() != first and fp(True) == first_content
    build_seq(src, tmp_path / "out")
    data = bytearray(shard.read_bytes())
    with tarfile.open(shard) as tar:  # one pixel byte of one image, same size and offsets
        member = next(m for m in tar if m.name.endswith(".png"))
    data[member.offset_data + member.size - 20] ^= 0x01
    shard.write_bytes(bytes(data))
    assert fp(True) != first_content
    with pytest.raises(StoreMismatchError, match="another spec or source"):
        build_seq(src, tmp_path / "out")


def test_listing_reads_headers_and_small_members_only(recs: list, tmp_path: Path) -> None:
    src = write_shards(tmp_path / "s", recs, per_shard=9)
    source = list_webdataset(str(src), infer_webdataset_fields(str(src)))
    by = {r.stem: r for r in recs}
    assert [it.key for it in source.items] == sorted(by)
    for item in source.items:  # read at the member's offset: the bytes ShardWriter wrote
        assert source.read_bytes(item, "image") == by[item.key].data
        assert item.value("label") == by[item.key].label
    with pytest.raises(SpecError, match=r"--columns names 'seg', which is no kind"):
        infer_webdataset_fields(str(src), mapping={"seg": "png"})


def test_the_cli_builds_shards_with_the_sequential_runner(
    recs: list, folder_store: Path, tmp_path: Path, capsys
) -> None:
    src = write_shards(tmp_path / "s", recs, per_shard=8)
    out = tmp_path / "out"
    argv = ["build", str(src), "--out", str(out), "--columns", "image=jpg;png,label=cls"]
    argv += ["--size", "16", "--shard-samples", "8", "--chunk-samples", "4", "--seed", "3"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--runner", "sequential", "--quiet"])
        raise SystemExit(0)
    assert info.value.code == 0, capsys.readouterr().err
    _same_per_key(store(out), store(folder_store), recs)

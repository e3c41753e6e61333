"""Key stability (same content -> same key) and sensitivity (any ingredient -> new key)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import precompute
from precompute.errors import SpecError
from service import Cache
from service.cache.keys import check_key, is_key, parse_spec, store_key
from service.errors import CacheKeyError, SourceNotAllowedError
from tests.service.helpers import SPEC, index_builder, make_source, spec


@pytest.fixture()
def cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / "cache", builder=index_builder())


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return make_source(tmp_path / "src")


def test_key_is_64_hex_and_stable_across_spellings(cache: Cache, source: Path) -> None:
    key = cache.key_for(source, SPEC)
    assert is_key(key)
    reordered = dict(reversed(list(SPEC.items())))
    explicit = spec().to_dict()  # every default spelled out
    cwd = os.getcwd()
    try:
        os.chdir(source.parent)
        relative = cache.key_for(Path("src") / ".." / "src", reordered)
    finally:
        os.chdir(cwd)
    assert cache.key_for(str(source) + "/", explicit) == key
    assert relative == key
    assert cache.key_for(source, spec()) == key


def test_symlinked_spelling_of_the_same_folder_gives_the_same_key(
    cache: Cache, source: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(source, target_is_directory=True)
    assert cache.key_for(link, SPEC) == cache.key_for(source, SPEC)


def test_every_spec_field_changes_the_key(cache: Cache, source: Path) -> None:
    base = cache.key_for(source, SPEC)
    variants = [
        {"size": 32},
        {"seed": 1},
        {"mode": "letterbox"},
        {"chunk_samples": 8},
        {"shard_samples": 16},
        {"fill": 3},
        {"on_error": "skip"},
        {"variants": 2},
        {"max_pixels": 10_000},
    ]
    keys = {cache.key_for(source, {**SPEC, **v}) for v in variants}
    assert len(keys) == len(variants) and base not in keys


def test_source_changes_change_the_key(cache: Cache, source: Path) -> None:
    base = cache.key_for(source, SPEC)
    first = sorted(source.rglob("*.jp*g"))[0]
    st = first.stat()
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    touched = cache.key_for(source, SPEC)
    with first.open("ab") as f:
        f.write(b"\0")
    grown = cache.key_for(source, SPEC)
    (source / "extra").mkdir()
    (source / "extra" / "x.png").write_bytes(first.read_bytes())
    added = cache.key_for(source, SPEC)
    assert len({base, touched, grown, added}) == 4


def test_content_hash_ignores_mtime_but_not_bytes(tmp_path: Path, source: Path) -> None:
    cache = Cache(tmp_path / "c2", builder=index_builder(), content_hash=True)
    base = cache.key_for(source, SPEC)
    first = sorted(source.rglob("*.jp*g"))[0]
    st = first.stat()
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert cache.key_for(source, SPEC) == base
    with first.open("ab") as f:
        f.write(b"\0")
    assert cache.key_for(source, SPEC) != base


def test_transform_and_format_versions_change_the_key() -> None:
    s = spec()
    base = store_key(s, "fp")
    assert store_key(s, "fp", transform_version=precompute.TRANSFORM_VERSION) == base
    assert store_key(s, "fp", transform_version=precompute.TRANSFORM_VERSION + "x") != base
    assert store_key(s, "fp", format_version=precompute.FORMAT_VERSION + 1) != base
    assert store_key(s, "fp2") != base


def test_bad_inputs_raise_named_errors(cache: Cache, source: Path, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="size"):
        cache.key_for(source, {"size": -1})
    with pytest.raises(SpecError, match="bogus"):
        parse_spec({"bogus": 1})
    with pytest.raises(SpecError, match="mapping"):
        parse_spec([1, 2])  # type: ignore[arg-type]
    with pytest.raises(SourceNotAllowedError, match="nope"):
        cache.key_for(tmp_path / "nope", SPEC)
    with pytest.raises(CacheKeyError, match="64"):
        check_key("../etc")
    with pytest.raises(ValueError, match="fingerprint"):
        store_key(spec(), "")


def test_manifest_with_a_bad_label_line_keys_like_its_skip_build(tmp_path: Path) -> None:
    from precompute.sample import make_sample_dataset
    from precompute.sources.classes import fingerprint, list_source
    from service.cache.keys import source_fingerprint
    from service.http.paths import SourcePolicy

    images = make_sample_dataset(tmp_path / "img", num_images=4, num_classes=2, size_range=(16, 24))
    files = sorted(p for p in images.rglob("*") if p.is_file())
    manifest = tmp_path / "m.csv"
    rows = [f"{files[0]},0", f"{files[1]},", f"{files[2]},1"]  # line 3: an empty label
    manifest.write_text("path,label\n" + "\n".join(rows) + "\n")
    expected = fingerprint(list_source(str(manifest), "skip"))
    assert source_fingerprint(manifest) == expected
    assert SourcePolicy([tmp_path]).check(str(manifest)) == manifest.resolve()

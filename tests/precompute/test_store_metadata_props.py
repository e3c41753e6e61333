"""Property tests: any store metadata gives a value or the package's own error, nothing else.

Inputs are arbitrary JSON documents, and real ``zarr.json`` documents of a real store with one
key deleted or replaced by an arbitrary JSON value, or their bytes cut anywhere. Metadata that is
accepted must mean the same store: the loader then serves the same samples as from the untouched
store, or refuses it with its own error; never other values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import StoreLoader
from loaders.errors import LoaderError, UnsupportedArrayError
from loaders.store.open_store import open_store
from loaders.store.zarrmeta import ArrayMeta, parse_array_meta
from precompute.errors import StoreError
from precompute.format.layout import StoreInfo, open_store_info
from precompute.format.storecheck import check_array_meta
from precompute.format.verify import verify_store
from tests.contracts.loader_contract import collect, make_index_store

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)
# values a real document could hold instead of its own: another dtype, a near size or shape
NEAR = (
    st.sampled_from(["uint8", "int8", "uint16", "int16", "int32", "int64", "float32", "float64"])
    | st.integers(0, 64)
    | st.lists(st.integers(0, 24), min_size=1, max_size=4)
    | st.sampled_from(["/", ".", "end", "start", "default", "v2", "bytes", "crc32c"])
)
ARRAYS = ("image", "label", "extent", "key")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("props") / "s", 20, shard_samples=8)


def _samples(store: Path) -> list[dict[str, np.ndarray]]:
    loader = StoreLoader(store, 8, shuffle=False, drop_last=False)
    try:
        return collect(loader)
    finally:
        loader.close()


@pytest.fixture(scope="module")
def untouched(store: Path) -> list[dict[str, np.ndarray]]:
    return _samples(store)


def assert_same_samples_or_refused(store: Path, want: list[dict[str, np.ndarray]]) -> None:
    """The store serves ``want`` exactly, or the loader refuses it with its own error."""
    try:
        got = _samples(store)
    except LoaderError as exc:
        assert "\n" not in str(exc)
        return
    assert len(got) == len(want) > 0
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Yield the path of every value inside ``doc`` (dict keys and list indexes)."""
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


@st.composite
def mutated(draw: st.DrawFn, doc: dict[str, Any]) -> Any:
    """``doc`` with one value deleted or replaced by arbitrary JSON (or ``doc`` replaced)."""
    doc = json.loads(json.dumps(doc))
    paths = list(_paths(doc))
    path = draw(st.sampled_from(paths)) if paths and draw(st.booleans()) else ()
    value = draw(NEAR | JSON)
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@contextmanager
def written(path: Path, data: bytes) -> Iterator[None]:
    """Put ``data`` in ``path`` for the duration, then restore the original bytes."""
    original = path.read_bytes()
    path.write_bytes(data)
    try:
        yield
    finally:
        path.write_bytes(original)


def _doc(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


@SETTINGS
@given(data=st.data())
def test_parse_array_meta_gives_meta_or_unsupported_array_error(
    store: Path, untouched: list[dict[str, np.ndarray]], data: Any
) -> None:
    name = data.draw(st.sampled_from(ARRAYS))
    path = store / name / "zarr.json"
    doc = data.draw(mutated(_doc(path)) | JSON)
    try:
        meta = parse_array_meta(doc, name)
    except UnsupportedArrayError as exc:
        assert name in str(exc) and "\n" not in str(exc)
        return
    assert isinstance(meta, ArrayMeta)
    assert len(meta.shape) == len(meta.shard_shape) == len(meta.chunk_shape)
    assert all(
        c > 0 and s % c == 0 for s, c in zip(meta.shard_shape, meta.chunk_shape, strict=True)
    )
    assert meta.chunk_nbytes == np.prod(meta.chunk_shape) * meta.dtype.itemsize > 0
    with written(path, json.dumps(doc).encode()):
        assert_same_samples_or_refused(store, untouched)


@SETTINGS
@given(data=st.data())
def test_array_metadata_gives_doc_or_store_metadata_error(
    store: Path, untouched: list[dict[str, np.ndarray]], data: Any
) -> None:
    info = open_store_info(store)
    name = data.draw(st.sampled_from(ARRAYS))
    meta = store / name / "zarr.json"
    raw = meta.read_bytes()
    doc = data.draw(mutated(_doc(meta)))
    text = data.draw(st.sampled_from([json.dumps(doc).encode(), raw[: len(raw) // 3]]))
    with written(meta, text):
        try:
            check_array_meta(store, info.layout, name)
        except StoreError as exc:
            assert str(meta) in str(exc) and "\n" not in str(exc)
        else:
            assert_same_samples_or_refused(store, untouched)


@pytest.mark.parametrize("num_samples", [19, 21, 24])
def test_a_layout_that_disagrees_with_the_arrays_is_refused_naming_the_array(
    store: Path, num_samples: int
) -> None:
    # hypothesis found it: num_samples 21 over arrays of 20 read back as 20 samples
    doc = json.loads((store / "zarr.json").read_text())
    doc["attributes"]["nostall"]["layout"]["num_samples"] = num_samples
    doc["attributes"]["nostall"]["num_valid"] = min(num_samples, 20)
    with written(store / "zarr.json", json.dumps(doc).encode()):
        with pytest.raises(StoreError, match=r"image/zarr\.json.*key 'shape'"):
            open_store_info(store)
        problems = verify_store(store)
        assert len(problems) == 1 and "key 'shape'" in problems[0]


@SETTINGS
@given(data=st.data())
def test_group_metadata_gives_info_or_store_error(
    store: Path, untouched: list[dict[str, np.ndarray]], data: Any
) -> None:
    meta = store / "zarr.json"
    raw = meta.read_bytes()
    choice = data.draw(st.integers(0, 2))
    if choice == 0:
        text = json.dumps(data.draw(mutated(_doc(meta)))).encode()
    elif choice == 1:
        text = raw[: data.draw(st.integers(0, len(raw)))]
    else:
        text = data.draw(st.binary(max_size=64))
    with written(meta, text):
        try:
            info = open_store_info(store, require_complete=data.draw(st.booleans()))
        except StoreError as exc:
            assert "\n" not in str(exc)
        else:
            assert isinstance(info, StoreInfo)
            assert info.layout.num_samples == len(np.concatenate([b["index"] for b in untouched]))
            assert_same_samples_or_refused(store, untouched)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_loader_and_verify_on_any_metadata_give_their_own_errors(
    store: Path, untouched: list[dict[str, np.ndarray]], data: Any
) -> None:
    meta = store / data.draw(st.sampled_from(["zarr.json", *(f"{a}/zarr.json" for a in ARRAYS)]))
    with written(meta, json.dumps(data.draw(mutated(_doc(meta)))).encode()):
        try:
            open_store(store)
        except LoaderError as exc:
            assert "\n" not in str(exc)
        else:
            assert_same_samples_or_refused(store, untouched)
        problems = verify_store(store)
        assert all(isinstance(p, str) and "\n" not in p for p in problems)


def _near_values(value: Any) -> list[Any]:
    """Values a real document could plausibly hold instead of ``value``."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [v for v in (value - 1, value + 1, 2 * value) if v >= 0 and v != value]
    if isinstance(value, str):
        return ["int8" if value == "uint8" else "uint8", ".", "end" if value != "end" else "start"]
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return [value[:-1], [value[0] + 1, *value[1:]], [*value[:-1], value[-1] + 1]]
    return []


def _every_near_change(doc: dict[str, Any]) -> Iterator[Any]:
    """``doc`` with one value deleted or replaced by each of its near values, in turn."""
    for path in _paths(doc):
        for change in ["delete", *_near_values(_get(doc, path))]:
            new = json.loads(json.dumps(doc))
            parent = _get(new, path[:-1])
            if change == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
            elif change != "delete":
                parent[path[-1]] = change
            yield new


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@pytest.mark.parametrize("name", ["", *ARRAYS])
def test_every_near_change_of_a_document_is_refused_or_reads_the_same_samples(
    store: Path, untouched: list[dict[str, np.ndarray]], name: str
) -> None:
    meta = store / name / "zarr.json"
    for doc in _every_near_change(_doc(meta)):
        with written(meta, json.dumps(doc).encode()):
            assert_same_samples_or_refused(store, untouched)

"""Reusable contract suite for every :class:`~precompute.storage.base.ByteStore` implementation.

Subclass :class:`ByteStoreContract` and give a ``where`` fixture: a fresh, empty
:class:`~precompute.storage.location.Location` in the store under test; pytest then runs every
``test_*`` below against it (a local folder, a bucket of a real S3-compatible server)::

    class TestMyStore(ByteStoreContract):
        @pytest.fixture
        def where(self, tmp_path):
            return location(tmp_path / "root")
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from precompute.errors import BuildLockedError
from precompute.storage import Location, VersionChangedError


class ByteStoreContract:
    """Every byte store behaves the same (see the module docstring)."""

    def test_put_then_get_whole_ranged_and_tail(self, where: Location) -> None:
        obj = where / "a" / "b.bin"
        data = bytes(range(256)) * 4
        version = obj.write_bytes(data)
        store = where.store
        whole = store.get(obj.key)
        assert bytes(whole.data) == data and whole.size == len(data) and whole.version == version
        part = store.get(obj.key, 10, 20)
        assert bytes(part.data) == data[10:30] and part.size == len(data)
        assert bytes(store.get(obj.key, None, 7).data) == data[-7:]
        assert [bytes(b) for b in store.get_ranges(obj.key, [(0, 3), (100, 5)])] == [
            data[:3],
            data[100:105],
        ]
        assert obj.read_bytes() == data and obj.size() == len(data) and obj.exists()

    def test_read_into_fills_the_callers_buffers_in_order(self, where: Location) -> None:
        obj = where / "x"
        version = obj.write_bytes(bytes(range(100)))
        first, second = np.zeros(10, np.uint8), np.zeros(5, np.uint8)
        got = where.store.read_into(obj.key, [first, second], 20, if_version=version)
        assert got == 15
        assert first.tolist() == list(range(20, 30)) and second.tolist() == list(range(30, 35))
        assert where.store.read_into(obj.key, [np.zeros(10, np.uint8)], 95) == 5  # short

    def test_a_read_from_a_replaced_version_fails(self, where: Location) -> None:
        obj = where / "x"
        old = obj.write_bytes(b"one version")
        obj.write_bytes(b"another one")
        with pytest.raises(OSError, match="replaced while the store was read"):
            where.store.read_into(obj.key, [np.zeros(3, np.uint8)], 0, if_version=old)

    def test_a_missing_object_is_file_not_found_naming_it(self, where: Location) -> None:
        obj = where / "nothing"
        with pytest.raises(FileNotFoundError, match="nothing"):
            where.store.get(obj.key)
        with pytest.raises(FileNotFoundError):
            where.store.head(obj.key)
        assert not obj.exists()

    def test_put_if_absent_creates_once(self, where: Location) -> None:
        obj = where / "claim.json"
        version = where.store.put_if_absent(obj.key, b"first")
        with pytest.raises(FileExistsError, match=r"claim\.json"):
            where.store.put_if_absent(obj.key, b"second")
        assert obj.read_bytes() == b"first" and where.store.head(obj.key).version == version

    def test_put_if_match_replaces_only_that_version(self, where: Location) -> None:
        obj = where / "lock"
        first = obj.write_bytes(b"1")
        second = where.store.put_if_match(obj.key, b"2", first)  # returns the version it wrote
        assert second != first and obj.read_bytes() == b"2" and obj.head().version == second
        lost = rf"^{re.escape(str(obj))}: no longer the version {re.escape(first)}$"
        with pytest.raises(VersionChangedError, match=lost):  # naming the object and version
            where.store.put_if_match(obj.key, b"3", first)
        assert obj.read_bytes() == b"2"
        with pytest.raises(VersionChangedError):
            where.store.put_if_match((where / "gone").key, b"x", first)
        assert not (where / "gone").exists()

    def test_delete_conditional_and_not(self, where: Location) -> None:
        obj = where / "k"
        first = obj.write_bytes(b"1")
        second = obj.write_bytes(b"2")
        with pytest.raises(VersionChangedError):
            where.store.delete(obj.key, if_match=first)
        assert obj.read_bytes() == b"2"
        where.store.delete(obj.key, if_match=second)
        assert not obj.exists()
        where.store.delete(obj.key)  # gone already: no error
        where.store.delete(obj.key, if_match=second)

    def test_list_gives_sizes_and_versions_under_a_folder_like_prefix(
        self, where: Location
    ) -> None:
        versions = {name: (where / name).write_bytes(b"x" * n) for n, name in enumerate("abc", 1)}
        (where / "sub" / "d").write_bytes(b"dddd")
        (where.parent / f"{where.name}-beside").write_bytes(b"not under it")
        found = where.list()
        assert {k.rsplit("/", 1)[-1]: m.size for k, m in found.items()} == {
            "a": 1,
            "b": 2,
            "c": 3,
            "d": 4,
        }
        assert {where.store.url(k) for k in found} == {
            str(where / "a"),
            str(where / "b"),
            str(where / "c"),
            str(where / "sub" / "d"),
        }
        assert all(found[(where / n).key].version == v for n, v in versions.items())
        assert where.store.list_dir(where.key) == ["a", "b", "c", "sub"]
        assert (where / "none").list() == {} and where.store.list_dir((where / "none").key) == []

    def test_ages_and_dated_reads_are_by_the_stores_clock(self, where: Location) -> None:
        obj = where / "beat.json"
        obj.write_bytes(json.dumps({"beat": 1}).encode())
        dated = where.store.get_dated(obj.key)
        assert json.loads(bytes(dated.data)) == {"beat": 1}
        assert dated.age_s is not None and -5 < dated.age_s < 60
        (age,) = where.store.ages(where.key).values()
        assert -5 < age < 60

    def test_the_build_lock_is_exclusive_until_released(self, where: Location) -> None:
        lock = where / "_nostall" / "build.lock"
        with (
            where.store.exclusive(lock.key, str(where)),
            pytest.raises(BuildLockedError, match="another build is writing this store"),
            where.store.exclusive(lock.key, str(where)),
        ):
            pass
        with where.store.exclusive(lock.key, str(where)):  # released
            pass

    def test_zarr_reads_and_writes_through_the_stores_own_zarr_class(self, where: Location) -> None:
        import zarr

        array = zarr.create_array(
            store=where.zarr(read_only=False), name="a", shape=(6,), chunks=(2,), dtype="int32"
        )
        array[:] = np.arange(6)
        assert (where / "a" / "zarr.json").exists()
        from precompute.storage import open_array

        assert open_array(where / "a")[:].tolist() == list(range(6))

    def test_a_location_prints_as_it_was_named_and_joins_with_slashes(
        self, where: Location
    ) -> None:
        child = where / "x" / "y.json"
        assert str(child) == f"{where}/x/y.json"
        assert child.name == "y.json" and str(child.parent) == f"{where}/x"

"""The build lock of an object-store output: a conditional PUT, a dead holder taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from precompute import BuildLockedError, objstore
from precompute.errors import StoreError
from precompute.outputs import build_lock, check_output


def test_a_second_build_is_refused_naming_the_holder(bucket: str) -> None:
    out = objstore.store_path(f"{bucket}/s.zarr")
    held = rf"held by {socket.gethostname()} pid {os.getpid()}\); wait for it"
    with build_lock(out), pytest.raises(BuildLockedError, match=held), build_lock(out):
        pass
    with build_lock(out):  # released
        pass


def test_the_lock_of_a_dead_build_on_this_host_is_taken_over(bucket: str) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    lock = f"{bucket}/s.zarr/_nostall/build.lock"
    holder = {"host": socket.gethostname(), "pid": int(dead.stdout)}
    objstore.put_bytes(lock, json.dumps(holder).encode())
    with build_lock(objstore.store_path(f"{bucket}/s.zarr")):
        assert json.loads(objstore.get_range(lock).data)["pid"] == os.getpid()
    objstore.put_bytes(lock, json.dumps({"host": "other-host", "pid": 1}).encode())
    out = objstore.store_path(f"{bucket}/s.zarr")
    with pytest.raises(BuildLockedError, match="held by other-host pid 1"), build_lock(out):
        pass


def test_outputs_other_than_s3_urls_are_refused() -> None:
    with pytest.raises(StoreError, match="gs://b/x: the output must be a local"):
        check_output("gs://b/x")
    with pytest.raises(StoreError, match="not an s3://bucket/key URL"):
        check_output("s3:///x")

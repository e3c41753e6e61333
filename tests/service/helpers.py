"""Real test builders and datasets for the service tests (no mocks: real files, real stores)."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from precompute.format.layout import StoreLayout
from precompute.pipeline.writer import create_or_resume, write_shard, write_store_from_arrays
from precompute.sample import make_sample_dataset
from precompute.sources.classes import list_source
from precompute.spec import BuildSpec
from precompute.storage.objupload import put_folder
from service.cache.builders import Builder, BuildRequest

SPEC = {"size": 16, "shard_samples": 8, "chunk_samples": 4}


def make_source(root: Path, num_images: int = 12, seed: int = 0) -> Path:
    """Write a tiny real JPEG/PNG class-folder dataset."""
    return make_sample_dataset(
        root, num_images=num_images, num_classes=3, size_range=(16, 32), seed=seed
    )


def _arrays(request: BuildRequest) -> tuple[np.ndarray, list[int], list[str]]:
    source = list_source(str(request.source))
    n, s = len(source), request.spec.size
    images = np.empty((n, s, s, 3), dtype=np.uint8)
    for i in range(n):
        images[i] = i % 251  # each sample's pixels encode its index
    return images, [lab for _, lab in source.items], [key for key, _ in source.items]


def _log(path: Path | None, request: BuildRequest) -> None:
    if path is not None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {request.key}\n".encode())
        finally:
            os.close(fd)


def index_builder(log: Path | None = None, delay: float = 0.0) -> Builder:
    """Return a builder writing a complete store whose pixels encode the sample index."""

    def build(request: BuildRequest) -> None:
        _log(log, request)
        images, labels, keys = _arrays(request)
        time.sleep(delay)  # widens the window in which racing callers must wait
        write_store_from_arrays(
            request.out, images, labels, request.spec, keys=keys, fingerprint=request.fingerprint
        )

    return build


def first_shard(request: BuildRequest) -> None:
    """Start the store of ``request`` and write its first shard only (a build under way)."""
    images, labels, keys = _arrays(request)
    layout = StoreLayout.from_spec(request.spec, len(images))
    create_or_resume(request.out, request.spec, layout, request.fingerprint)
    a, b = layout.shard_range(0)
    extent = np.tile(np.array([0, 0, request.spec.size, request.spec.size], np.int32), (b - a, 1))
    write_shard(
        request.out,
        layout,
        0,
        image=images[a:b],
        label=np.array(labels[a:b]),
        extent=extent,
        key=keys[a:b],
    )


def hanging_builder(started: Path, log: Path | None = None) -> Builder:
    """Return a builder that writes one shard, signals ``started`` and hangs (to be killed)."""

    def build(request: BuildRequest) -> None:
        _log(log, request)
        first_shard(request)
        started.write_text("started")
        time.sleep(600)

    return build


def gated_builder(gate: threading.Event, started: threading.Event) -> Builder:
    """Return a builder that, while ``gate`` is closed, stops after the first shard.

    It writes the first shard, sets ``started`` and waits for ``gate`` before writing the
    whole store: a build whose progress the test can watch, then let finish.
    """

    def build(request: BuildRequest) -> None:
        first_shard(request)
        started.set()
        if not gate.wait(timeout=120):
            raise TimeoutError("the test never let the build finish")
        index_builder()(request)  # resumes the started store and completes it

    return build


def read_log(log: Path) -> list[str]:
    """Return the lines of a build log (one per builder invocation)."""
    return log.read_text().splitlines() if log.exists() else []


def spec(**overrides: object) -> BuildSpec:
    """Return the tiny test spec with ``overrides``."""
    return BuildSpec.from_dict({**SPEC, **overrides})


def s3_builder(log: Path | None = None, delay: float = 0.0) -> Builder:
    """A real builder for an ``s3://`` request: the index store, written locally, then PUT."""
    local_build = index_builder(log, delay)

    def build(request: BuildRequest) -> None:
        with tempfile.TemporaryDirectory(prefix="s3cache-build-") as tmp:
            local_build(replace(request, out=Path(tmp) / "store"))
            put_folder(Path(tmp) / "store", str(request.out), last=["zarr.json"])

    return build


def hanging_s3_builder(started: Path, log: Path | None = None) -> Builder:
    """Write an incomplete store (one shard of two) to object storage, signal, then hang."""

    def build(request: BuildRequest) -> None:
        if log is not None:
            with open(log, "a") as f:
                f.write(f"{os.getpid()} {request.key}\n")  # as every builder of the tests
        n = 12
        layout = StoreLayout.from_spec(request.spec, n)
        with tempfile.TemporaryDirectory(prefix="s3cache-hang-") as tmp:
            local = Path(tmp) / "store"
            create_or_resume(local, request.spec, layout, request.fingerprint)
            a, b = layout.shard_range(0)
            s = request.spec.size
            write_shard(
                local,
                layout,
                0,
                image=np.zeros((b - a, s, s, 3), np.uint8),
                label=np.zeros(b - a, np.int64),
                extent=np.tile(np.array([0, 0, s, s], np.int32), (b - a, 1)),
                key=[f"k{i}" for i in range(a, b)],
            )
            put_folder(local, str(request.out), last=["zarr.json"])
        started.write_text("started")
        time.sleep(600)

    return build

"""The sequential runner: the Ray build's shard files, byte for byte, without importing Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from precompute import BuildError, BuildSpec, build, fingerprint, list_source, open_store_info
from precompute.errors import StoreIncompleteError
from precompute.format.layout import StoreLayout
from precompute.format.verify import verify_store
from precompute.pipeline.inprocess import NO_RAY
from precompute.pipeline.writer import create_or_resume
from tests.precompute.conftest import copy_with_bad_inputs
from tests.processes import REPO

SPEC = BuildSpec(size=16, shard_samples=8, chunk_samples=4, seed=5, on_error="skip")


def _shard_files(store: Path) -> dict[str, bytes]:
    """Every file of every array (metadata and shards); not the report or the markers."""
    return {
        p.relative_to(store).as_posix(): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file()
        and len(p.relative_to(store).parts) > 1
        and p.parts[len(store.parts)] != "_nostall"
    }


@pytest.fixture()
def with_bad_inputs(small_dataset: Path, tmp_path: Path) -> Path:
    """The small dataset plus every bad input (skipped by both runners alike)."""
    return copy_with_bad_inputs(small_dataset, tmp_path / "src")


@pytest.mark.ray
def test_sequential_build_writes_the_ray_builds_shard_files(
    ray_local: None, with_bad_inputs: Path, tmp_path: Path
) -> None:
    by_ray = build(str(with_bad_inputs), str(tmp_path / "ray"), SPEC, progress=False)
    seq = build(
        str(with_bad_inputs), str(tmp_path / "seq"), SPEC, progress=False, runner="sequential"
    )
    files = _shard_files(tmp_path / "seq")
    assert any("/c/" in name for name in files)  # shard files, not only metadata
    assert files == _shard_files(tmp_path / "ray")
    for key in ("spec_hash", "source_fingerprint"):
        assert seq[key] == by_ray[key]
    for key in ("num_samples", "num_valid", "skipped"):
        assert seq["report"][key] == by_ray["report"][key]
    assert seq["report"]["skipped"] != []
    assert seq["report"]["ray_address"] == NO_RAY and seq["report"]["ray_nodes"] == 0
    assert verify_store(tmp_path / "seq") == []


def test_a_sequential_cli_build_never_imports_ray(small_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    script = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(\n"
        "    m for m in sys.modules if m == 'ray' or m.startswith('ray.')))))\n"
        "from precompute.cli import main\n"
        f"sys.argv = ['precompute', 'build', {str(small_dataset)!r}, '--out', {str(out)!r},\n"
        "            '--size', '16', '--runner', 'sequential', '--quiet']\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    info = open_store_info(out)
    assert info.num_valid == 40 and info.report["ray_address"] == NO_RAY


def test_a_failing_shard_is_a_build_error_naming_it(small_dataset: Path, tmp_path: Path) -> None:
    spec = BuildSpec(size=16, shard_samples=8, chunk_samples=4)
    out = tmp_path / "s"
    source = list_source(small_dataset)
    create_or_resume(out, spec, StoreLayout.from_spec(spec, len(source)), fingerprint(source))
    (out / "image" / "c").write_text("a file where the shard folder goes")  # writes must fail
    with pytest.raises(BuildError, match=r"shard \d+ failed \(NotADirectoryError"):
        build(str(small_dataset), str(out), spec, progress=False, runner="sequential")
    with pytest.raises(StoreIncompleteError):
        open_store_info(out)


def test_runner_settings_are_checked(small_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="runner must be one of auto, ray, sequential, got 'threads'"
    ):
        build(str(small_dataset), str(tmp_path / "a"), SPEC, runner="threads")
    with pytest.raises(ValueError, match="ray_address 'auto' was given with runner 'sequential'"):
        build(
            str(small_dataset), str(tmp_path / "b"), SPEC, ray_address="auto", runner="sequential"
        )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()

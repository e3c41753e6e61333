"""`precompute verify` on damaged stores: exit 1, one line per problem naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from precompute.cli import main
from precompute.format.layout import shard_marker_path
from precompute.format.verify import verify_store
from tests.contracts.damage import META_DAMAGE, SHARD_DAMAGE, SWAP_DAMAGE, image_shard
from tests.contracts.loader_contract import make_index_store


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("verify") / "s", 40)


@pytest.fixture
def root(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "s"))


def _verify(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = 0
    try:
        main(["verify", str(root)])  # returns on success
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err.splitlines()


def test_a_sound_store_verifies(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_store(root) == []
    assert _verify(root, capsys) == (0, [])


@pytest.mark.parametrize("damage", [*SHARD_DAMAGE, *SWAP_DAMAGE])
def test_damaged_shard_fails_verify_naming_the_file(
    root: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**SHARD_DAMAGE, **SWAP_DAMAGE}[damage](root)
    code, lines = _verify(root, capsys)
    assert code == 1 and lines and all(line.startswith("BAD ") for line in lines)
    assert any(str(bad) in line for line in lines), lines


@pytest.mark.parametrize("damage", META_DAMAGE)
def test_broken_metadata_fails_verify_with_one_line_naming_file_and_key(
    root: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, key = META_DAMAGE[damage](root)
    code, lines = _verify(root, capsys)
    assert code == 1 and len(lines) == 1 and lines[0].startswith("BAD ")
    assert str(bad) in lines[0] and (not key or f"key '{key}'" in lines[0])


def test_markers_record_each_shard_file_and_a_store_without_them_still_verifies(
    root: Path,
) -> None:
    marker = json.loads(shard_marker_path(root, 1).read_text())
    assert marker["files"]["image"]["size"] == image_shard(root, 1).stat().st_size
    del marker["files"]  # as a store written before markers recorded the files
    shard_marker_path(root, 1).write_text(json.dumps(marker))
    assert verify_store(root) == []

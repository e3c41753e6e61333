"""What a transform is told and held to: its data files, its arguments, the dtypes it gets.

Real user packages (``tests/precompute/userpkg.py``) on ``sys.path``, real stores built in
process (the sequential runner), the real CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.cli import main
from precompute.transforms import TransformSpec
from tests.precompute.userpkg import make_package


@pytest.fixture()
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return tmp_path / "code", make_package(tmp_path / "code")


def test_a_data_file_is_not_fingerprinted_and_the_help_says_what_to_do(
    pkg: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, name = pkg
    table = root / name / "gain.json"
    table.write_text('{"gain": 1}')
    before = TransformSpec(f"{name}.ops:reads_table").fingerprint
    table.write_text('{"gain": 2}')  # the data changed, not the code: the same fingerprint
    assert TransformSpec(f"{name}.ops:reads_table").fingerprint == before
    main(["build", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Files it reads (a JSON lookup table, weights) are NOT covered" in help_text
    assert "change fn.version (or an arg) to get a new store" in help_text

"""Kinds from other packages: the ``nostall.kinds`` entry points, found by a real installed dist."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dist(site: Path, module: str, code: str) -> None:
    """A distribution 'toykinds' on ``site`` whose entry point names ``module``."""
    info = site / "toykinds-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toykinds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[nostall.kinds]\ntoy = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(code))


def _run(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{ROOT}:{site}", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True
    )


def test_a_kind_of_another_package_is_registered_at_the_first_look_up(tmp_path: Path) -> None:
    _dist(
        tmp_path,
        "toy_kind",
        """
        from precompute.fields.kinds import LabelKind, register_kind

        class ToyKind(LabelKind):
            name = "toy"

        register_kind(ToyKind())
    """,
    )
    got = _run(
        tmp_path,
        """
        import sys
        from precompute.fields import KINDS, FieldSpec
        assert "toy_kind" not in sys.modules and "precompute.audio.kind" not in sys.modules
        print(sorted(KINDS))
        print(FieldSpec("t", "toy", {}).kind, "toy_kind" in sys.modules)
    """,
    )
    assert got.returncode == 0, got.stderr
    names, spec = got.stdout.splitlines()
    assert "'toy'" in names and "'audio'" in names and "'image'" in names
    assert spec == "toy True"


def test_a_broken_kind_plugin_is_named(tmp_path: Path) -> None:
    _dist(tmp_path, "broken_kind", "import no_such_module_here\n")
    got = _run(tmp_path, "from precompute.fields import KINDS\nprint(len(KINDS))\n")
    assert got.returncode != 0
    assert "the kind plugin toy = 'broken_kind' (nostall.kinds)" in got.stderr
    assert "no_such_module_here" in got.stderr

"""TensorFlow and JAX stay optional extras: ``import loaders`` imports neither; without one,
``loaders.tf`` / ``loaders.jax`` raise an ImportError naming the extra to install."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.processes import REPO

_BLOCK = """
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{name!r}} (blocked by the test)")
        return None

sys.meta_path.insert(0, _Block())
"""


def _run(code: str, blocked: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    script = _BLOCK.format(blocked=set(blocked)) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=REPO
    )


def test_import_loaders_imports_neither_tensorflow_nor_jax() -> None:
    result = _run("""
        import json, sys
        import loaders, loaders.frameworks
        from loaders import StoreLoader
        from loaders.augment import Mixup, TrainAugment
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "jax", "keras"))
        print(json.dumps(heavy))
    """)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(("extra", "backend"), [("tf", "tensorflow"), ("jax", "jax")])
def test_a_missing_backend_names_the_extra(extra: str, backend: str) -> None:
    result = _run(
        f"""
        import loaders
        try:
            loaders.{extra}
        except ImportError as exc:
            print("IMPORT-ERROR:", exc)
        """,
        blocked=(backend,),
    )
    assert result.returncode == 0, result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("IMPORT-ERROR:")]
    assert len(lines) == 1, result.stdout
    assert f"loaders.{extra} needs {backend}" in lines[0]
    assert f"pip install 'nostall[{extra}]'" in lines[0]

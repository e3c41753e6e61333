"""DALI stays an optional extra: importing works without it, using it names the extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.contracts.loader_contract import make_index_store

_BLOCK = """
import importlib.abc, sys

class _NoNvidia(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "nvidia" or name.startswith("nvidia."):
            raise ImportError(f"No module named {name!r} (blocked by the test)")
        return None

sys.meta_path.insert(0, _NoNvidia())
"""


def _run_without_dali(code: str) -> subprocess.CompletedProcess[str]:
    script = _BLOCK + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_import_without_dali_works_and_using_it_names_the_extra(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 8)
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    result = _run_without_dali(f"""
        import sys
        import loaders, loaders.dali, loaders.dali.store, loaders.dali.jpeg
        from loaders.dali import DaliAugment, DaliStoreLoader, JpegLoader
        DaliAugment(size=8)
        assert not any(m.startswith("nvidia") for m in sys.modules), "DALI was imported"
        for make in (lambda: DaliStoreLoader({str(store)!r}, 4),
                     lambda: JpegLoader({str(src)!r}, 4, size=8)):
            try:
                make()
            except ImportError as exc:
                print("IMPORT-ERROR:", exc)
            else:
                raise SystemExit("no ImportError without DALI")
    """)
    assert result.returncode == 0, result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("IMPORT-ERROR:")]
    assert len(lines) == 2
    assert all("pip install 'nostall[dali]'" in ln for ln in lines)


def test_the_blocker_really_blocks_dali() -> None:
    result = _run_without_dali("import nvidia.dali")
    assert result.returncode != 0 and "blocked by the test" in result.stderr

"""Arrows point one way: precompute <- loaders <- benchmarks, precompute <- service.

Lower packages never import upper ones (not even lazily inside a function); upper packages add
their commands and cache-reference resolvers through entry points instead.
"""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.foundation import imports

ROOT = Path(__file__).resolve().parents[2]
# package -> packages of this project it must never import
FORBIDDEN = {
    "precompute": {"loaders", "service", "benchmarks"},
    "loaders": {"service", "benchmarks"},
    "service": {"loaders", "benchmarks"},
}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_packages_import_no_upper_one(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_packages(path) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_entry_points_name_the_upper_packages() -> None:
    commands = {ep.name: ep.value for ep in entry_points(group="nostall.commands")}
    assert commands == {
        "demo": "loaders.demo:demo",
        "cache": "service.cli:cache",
        "serve": "service.cli:serve",
        "bench": "benchmarks.cli:bench",
    }
    resolvers = [ep.value for ep in entry_points(group="nostall.store_resolvers")]
    assert resolvers == ["service.resolve:resolve"]


def test_the_kind_entry_points_are_the_builtin_kind_modules() -> None:
    """pyproject's ``nostall.kinds`` names the modules ``BUILTIN`` loads from a source tree.

    Read from pyproject.toml, not the installed metadata: an editable install keeps the entry
    points of the day it was installed.
    """
    from precompute.fields.registry import BUILTIN

    text = (ROOT / "pyproject.toml").read_text()  # tomllib is 3.11+: read the one table
    section = text.split('[project.entry-points."nostall.kinds"]\n', 1)[1].split("\n[", 1)[0]
    rows = [line.split(" = ") for line in section.splitlines() if " = " in line]
    declared = {name.strip(): module.strip().strip('"') for name, module in rows}
    assert list(declared.values()) == list(BUILTIN)
    assert all(name == module.rsplit(".", 1)[1] for name, module in declared.items())


def test_a_cache_reference_without_a_resolver_is_a_clear_error(monkeypatch) -> None:
    from loaders.errors import StoreOpenError
    from loaders.store import cacheref

    # the distribution is installed with its resolver; take it away as a bare install would
    monkeypatch.setattr(cacheref, "entry_points", lambda group: [])
    with pytest.raises(StoreOpenError, match="no store resolver is installed"):
        cacheref.resolve_cache_ref(("/data/train", {"size": 64}))


# -- inside each package: no import cycles, small folders ---------------------------------------

MAX_FLAT = 12  # .py modules directly in one folder
PACKAGES = ("precompute", "loaders", "service", "benchmarks")
# Debts being paid off by the restructuring (issues 27 and 28): exactly the modules in an import
# cycle today and the folders over MAX_FLAT. A module may leave a cycle, never join one; a folder
# may shrink, never grow; and each record must be updated when a debt shrinks.
KNOWN_CYCLES = {
    "precompute": {"precompute.pipeline.writer", "precompute.storage.remote_writer"},
    "service": {"service.cache", "service.objcache"},
}
KNOWN_CROWDED = {"service": 24}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_joins_an_import_cycle(package: str) -> None:
    in_cycles = {m for group in imports.cycles(package) for m in group}
    assert in_cycles == KNOWN_CYCLES.get(package, set()), imports.cycles(package)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_folder_grows_past_twelve_modules(package: str) -> None:
    crowded = {k: n for k, n in imports.flat_counts(package).items() if n > MAX_FLAT}
    assert crowded == {k: n for k, n in KNOWN_CROWDED.items() if k.split("/")[0] == package}


def test_the_graph_sees_lazy_imports_and_not_type_checking_ones() -> None:
    graph = imports.graph("benchmarks")
    assert "benchmarks.harness.doctor" in graph["benchmarks.cli"]  # inside a function
    assert "benchmarks.runner.rows" in graph["benchmarks.runner.measure"]
    build = imports.graph("precompute")
    # fieldwork names ShardJob only for the type checker: no edge, so no cycle with shardwork
    assert "precompute.pipeline.shardwork" not in build["precompute.pipeline.fieldwork"]
    assert "precompute.pipeline.fieldwork" in build["precompute.pipeline.shardwork"]

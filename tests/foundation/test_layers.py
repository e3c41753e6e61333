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
    from loaders import cacheref
    from loaders.errors import StoreOpenError

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
KNOWN_CYCLES = {}
KNOWN_CROWDED: dict[str, int] = {}


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


# -- no kind name in generic modules ----------------------------------------------------------

# The kinds' own modules: precompute/kinds/ (one per kind) and the packages that implement the
# audio, array and scene (position) kinds' sources, decoders and rules. Everything else asks a
# kind what it decides (attributes, hooks, its registered rules) and never tests its name.
KIND_PACKAGES = ("precompute/kinds/", "precompute/audio/", "precompute/arrays/")
_KINDISH = {"kind", "kinds", "kind_name"}  # a variable holding a kind's name


def _kind_names() -> set[str]:
    from precompute.fields import KINDS

    return set(KINDS)


def _is_kindish(node: ast.AST) -> bool:
    """``x.kind``, or a variable named ``kind``/``kinds``/``kind_name``."""
    if isinstance(node, ast.Attribute):
        return node.attr in _KINDISH
    return isinstance(node, ast.Name) and node.id in _KINDISH


def _names_in(node: ast.AST, names: set[str]) -> list[str]:
    """The kind names ``node`` spells: a string, or a tuple/list/set of strings."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and n.value in names]


def kind_name_tests(path: Path, names: set[str]) -> list[str]:
    """``file:line`` of each kind-name comparison and kind-keyed dict literal in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = str(path.relative_to(ROOT))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            ops = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
            if not all(isinstance(op, ops) for op in node.ops):
                continue
            spelled = [n for side in sides for n in _names_in(side, names)]
            # a kind (x.kind, kind), or anything against a list of two or more kind names
            # (``sorted(kinds) != ["boxes", "image"]``, ``k in ("image", "mask")``)
            listed = any(
                isinstance(side, ast.Tuple | ast.List | ast.Set)
                and len(_names_in(side, names)) >= 2
                for side in sides
            )
            if spelled and (listed or any(map(_is_kindish, sides))):
                found.append(f"{where}:{node.lineno}: compares a kind with {spelled}")
        elif isinstance(node, ast.Dict) and len(node.keys) >= 2:
            keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
            if all(k in names for k in keys):
                found.append(f"{where}:{node.lineno}: a table keyed by kinds {keys}")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_generic_modules_name_no_kind(package: str) -> None:
    """Outside the kinds' modules, nothing compares a kind with a kind's name or keys by kinds.

    Field *names* are free (the v1 profile's fields are named ``image`` and ``label``): only
    a kind (``x.kind``, a ``kind`` variable) compared with a name, and dict literals whose
    keys are all kind names, are refused.
    """
    names = _kind_names()
    offenders: dict[str, list[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        where = str(path.relative_to(ROOT))
        hits = [] if where.startswith(KIND_PACKAGES) else kind_name_tests(path, names)
        if hits:
            offenders[where] = hits
    assert offenders == {}


# -- loaders reads stores: which layers of precompute it may import -----------------------------

# The foundation (errors, checks, the augmentation policy and its crop sampler) and the layers a
# reader of stores needs: the store format, the fields and kinds, the storage, and the splits
# recorded with a store (their record and the rule that deals them: precompute/splits/).
LOADER_SEES = (
    "precompute.errors",
    "precompute.checks",
    "precompute.policy",
    "precompute.cropsampler",
    "precompute.format",
    "precompute.fields",
    "precompute.kinds",
    "precompute.storage",
    "precompute.splits",
)
# Modules of loaders that reach further, and what for (a module may leave this, never join it)
KNOWN_REACH = {
    # the `precompute demo` command: builds a sample store, then streams it
    "loaders/demo.py": {"precompute.cli", "precompute.job", "precompute.sample"},
    # DaliJpegLoader reads a raw class-folder source: the build's lister and decoding rules
    "loaders/dali/jpeg.py": {"precompute.sources.classes", "precompute.stages.decode"},
    # the loader's advice counts the CPUs as the build does
    "loaders/diagnostics/diagnose.py": {"precompute.runtime.raylocal"},
}


def _precompute_imports(path: Path) -> set[str]:
    """The precompute modules ``path`` imports (``from precompute import x``: ``precompute.x``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "precompute")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "precompute":
                found.update(f"precompute.{a.name}" for a in node.names)
            elif node.module.startswith("precompute."):
                found.add(node.module)
    return found


def test_loaders_imports_only_the_store_layers_of_precompute() -> None:
    reach = {}
    for path in sorted((ROOT / "loaders").rglob("*.py")):
        beyond = {
            m
            for m in _precompute_imports(path)
            if not any(m == p or m.startswith(f"{p}.") for p in LOADER_SEES)
        }
        if beyond:
            reach[str(path.relative_to(ROOT))] = beyond
    assert reach == KNOWN_REACH


# -- the storage layer: above it, no URL scheme is tested and no object-store client imported ---

STORAGE = ROOT / "precompute" / "storage"
CLIENTS = {"boto3", "botocore", "obstore", "s3fs", "gcsfs", "adlfs"}
SCHEMES = ("s3:", "s3a:", "gs:", "az:", "abfs:", "abfss:")  # object-store URL schemes
SCHEME_TESTS = {"startswith", "removeprefix", "endswith", "partition", "split"}


def _names_a_scheme(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value.lower().startswith(SCHEMES))
    )


def _storage_branches(path: Path) -> list[str]:
    """``line: what`` of each object-store client import or URL-scheme test in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        what = None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            clients = {str(n).split(".")[0] for n in names} & CLIENTS
            what = f"imports {sorted(clients)}" if clients else None
        elif isinstance(node, ast.Name) and node.id == "is_object_url":
            what = "is_object_url"
        elif isinstance(node, ast.Attribute) and node.attr in ("is_object_url", "_s3"):
            what = node.attr
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in SCHEME_TESTS and any(map(_names_a_scheme, node.args)):
                what = f"{node.func.attr}(<scheme>)"
        elif isinstance(node, ast.Compare) and any(
            map(_names_a_scheme, [node.left, *node.comparators])
        ):
            what = "compares with a scheme"
        if what:
            found.append(f"{node.lineno}: {what}")  # type: ignore[attr-defined]
    return found


def test_nothing_above_the_storage_layer_tests_a_url_scheme_or_imports_a_client() -> None:
    """Issue 28: bytes live behind one interface (precompute/storage); above it no module
    branches on ``s3://`` nor holds a client of its own (``boto3``, ``obstore``)."""
    offenders = {
        str(path.relative_to(ROOT)): found
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if STORAGE not in path.parents and (found := _storage_branches(path))
    }
    assert offenders == {}

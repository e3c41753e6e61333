"""The import graph of this project's packages, read from the source (nothing is imported).

Every ``import`` counts, lazy ones inside functions included; those under
``if TYPE_CHECKING:`` do not (they never run). ``from pkg import name`` is an edge to the
module ``pkg.name`` when that is a module, else to ``pkg`` (its ``__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    """``precompute/fields/kinds.py`` -> ``precompute.fields.kinds`` (``__init__``: the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` by dotted name."""
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _targets(node: ast.AST, name: str, is_package: bool, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        here = name.split(".") if is_package else name.split(".")[:-1]
        here = here[: len(here) - node.level + 1]
        base = ".".join([*here, *([node.module] if node.module else [])])
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def graph(package: str) -> dict[str, set[str]]:
    """``module -> the modules of the same package it imports`` (lazily or not)."""
    known = modules(package)
    out: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        deps: set[str] = set()
        for node in _runtime_nodes(tree):
            for target in _targets(node, name, path.name == "__init__.py", known):
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in known and target != name:
                    deps.add(target)
        out[name] = deps
    return out


def cycles(package: str) -> list[list[str]]:
    """The import cycles of ``package``: each strongly connected set of two or more modules."""
    g = graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def flat_counts(package: str) -> dict[str, int]:
    """``folder -> .py modules directly in it`` for every folder of ``package``."""
    top = ROOT / package
    folders = [top, *sorted(p for p in top.rglob("*") if p.is_dir() and p.name != "__pycache__")]
    return {str(f.relative_to(ROOT)): n for f in folders if (n := len(list(f.glob("*.py"))))}

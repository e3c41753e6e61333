"""The benchmarks package's layout: small folders, and imports that never go round in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "benchmarks"
MAX_MODULES = 12


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every ``benchmarks`` module ``path`` imports, lazily inside functions included."""
    found: set[str] = set()
    package = _module(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module(path)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("benchmarks"))
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            base = node.module
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if base.startswith("benchmarks"):
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    return {
        name: {m for m in _imports(path) if m in modules} - {name} for name, path in modules.items()
    }


def test_no_folder_holds_more_than_twelve_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT.parent)): n
        for folder in [ROOT, *(p for p in ROOT.rglob("*") if p.is_dir())]
        if (n := len(list(folder.glob("*.py")))) > MAX_MODULES
    }
    assert crowded == {}


def test_the_benchmark_modules_import_each_other_without_a_cycle() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name not in done:
            for dep in sorted(graph[name]):
                visit(dep, (*path, name))
            done.add(name)

    for name in sorted(graph):
        visit(name, ())


def test_the_layout_check_sees_lazy_imports() -> None:
    graph = _graph()
    assert "benchmarks.harness.doctor" in graph["benchmarks.cli"]  # imported inside a function
    assert "benchmarks.runner.rows" in graph["benchmarks.runner.measure"]

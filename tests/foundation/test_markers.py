"""The test suite keeps its own rules: every test that starts Ray is marked ``ray``, and a
missing package fails the run instead of skipping tests.

Read from the test sources (``ast``), so a new test that breaks a rule fails here whatever
machine runs it. A test starts Ray when it requests ``ray_local`` or ``ray_cluster`` (directly
or through fixtures), or when it, or a helper of its module, runs a build on Ray: a call of
``precompute.job.build`` without ``runner="sequential"``, ``precompute.cli.main(["build", ...])``
or a ``precompute.cli build`` subprocess without ``--runner sequential`` (calls inside
``pytest.raises`` fail before Ray starts and do not count, nor does ``build --help``).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.processes import REPO

TESTS = Path(__file__).resolve().parents[1]
RAY_FIXTURES = {"ray_local", "ray_cluster"}
NOT_CHECKED: set[Path] = set()
OWN_PACKAGES = {"precompute", "loaders", "service", "benchmarks"}


def _modules(pattern: str) -> list[Path]:
    return sorted(p for p in TESTS.rglob(pattern) if not any(d in p.parents for d in NOT_CHECKED))


def _is_fixture(fn: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in fn.decorator_list)


def _params(fn: ast.FunctionDef) -> set[str]:
    return {a.arg for a in fn.args.args + fn.args.kwonlyargs}


def _marks_ray(node: ast.expr) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == "ray" and ast.unparse(n) == "pytest.mark.ray"
        for n in ast.walk(node)
    )


def _conftests(module: Path) -> list[Path]:
    found = []
    for folder in module.parents:
        if (folder / "conftest.py").exists():
            found.append(folder / "conftest.py")
        if folder in (TESTS, folder.parent):
            break
    return found


def _fixture_deps(module: Path) -> dict[str, set[str]]:
    """Fixture name -> the fixtures it requests, for the module and its conftests."""
    deps: dict[str, set[str]] = {}
    for path in [*reversed(_conftests(module)), module]:  # nearer definitions win
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and _is_fixture(node):
                deps[node.name] = _params(node)
    return deps


def _needs_ray_fixture(requested: set[str], deps: dict[str, set[str]]) -> bool:
    seen: set[str] = set()
    todo = list(requested)
    while todo:
        name = todo.pop()
        if name in RAY_FIXTURES:
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(deps.get(name, set()))
    return False


def _outside_raises(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body, leaving out ``with pytest.raises(...)`` blocks."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.With) and any(
            "raises" in ast.unparse(item.context_expr) for item in node.items
        ):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _strings(node: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def _ray_build_call(call: ast.Call, builds: set[str], mains: set[str]) -> bool:
    name = ast.unparse(call.func)
    if name in builds:
        runner = [k for k in call.keywords if k.arg == "runner"]
        return not runner or ast.unparse(runner[0].value) != "'sequential'"
    words = [s for a in call.args for s in _strings(a)]
    return _cli_build_argv(words) or (name in mains and _cli_build_argv(["precompute.cli", *words]))


def _cli_build_argv(words: list[str]) -> bool:
    builds = "precompute.cli" in words and "build" in words and "--help" not in words
    return builds and "sequential" not in words


def _build_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a module calls ``precompute.job.build`` and ``precompute.cli.main`` by."""
    builds, mains = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("precompute", "precompute.job"):
            builds |= {a.asname or a.name for a in node.names if a.name == "build"}
            builds |= {f"{a.asname or a.name}.build" for a in node.names if a.name == "job"}
        if isinstance(node, ast.ImportFrom) and node.module == "precompute.cli":
            mains |= {a.asname or a.name for a in node.names if a.name == "main"}
        if isinstance(node, ast.Import):
            builds |= {f"{a.asname}.build" for a in node.names if a.name == "precompute.job"}
    return builds, mains


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    found = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        found.update(
            {f"{cls.name}.{n.name}": n for n in cls.body if isinstance(n, ast.FunctionDef)}
        )
    return found


def _builds_on_ray(tree: ast.Module) -> set[str]:
    """Module functions that run a Ray build themselves or through a helper of the module."""
    builds, mains = _build_names(tree)
    functions = _functions(tree)
    calls = {
        name: [n for n in _outside_raises(fn) if isinstance(n, ast.Call)]
        for name, fn in functions.items()
    }
    starts = {n for n, cs in calls.items() if any(_ray_build_call(c, builds, mains) for c in cs)}
    starts |= {  # an argv list of a build subprocess, passed on by name
        name
        for name, fn in functions.items()
        for node in _outside_raises(fn)
        if isinstance(node, ast.List) and _cli_build_argv(_strings(node))
    }
    grew = True
    while grew:
        called = {n for n, cs in calls.items() if any(ast.unparse(c.func) in starts for c in cs)}
        grew = not called <= starts
        starts |= called
    return starts


def _shown(path: Path) -> str:
    return str(path.relative_to(TESTS.parent) if TESTS in path.parents else path)


def _unmarked_ray_tests(module: Path) -> list[str]:
    tree = ast.parse(module.read_text())
    module_marked = any(
        isinstance(n, ast.Assign)
        and ast.unparse(n.targets[0]) == "pytestmark"
        and _marks_ray(n.value)
        for n in tree.body
    )
    deps = _fixture_deps(module)
    on_ray = _builds_on_ray(tree)
    fixtures_on_ray = {n for n in on_ray if n in deps}
    found = []
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for name, fn in _functions(tree).items():
        if not fn.name.startswith("test"):
            continue
        cls = classes.get(name.split(".")[0]) if "." in name else None
        marked = module_marked or any(_marks_ray(d) for d in fn.decorator_list)
        marked = marked or (cls is not None and any(_marks_ray(d) for d in cls.decorator_list))
        requested = _params(fn)
        starts = _needs_ray_fixture(requested, deps) or name in on_ray
        starts = starts or bool(requested & fixtures_on_ray)
        if starts and not marked:
            found.append(f"{_shown(module)}::{name}")
    return found


def test_every_test_that_starts_ray_is_marked_ray() -> None:
    unmarked = [t for m in _modules("test_*.py") for t in _unmarked_ray_tests(m)]
    assert unmarked == []


def test_the_check_finds_a_ray_test_without_the_marker(tmp_path: Path) -> None:
    module = tmp_path / "test_probe.py"
    module.write_text(
        "import pytest\n"
        "from precompute.job import build\n\n"
        "@pytest.fixture\n"
        "def store(ray_local):\n    return 1\n\n"
        "def _helper(out):\n    build('src', out, None)\n\n"
        "def _argv(out):\n    return ['python', '-m', 'precompute.cli', 'build', 'src', out]\n\n"
        "def test_by_subprocess(tmp_path, procs):\n    procs.append(_argv(tmp_path))\n\n"
        "def test_by_fixture(store):\n    pass\n\n"
        "def test_by_helper(tmp_path):\n    _helper(tmp_path)\n\n"
        "def test_sequential(tmp_path):\n    build('s', tmp_path, None, runner='sequential')\n\n"
        "def test_refused(tmp_path):\n"
        "    with pytest.raises(ValueError):\n        build('s', tmp_path, None)\n\n"
        "@pytest.mark.ray\n"
        "def test_marked(ray_local):\n    pass\n"
    )
    found = _unmarked_ray_tests(module)
    assert sorted(f.rsplit("::", 1)[1] for f in found) == [
        "test_by_fixture",
        "test_by_helper",
        "test_by_subprocess",
    ]


def test_no_test_skips_on_a_missing_dependency_of_the_project() -> None:
    """``importorskip`` only for optional extras (DALI, fsspec's http), never for the project's
    own packages or its required and dev dependencies: a broken install fails the run."""
    required = OWN_PACKAGES | {"ray", "moto", "lightning", "boto3", "zarr", "torch", "hypothesis"}
    required |= {"selenium", "jinja2", "markdown_it"}
    skipped = []
    for path in _modules("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("importorskip"):
                name = _strings(node.args[0])[0] if node.args else ""
                if name.split(".")[0] in required:
                    skipped.append(f"{path.relative_to(TESTS.parent)}: {name}")
    assert skipped == []


_MODULE_FIXTURE_TEST = """
import os
import pytest


@pytest.fixture(scope="module")
def shared():
    with open(os.environ["MADE_LOG"], "a") as f:
        f.write(__name__ + "\\n")


def test_a(shared): pass
def test_b(shared): pass
def test_c(shared): pass
"""


def test_xdist_makes_a_module_fixture_once_per_module(tmp_path: Path) -> None:
    """The suite's xdist mode (scripts/dev.sh) keeps each module's tests on one worker."""
    (mode,) = re.findall(r"--dist (\w+)", (REPO / "scripts" / "dev.sh").read_text())
    (tmp_path / "conftest.py").write_text(
        "from tests.xdistscope import pytest_xdist_make_scheduler  # noqa: F401\n"
    )
    for name in ("test_one", "test_two", "test_three"):
        (tmp_path / f"{name}.py").write_text(_MODULE_FIXTURE_TEST)
    log = tmp_path / "made.log"
    # xdist alone: the installed plugins (zarr's, hypothesis, ...) cost each process a second
    env = {**os.environ, "PYTHONPATH": str(REPO), "MADE_LOG": str(log)}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin"]
    cmd += ["-n", "2"]
    cmd += ["--dist", mode, "--rootdir", str(tmp_path), str(tmp_path)]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(log.read_text().split()) == ["test_one", "test_three", "test_two"]

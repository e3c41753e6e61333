"""Import a transform by name and fingerprint its code (as Hugging Face datasets does a map's).

The fingerprint is the sha256 of a canonical JSON document of the function's qualified name,
its keyword arguments and its code: the source of its module and of every module of the
user's own that the module imports, directly or through another such module (found by reading
the ``import`` statements of each source, relative ones too). A module of the user's own is one
whose file lies outside the Python installation and its ``site-packages`` (so a library's
update does not change the fingerprint; its version is the user's to pin) and outside nostall's
own packages (whose changes the store's ``TRANSFORM_VERSION`` covers). A function with a
``version`` attribute (a string or an integer) is fingerprinted by it instead of the sources:
the user says when the code's result changes. Files the function reads (a lookup table, weights)
are not read here: their changes need a new ``version`` or argument (``docs/transforms.md``).

:func:`user_roots` gives the folders and files of those modules' top-level packages: what a
build ships to Ray workers that lack them (``runtime_env`` ``py_modules``, ``docs/scale.md``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import site
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from precompute.errors import SpecError

__all__ = ["fingerprint", "load", "user_modules", "user_roots"]

_OWN = frozenset({"precompute", "loaders", "service"})  # nostall's library packages


# name -> sha256 of the source of each user module when this process last (re)loaded it
_LOADED: dict[str, str] = {}


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def load(name: str) -> Callable[..., Any]:
    """Import ``pkg.module:function`` and return the function, as its files are now.

    A module of the user's that this process imported before and whose file changed since is
    reloaded (its dependencies first, the function's module last): a long-running process (the
    cache service, a notebook) runs, and fingerprints, the code on disk, never an edited
    function's old one.

    Raises:
        SpecError: The module cannot be imported (naming the error), has no such attribute,
            or the attribute is not callable.
    """
    fn = _resolve(name)
    module = name.partition(":")[0]
    sources = {m: s for m, s in user_modules(module).items() if m in sys.modules}
    if any(_LOADED.get(m, _digest(s)) != _digest(s) for m, s in sources.items()):
        for mod in [*[m for m in sources if m != module], module]:
            try:
                importlib.reload(sys.modules[mod])
            except Exception as exc:  # the edited module fails to import
                raise SpecError(
                    f"transform {name}: cannot reload {mod} ({type(exc).__name__}: {exc})"
                ) from None
        fn = _resolve(name)
        sources = {m: s for m, s in user_modules(module).items() if m in sys.modules}
    _LOADED.update({m: _digest(s) for m, s in sources.items()})  # what this process runs
    return fn


def _resolve(name: str) -> Callable[..., Any]:
    """Import ``pkg.module:function`` (no freshness check)."""
    module_name, _, qualname = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module's own code failing
        raise SpecError(
            f"transform {name}: cannot import {module_name} ({type(exc).__name__}: {exc}); "
            "is its package installed or on PYTHONPATH where the build runs?"
        ) from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise SpecError(f"transform {name}: {module_name} has no {qualname}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise SpecError(f"transform {name}: {qualname} is not a function ({type(obj).__name__})")
    return obj  # type: ignore[no-any-return]


@functools.cache
def _outside_user_code() -> tuple[str, ...]:
    """Folders whose modules are not the user's: the installation and its site-packages."""
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
    paths.add(site.getusersitepackages())
    packages = ("site-packages", "dist-packages")
    paths.update(p for p in sys.path if p.rstrip(os.sep).endswith(packages))
    return tuple(sorted(os.path.realpath(p) + os.sep for p in paths if p))


def _user_file(name: str) -> tuple[str, bool] | None:
    """``(file, is a package)`` of module ``name`` if it is one of the user's own, else None.

    A ``.py`` file outside the installation and nostall. Found without importing the module
    (its parent packages are imported), so the modules followed do not depend on what a
    process happened to import: every worker fingerprints the same files.
    """
    if name.split(".")[0] in _OWN or name == "__main__":
        return None
    found = sys.modules.get(name)
    file = getattr(found, "__file__", None) if found is not None else None
    if found is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):  # a name, not a module; or broken
            return None
        file = spec.origin if spec is not None and spec.has_location else None
    if not isinstance(file, str) or not file.endswith(".py"):
        return None  # built-in, extension or namespace module
    if os.path.realpath(file).startswith(_outside_user_code()):
        return None
    return file, os.path.basename(file) == "__init__.py"


# file -> ((mtime_ns, size), source, the import statements' nodes): a file is read and parsed
# once per process while it stays the same (a build fingerprints its transform several times)
_PARSED: dict[str, tuple[tuple[int, int], str, list[ast.Import | ast.ImportFrom]]] = {}


def _parsed(file: str) -> tuple[str, list[ast.Import | ast.ImportFrom]]:
    """``(source, import statements)`` of ``file``, parsed again only when it changed."""
    st = os.stat(file)
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _PARSED.get(file)
    if cached is None or cached[0] != stamp:
        source = Path(file).read_text(encoding="utf-8")
        nodes = [
            n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import | ast.ImportFrom)
        ]
        cached = _PARSED[file] = (stamp, source, nodes)
    return cached[1], cached[2]


def _imported(package: str, nodes: list[ast.Import | ast.ImportFrom]) -> Iterator[str]:
    """The names of the modules ``nodes`` import, relative ones resolved."""
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except ImportError:
                    continue
            if base:
                yield base
            yield from (f"{base}.{alias.name}" if base else alias.name for alias in node.names)


def user_modules(module: ModuleType | str) -> dict[str, str]:
    """``{name: source}`` of ``module`` and every module of the user's it reaches by imports.

    Every ``import`` statement of each source is followed (a function's own imports too); a
    name imported from a module (not a submodule) is no module and is skipped.
    """
    out: dict[str, str] = {}
    todo = [module if isinstance(module, str) else module.__name__]
    while todo:
        name = todo.pop()
        found = None if name in out else _user_file(name)
        if found is None:
            continue
        file, is_package = found
        out[name], nodes = _parsed(file)
        package = name if is_package else name.rpartition(".")[0]
        todo.extend(n for n in _imported(package, nodes) if n not in out)
    return out


def fingerprint(fn: Callable[..., Any], name: str, args: Mapping[str, Any]) -> str:
    """sha256 of ``name``, ``args`` and ``fn``'s code (its ``version``, or the sources).

    Raises:
        SpecError: A ``version`` that is not a string or an integer.
    """
    version = getattr(fn, "version", None)
    doc: dict[str, Any] = {"name": name, "args": dict(args)}
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, str | int):
            raise SpecError(f"transform {name}: version must be a string or an integer")
        doc["version"] = version
    else:
        sources = user_modules(name.partition(":")[0])  # by the name every process imports
        doc["sources"] = {
            k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(sources.items())
        }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def user_roots(name: str) -> list[str]:
    """The top-level packages (folders) or modules (``.py`` files) of the transform's own code.

    What a Ray worker needs to import it where it is not installed (``py_modules``). Empty
    for a transform of an installed package.
    """
    load(name)
    roots = set()
    for mod in user_modules(name.partition(":")[0]):
        top = mod.split(".")[0]
        found = _user_file(top)
        if found is None:  # a namespace package's module: its own file's folder
            continue
        file, is_package = found
        roots.add(os.path.realpath(os.path.dirname(file) if is_package else file))
    return sorted(roots)

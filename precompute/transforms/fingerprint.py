"""Import a transform by name and fingerprint its code (as Hugging Face datasets does a map's).

The fingerprint is the sha256 of a canonical JSON document of the function's qualified name,
its keyword arguments and its code: the source of its module and of every module of the
user's own that the module imports, directly or through another such module (found by reading
the ``import`` statements of each source, relative ones too). A module of the user's own is one
whose file lies outside the Python installation and its ``site-packages`` (so a library's
update does not change the fingerprint; its version is the user's to pin) and outside nostall's
own packages (whose changes the store's ``TRANSFORM_VERSION`` covers). A function with a
``version`` attribute (a string or an integer) is fingerprinted by it instead of the sources:
the user says when the code's result changes.

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
    module = sys.modules.get(getattr(fn, "__module__", ""))
    if module is None:
        return fn
    sources = user_modules(module)
    if any(_LOADED.get(m, _digest(s)) != _digest(s) for m, s in sources.items()):
        for mod in [*[m for m in sources if m != module.__name__], module.__name__]:
            try:
                importlib.reload(sys.modules[mod])
            except Exception as exc:  # the edited module fails to import
                raise SpecError(
                    f"transform {name}: cannot reload {mod} ({type(exc).__name__}: {exc})"
                ) from None
        fn = _resolve(name)
        sources = user_modules(sys.modules[module.__name__])
    _LOADED.update({m: _digest(s) for m, s in sources.items()})
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


def _is_user_module(module: ModuleType) -> bool:
    """A module of the user's own: a ``.py`` file outside the installation and nostall."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return False  # built-in, extension or namespace module
    if module.__name__.split(".")[0] in _OWN:
        return False
    real = os.path.realpath(file)
    return not real.startswith(_outside_user_code())


def _imported(module: ModuleType, source: str) -> Iterator[str]:
    """The names of the modules ``source`` (``module``'s) imports, relative ones resolved."""
    package = module.__package__ or ""
    for node in ast.walk(ast.parse(source)):
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


def user_modules(module: ModuleType) -> dict[str, str]:
    """``{name: source}`` of ``module`` and every module of the user's it reaches by imports.

    Only modules already imported (``sys.modules``: importing ``module`` imported those its
    top level imports) are followed; a name imported from a module (not a submodule) is no
    module and is skipped.
    """
    out: dict[str, str] = {}
    todo = [module]
    while todo:
        mod = todo.pop()
        if mod.__name__ in out or not _is_user_module(mod):
            continue
        source = Path(str(mod.__file__)).read_text(encoding="utf-8")
        out[mod.__name__] = source
        for name in _imported(mod, source):
            found = sys.modules.get(name)
            if isinstance(found, ModuleType) and found.__name__ not in out:
                todo.append(found)
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
        module = sys.modules.get(getattr(fn, "__module__", ""), None)
        sources = user_modules(module) if module is not None else {}
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
    fn = load(name)
    module = sys.modules.get(getattr(fn, "__module__", ""))
    if module is None:
        return []
    roots = set()
    for mod in user_modules(module):
        top = sys.modules.get(mod.split(".")[0])
        path = getattr(top, "__path__", None)
        if path:  # a package: its folder
            roots.add(os.path.realpath(next(iter(path))))
        elif top is not None and getattr(top, "__file__", None):
            roots.add(os.path.realpath(str(top.__file__)))
    return sorted(roots)

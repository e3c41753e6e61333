"""Kinds from other packages: the ``nostall.kinds`` entry points, found by a real installed dist."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _dist(site: Path, module: str, code: str, entry: str = "toy") -> None:
    """A distribution on ``site`` whose entry point ``entry`` names ``module``."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[nostall.kinds]\n{entry} = {module}\n")
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


def test_a_broken_kind_plugin_is_left_out_naming_it_and_why(tmp_path: Path) -> None:
    """One broken plugin (an import that fails, an error of its own, a kind under a built-in
    kind's name) must not take every other kind down, nor take a built-in kind's place."""
    _dist(tmp_path, "broken_kind", "import no_such_module_here\n", entry="toy")
    _dist(tmp_path, "raising_kind", "raise ValueError('plugin broke at import')\n", entry="bad")
    clash = """
        from precompute.fields.kinds import LabelKind
        from precompute.fields.registry import has_kind, register_kind

        class Clash(LabelKind):
            name = "mask"

        if not has_kind("mask"):  # the guard docs/kinds.md asks for: it hid the clash
            register_kind(Clash())
    """
    _dist(tmp_path, "clash_kind", clash, entry="clash")
    got = _run(
        tmp_path,
        """
        import warnings
        warnings.simplefilter("always")
        from precompute.errors import SpecError
        from precompute.fields import KINDS, FieldSpec
        print(type(KINDS["mask"]).__module__, "image" in KINDS)
        try:
            FieldSpec("t", "toy", {})
        except SpecError as exc:
            print(exc)
        """,
    )
    assert got.returncode == 0, got.stderr
    kinds, error = got.stdout.splitlines()
    assert kinds == "precompute.kinds.mask True"
    broken = "toy = 'broken_kind' (nostall.kinds): ModuleNotFoundError: No module named"
    raising = "bad = 'raising_kind' (nostall.kinds): ValueError: plugin broke at import"
    clashing = (
        "clash = 'clash_kind' (nostall.kinds): its kind Clash is named 'mask', the name of "
        "the kind of precompute.kinds.mask"
    )
    for said in (broken, raising, clashing):
        assert f"RuntimeWarning: the kind plugin {said}" in got.stderr, got.stderr
        assert said in error  # a field of a kind not registered names the plugins left out
    assert error.startswith("fields.t.kind must be one of [")


def test_a_kind_needs_a_name_and_a_source_when_registered() -> None:
    from precompute.errors import SpecError
    from precompute.fields.kinds import LabelKind
    from precompute.fields.registry import register_kind

    class Typo(LabelKind):
        name = "typo_source_kind"
        source = "File"

    class Capital(LabelKind):
        name = "Depth"

    with pytest.raises(SpecError, match=r"^Typo.source must be 'file' or 'inline', got 'File'$"):
        register_kind(Typo())
    with pytest.raises(SpecError, match=r"^Capital.name must be a lower-case identifier"):
        register_kind(Capital())


TALLY = """
    import os
    from types import MappingProxyType

    import numpy as np

    from precompute.fields import FieldSpec, Kind, Storage, register_kind
    from precompute.fields.options import Flag, Option, integer
    from precompute.kinds.hooks import SourceReader, register_loader_rule, register_source
    from precompute.sources.fields import FieldItem, FieldSource


    class Tally(Kind):
        name = "tally"
        source = "inline"
        augment = "tally"
        options = MappingProxyType({"scale": Option(1, integer(1, 100))})
        flags = MappingProxyType({
            "tally_scale": Flag("scale", "Tally: the scale.", int),
            "size": Flag("scale", "Tally: a flag the build has already.", int),  # left out
        })

        def storage(self, opts, size):
            return Storage((), "int32", 0)

        def check(self, value, opts):
            return np.asarray(int(value) * opts["scale"], np.int32)

        def parse_inline(self, raw):
            return int(raw)


    def accepts(q):
        return q.src.endswith(".tally")


    def infer(q):
        opts = dict(q.options.get("tally", {}))
        return FieldSpec("image", "image", {"fill": q.fill}), FieldSpec("n", "tally", opts)


    def lister(q):
        rows = sorted(line.split() for line in open(q.src).read().splitlines())
        items = tuple(FieldItem(p, (("image", p),), (("n", int(v)),)) for p, v in rows)
        return FieldSource(os.path.dirname(q.src), ("image", "n"), items)


    def crop(values, crops, size, options):  # the loader's rule: torch, no loaders import
        return values + 1000


    register_kind(Tally())
    register_source(SourceReader("tally", accepts, infer, lister))
    register_loader_rule("tally", crop)
"""


def test_a_kind_plugin_alone_adds_a_source_a_flag_and_a_loader_rule(tmp_path: Path) -> None:
    """A kind module of another distribution: built from its own source with its own flag.

    ``precompute build x.tally --tally-scale 3`` reads the source through the plugin's reader,
    stores its field by its kind, and the loader moves the field by the plugin's rule.
    """
    from PIL import Image

    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        Image.new("RGB", (12, 10), (40 * i, 0, 0)).save(data / f"{i}.png")
    (data / "x.tally").write_text("3.png 7\n0.png 1\n2.png 5\n1.png 2\n")
    _dist(tmp_path / "site", "toy_tally", TALLY)
    got = _run(
        tmp_path / "site",
        f"""
        import numpy as np
        from loaders import StoreLoader
        from loaders.augment import EvalAugment
        from precompute.cli import main

        try:
            main(["build", {str(data / "x.tally")!r}, "--out", {str(tmp_path / "s")!r},
                  "--runner", "sequential", "--size", "8", "--tally-scale", "3", "--quiet"])
        except SystemExit as exc:
            assert not exc.code, exc.code
        loader = StoreLoader({str(tmp_path / "s")!r}, 4, shuffle=False, drop_last=False,
                             augment=EvalAugment(size=8))
        for batch in loader:
            print(sorted(batch["n"].tolist()))
        """,
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.split("\n")[-2] == "[1003, 1006, 1015, 1021]"  # (1, 2, 5, 7) x 3 + 1000
    # the plugin's --size is left out, saying so; the build's --size 8 stayed the store's
    assert "the flag --size of kind 'tally' is an option of precompute build itself" in got.stderr


def test_the_kinds_iterate_in_builtin_order_whichever_module_came_first() -> None:
    """A process that imports one kind module directly registers it first; the registry's
    order (messages that list kinds, inferred fields) must not change with that."""
    code = textwrap.dedent(
        """
        import precompute.kinds.audio, precompute.kinds.boxes
        from precompute.fields import KINDS
        from precompute.fields.registry import BUILTIN
        print(" ".join(KINDS), "|", " ".join(m.rsplit(".", 1)[1] for m in BUILTIN))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    kinds, builtin = out.split("|")
    assert kinds.split() == builtin.split()

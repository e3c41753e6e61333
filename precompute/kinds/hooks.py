"""The open tables of the kinds layer beyond the build's: loader rules, mixing, source readers.

A kind (:class:`precompute.fields.Kind`) names its rules; the functions behind the names live
in tables that any kind module fills when it is imported (``docs/kinds.md`` lists every hook):

* the build's tables stay where the build uses them: file decoders
  (:func:`precompute.fields.assemble.register_decoder`, ``Kind.decoder``) and placement rules
  (:func:`precompute.fields.geometry.register_rule`, ``Kind.resample``);
* the loader's tables live here, so a kind module registers torch functions without importing
  :mod:`loaders` (which :mod:`precompute` never imports): the geometry rule of one batch's
  crop + flip (:func:`register_loader_rule`, ``Kind.augment``), its quarter turns
  (:func:`register_rot90`, the same rule name) and the mixing rules
  (:func:`register_mix_rule`, ``Kind.mixup`` and ``Kind.cutmix``). :mod:`loaders` registers
  its built-in torch functions into these tables when its modules are imported;
* source readers (:func:`register_source`): a kind of source (a scene, a COCO file) that the
  build detects, infers the fields of and lists (:class:`SourceReader`), asked in the order
  they were registered, before the generic field manifest and v1 class folders;
* packed sources (:func:`column_claims`, :func:`suffix_claims`): the Parquet columns and the
  WebDataset members each kind is inferred from, as the kinds declare them
  (``Kind.columns``, ``Kind.suffixes``), so the readers ask the kinds and name none.

Look-ups (:func:`loader_rule`, :func:`rot90_rule`, :func:`mix_rule`, :func:`source_readers`)
load the kind plugins first (:func:`precompute.fields.registry.load_plugins`). Adding a name
twice is a :class:`~precompute.errors.SpecError` naming the table. Nothing here imports torch:
the tables hold the functions, the loader calls them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from precompute.errors import SpecError
from precompute.fields.registry import KINDS, add_entry, load_plugins

if TYPE_CHECKING:
    import torch

    from precompute.fields.options import ColumnClaim, SuffixClaim
    from precompute.fields.spec import FieldSpec
    from precompute.sources.fields import FieldSource

__all__ = [
    "LOADER_RULES",
    "METHODS",
    "MIX_RULES",
    "REFUSE",
    "ROT90_RULES",
    "SOURCE_READERS",
    "MixDraw",
    "SourceQuery",
    "SourceReader",
    "column_claims",
    "loader_rule",
    "mix_rule",
    "register_loader_rule",
    "register_mix_rule",
    "register_rot90",
    "register_source",
    "rot90_rule",
    "source_readers",
    "suffix_claims",
]

# rule(values, crops, size, options) -> values: one batch's crop + flip (loaders.augment.rules)
LoaderRule = Callable[..., "torch.Tensor"]
# rule(values, k, size) -> values: k[b] quarter turns of square fields (loaders.augment.arrays)
Rot90Rule = Callable[..., "torch.Tensor"]
# rule(values, field, draw) -> values: one batch mixed by the Mixup's draw (loaders.augment.mix)
MixRule = Callable[..., "torch.Tensor"]

METHODS = ("mixup", "cutmix")  # the mixing methods; a kind names one rule for each
REFUSE = "refuse"  # the rule name of a method a kind refuses (no function: the Mixup refuses)


@dataclass(frozen=True)
class MixDraw:
    """One batch's mixing decision, as the loader's ``Mixup`` hands it to the mix rules.

    Sample ``i`` is mixed with sample ``B - 1 - i`` (``values.flip(0)``). Every entry is a
    tensor on the batch's device (no host sync): the rules compute for either method and
    the tensors say which one the batch drew.

    Attributes:
        cutmix: ``[]`` bool: CutMix was drawn (and the batch is mixed).
        lam: ``[]`` float32: the own sample's share of the targets: mixup's lambda (rounded
            to the image dtype, as the images use it), the area left outside the pasted box
            under CutMix, 1 for a batch left unmixed.
        box: ``[4]`` int64 ``(top, bottom, left, right)`` of the pasted box in the frame
            (all zero unless CutMix).
        height: The frame's height (the first image field's).
        width: The frame's width.
        num_classes: Classes of the soft targets (``Mixup.num_classes``).
        label_smoothing: Smoothing of one-hot targets before mixing.
        weights: ``weights(dtype) -> [height, width]``: the own sample's weight per pixel
            (lambda everywhere under mixup, 0 inside the pasted box and 1 outside under
            CutMix, 1 for a batch left unmixed).
    """

    cutmix: torch.Tensor
    lam: torch.Tensor
    box: torch.Tensor
    height: int
    width: int
    num_classes: int
    label_smoothing: float
    weights: Callable[[torch.dtype], torch.Tensor]


def _no_text() -> str | None:
    return None


@dataclass(frozen=True)
class SourceQuery:
    """What a source reader is asked about: the source and what the user gave.

    Attributes:
        src: The build's source as given (a path or URL).
        options: Options by kind name from the field flags (``{"mask": {"classes": 4}}``):
            given while fields are inferred, empty while a spec's fields are listed.
        fields: The spec's fields while the source is listed (empty while inferred).
        fill: The spec's letterbox fill (for an inferred image field).
        on_error: The spec's ``on_error`` (``raise`` or ``skip``) while listing.
        read_text: Reads a CSV/JSONL manifest's text once for the whole build (None for
            anything else): use :attr:`text`.
        columns: The spec's ``columns`` (``--columns``): the column or member each named
            field reads, for a reader of a source with columns (Parquet, WebDataset).
    """

    src: str
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    fields: tuple[FieldSpec, ...] = ()
    fill: int = 0
    on_error: str = "raise"
    columns: Mapping[str, str] = field(default_factory=dict)
    read_text: Callable[[], str | None] = field(default=_no_text, compare=False, repr=False)

    @functools.cached_property
    def text(self) -> str | None:
        """The manifest's text (read on first use, once), or None for a folder or file."""
        return self.read_text()


@dataclass(frozen=True)
class SourceReader:
    """A kind of source the build can read: how it is detected, what fields it has, listed.

    Attributes:
        name: The reader's name (unique; error messages name it).
        accepts: ``accepts(query) -> bool``: whether ``query.src`` is this kind of source
            (look at ``query.options`` while inferring, ``query.fields`` while listing).
            Asked in registration order; the first reader that accepts reads the source.
        infer: ``infer(query) -> fields``: the fields of the source, ``query.options`` applied
            (a :class:`~precompute.errors.SpecError` naming the flag a required option needs).
        lister: ``lister(query) -> FieldSource``: every item of the source for
            ``query.fields`` under ``query.on_error``
            (:class:`~precompute.sources.fields.FieldSource`).
        kinds: Kinds whose flags only this reader's sources take (``audio``).
        needs: Said when those flags are given for a source no reader accepts, e.g.
            ``audio options (--clip-seconds and the others) need class folders or a
            manifest of audio files``.
    """

    name: str
    accepts: Callable[[SourceQuery], bool]
    infer: Callable[[SourceQuery], tuple[FieldSpec, ...]]
    lister: Callable[[SourceQuery], FieldSource]
    kinds: tuple[str, ...] = ()
    needs: str = ""


_LOADER: dict[str, LoaderRule] = {}
_ROT90: dict[str, Rot90Rule] = {}
_MIX: dict[str, dict[str, MixRule]] = {method: {} for method in METHODS}
_SOURCES: dict[str, SourceReader] = {}

LOADER_RULES: Mapping[str, LoaderRule] = MappingProxyType(_LOADER)
ROT90_RULES: Mapping[str, Rot90Rule] = MappingProxyType(_ROT90)
MIX_RULES: Mapping[str, Mapping[str, MixRule]] = MappingProxyType(
    {method: MappingProxyType(table) for method, table in _MIX.items()}
)
SOURCE_READERS: Mapping[str, SourceReader] = MappingProxyType(_SOURCES)


def register_loader_rule(name: str, rule: LoaderRule) -> LoaderRule:
    """Add the loader geometry rule ``name`` (``rule(values, crops, size, options) -> values``).

    Raises:
        SpecError: A rule of that name is registered already.
    """
    return add_entry(_LOADER, "loader geometry rule", name, rule)


def register_rot90(name: str, rule: Rot90Rule) -> Rot90Rule:
    """Add the quarter-turn rule of loader geometry rule ``name`` (``rule(values, k, size)``).

    Raises:
        SpecError: A rotation of that name is registered already.
    """
    return add_entry(_ROT90, "rotate-90 rule", name, rule)


def register_mix_rule(method: str, name: str, rule: MixRule) -> MixRule:
    """Add the ``method`` (``mixup`` or ``cutmix``) rule ``name`` (``rule(values, field, draw)``).

    Raises:
        SpecError: An unknown method, the name ``refuse``, or a rule of that name already.
    """
    if method not in _MIX:
        raise SpecError(f"a mix rule's method is one of {list(METHODS)}, got {method!r}")
    if name == REFUSE:
        raise SpecError(f"{REFUSE!r} names a refused method; it has no {method} rule")
    return add_entry(_MIX[method], f"{method} rule", name, rule)


def register_source(reader: SourceReader) -> SourceReader:
    """Add a source reader (asked after those registered before it).

    Raises:
        SpecError: A reader of that name is registered already.
    """
    return add_entry(_SOURCES, "source reader", reader.name, reader)


def loader_rule(name: str) -> LoaderRule | None:
    """The loader geometry rule ``name``, or None if no module registered it."""
    load_plugins()
    return _LOADER.get(name)


def rot90_rule(name: str) -> Rot90Rule | None:
    """The quarter-turn rule of loader geometry rule ``name``, or None."""
    load_plugins()
    return _ROT90.get(name)


def mix_rule(method: str, name: str) -> MixRule | None:
    """The ``method`` rule ``name``; None for ``refuse``.

    Raises:
        SpecError: No module registered ``name`` for ``method`` (naming both).
    """
    if name == REFUSE:
        return None
    load_plugins()
    table = _MIX[method]
    if name not in table:
        raise SpecError(
            f"no {method} rule named {name!r} is registered (register_mix_rule); "
            f"known: {sorted(table)}"
        )
    return table[name]


def source_readers() -> tuple[SourceReader, ...]:
    """Every registered source reader, in the order they are asked."""
    load_plugins()
    return tuple(_SOURCES.values())


def column_claims() -> tuple[tuple[str, ColumnClaim], ...]:
    """``(kind, Kind.columns)`` of every kind that declares one, by priority, then name."""
    found = [(k.columns.priority, name, k.columns) for name, k in KINDS.items() if k.columns]
    return tuple((name, claim) for _, name, claim in sorted(found))


def suffix_claims() -> tuple[tuple[str, SuffixClaim], ...]:
    """``(kind, Kind.suffixes)`` of every kind that declares one, by priority, then name."""
    found = [(k.suffixes.priority, name, k.suffixes) for name, k in KINDS.items() if k.suffixes]
    return tuple((name, claim) for _, name, claim in sorted(found))

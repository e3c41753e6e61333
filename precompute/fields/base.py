"""The base of field kinds: what a kind declares and the hooks it implements.

The registry of the built-in kinds and the rules they declare is :mod:`precompute.fields.kinds`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from precompute.checks import Size
from precompute.errors import DecodeError, SpecError
from precompute.fields.options import REQUIRED, ColumnClaim, Flag, Option, SuffixClaim

__all__ = ["ClassCounts", "Kind", "Storage", "class_counts_of"]


@dataclass(frozen=True)
class Storage:
    """How one sample of a field is stored: shape (without the sample axis), dtype, hole value."""

    shape: tuple[int, ...]
    dtype: str
    fill: int | float


@dataclass(frozen=True, eq=False)
class ClassCounts:
    """How much of each class each sample holds, as (sample, class, count) triplets.

    Sparse, so a label field of many classes costs one triplet a sample. Loaders balance
    sampling by it (``balance=``, ``repeat_factor=``: ``docs/loaders.md``, "Choosing samples").

    Attributes:
        samples: Sample index (0-based within the values counted) of each triplet.
        classes: Class index of each triplet.
        counts: How much of the class: 1 for a label, its pixels for a mask, its boxes.
        num_classes: The field's class count.
    """

    samples: np.ndarray
    classes: np.ndarray
    counts: np.ndarray
    num_classes: int


def class_counts_of(dense: np.ndarray) -> ClassCounts:
    """The triplets of a dense ``(n, classes)`` count table (its non-zero entries)."""
    samples, classes = np.nonzero(dense)
    return ClassCounts(
        samples.astype(np.int64), classes.astype(np.int64),
        dense[samples, classes].astype(np.int64), int(dense.shape[1]),
    )  # fmt: skip


class Kind(ABC):
    """A field kind: class attributes declare the rules, methods check and shape values.

    Attributes:
        name: The registry name, written in specs and in a store's fields table.
        source: ``file`` (a path, decoded by ``decoder``) or ``inline`` (a manifest value).
        decoder: The decoder of a file field (``image``, ``mask``, ``npy``).
        spatial: The field lives in the image's frame: one placement and one draw move it.
        resample: The build's geometry rule (``bilinear``, ``nearest``, ``affine``, ``none``).
        augment: The loader's geometry rule (same names).
        photometric: Colour ops touch it.
        mixup: ``blend`` or ``refuse``.
        cutmix: ``paste`` (the same box), ``area`` (mixed by the pasted area) or ``refuse``.
        class_names: Inline values may be class names, mapped to sorted indices.
        class_index: One class index per sample: the target a classifier's mixing (image
            ``Mixup``, ``AudioAugment``) turns into one-hot soft targets.
        count_option: The option that fixes how many entries a value has (``points``):
            every row of a manifest must give that many (the first row's count if unset).
        options: Option name -> default and checker.
        flags: ``precompute build`` flags by click's parameter name (``mask_classes`` for
            ``--mask-classes``) -> the :class:`~precompute.fields.options.Flag` (the option
            it sets on the field of this kind a source infers).
        hint: Where a user gives this kind's options, named when an inferred field of this
            kind refuses its options (``on the command line: --mask-classes N ...``).
        extensions: File extensions (lower case, with the dot) of this kind's files in class
            folders and ``path,label`` manifests (``precompute.sources.classes``); a folder
            listed for another kind refuses them, naming both kinds. Empty: none.
        beside: Said when this kind's files lie beside another kind's in class folders.
        columns: The Parquet columns a field of this kind is inferred from
            (:class:`~precompute.fields.options.ColumnClaim`); None: none.
        suffixes: The WebDataset members a field of this kind is inferred from
            (:class:`~precompute.fields.options.SuffixClaim`); None: none.
        stores_class_counts: The build counts the classes of each stored value
            (:meth:`class_counts`) and stores the counts beside the store
            (``docs/FORMAT.md``, "Class counts"): for a field read chunk by chunk (a mask),
            which a loader cannot count when it opens the store.
        codecs: The chunk codecs a field of this kind may be stored with besides raw
            (:mod:`precompute.format.codecs`): lossless ``zstd`` for every kind; a lossy codec
            only where the kind's values survive it (``jpeg``: images).
    """

    name: ClassVar[str]
    source: ClassVar[str]  # "file" or "inline"
    decoder: ClassVar[str] = "inline"  # how a file field's bytes are decoded (assemble.DECODE)
    spatial: ClassVar[bool] = False  # lives in the image frame: one placement, one draw
    resample: ClassVar[str] = "none"  # build geometry rule
    augment: ClassVar[str] = "none"  # loader geometry rule
    photometric: ClassVar[bool] = False
    mixup: ClassVar[str] = "refuse"
    cutmix: ClassVar[str] = "refuse"
    class_names: ClassVar[bool] = False  # inline values may be class names
    class_index: ClassVar[bool] = False  # one class index per sample (mixing: one-hot)
    count_option: ClassVar[str | None] = None  # option fixing a value's entry count
    options: ClassVar[Mapping[str, Option]] = MappingProxyType({})
    flags: ClassVar[Mapping[str, Flag]] = MappingProxyType({})
    hint: ClassVar[str] = "on the command line: --fields"
    extensions: ClassVar[tuple[str, ...]] = ()
    beside: ClassVar[str] = ""
    columns: ClassVar[ColumnClaim | None] = None  # Parquet columns it is inferred from
    suffixes: ClassVar[SuffixClaim | None] = None  # WebDataset members it is inferred from
    stores_class_counts: ClassVar[bool] = False  # the build stores class_counts of its values
    codecs: ClassVar[tuple[str, ...]] = ("zstd",)  # chunk codecs it takes besides raw

    def normalize(self, field: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """Return every option of ``field`` checked, defaults filled in.

        Raises:
            SpecError: An unknown or invalid option, or a required one missing.
        """
        unknown = sorted(set(map(str, given)) - set(self.options))
        if unknown:
            known = sorted(self.options)
            raise SpecError(
                f"fields.{field}: unknown option(s) {unknown} of kind {self.name!r}; known: {known}"
            )
        out = {}
        for key, opt in self.options.items():
            value = given.get(key, opt.default)
            if value is REQUIRED:
                raise SpecError(f"fields.{field}.{key} is required for kind {self.name!r}")
            out[key] = opt.check(f"fields.{field}.{key}", value)
        self.cross_check(field, out)
        for key in self.unused(out):  # not part of the spec: two equal stores, one hash
            del out[key]
        return out

    def unused(self, opts: Mapping[str, Any]) -> Mapping[str, str]:
        """The options that ``opts`` leave without effect, each with why (default: none).

        :meth:`normalize` leaves them out of the field's options, so of the spec, its hash,
        the cache key and what ``inspect`` shows; ``precompute build`` refuses a flag that
        sets one, saying why. E.g. audio: the log-mel options of a waveform.
        """
        return {}

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """Check options against each other (default: nothing to check)."""
        return None

    @abstractmethod
    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """Return the storage of one sample in a store of side ``size``."""

    def rules(self, opts: Mapping[str, Any]) -> tuple[bool, str, str]:
        """``(spatial, resample, augment)`` of a field with options ``opts``.

        Default: the class attributes. A kind whose geometry depends on an option (an
        ``array`` that lives in the image frame) overrides this.
        """
        return self.spatial, self.resample, self.augment

    def companions(self, opts: Mapping[str, Any], size: Size) -> Mapping[str, Storage]:
        """Per-sample arrays stored beside the field, as ``FIELD.WHAT`` (default: none).

        E.g. an audio field's ``length``: ``{"length": Storage((), "int32", 0)}``.
        """
        return {}

    def companion_values(self, value: Any, opts: Mapping[str, Any]) -> Mapping[str, Any]:
        """The companions' values of one decoded ``value`` by ``WHAT`` (default: none).

        Called with the value as the kind's decoder (or the manifest) gave it, before
        :meth:`check`; e.g. audio: ``{"length": the valid length}``. ``ValueError`` for a
        value whose companions cannot be given.
        """
        return {}

    def moved_companions(self, value: Any, opts: Mapping[str, Any]) -> Mapping[str, Any]:
        """Companions that follow the field's value wherever it moves (default: none).

        Called with the value after each move that may change it: the build's placement
        (numpy: the stored value, or ``(K, *shape)`` with variants) and, in the loader, each
        policy's geometry and each mixing (torch: ``[B, *shape]`` on the batch's device, no
        host sync). What it returns replaces those companions (of :meth:`companion_values`),
        cast to their storage dtype. E.g. boxes: ``{"count": the rows that are boxes}``,
        since a crop drops boxes.
        """
        return {}

    def learn(self, opts: Mapping[str, Any], values: Sequence[Any]) -> dict[str, Any]:
        """Options a build learns from every item's parsed inline ``values`` (default: none).

        Only options left at ``None`` are learned (e.g. the keypoint count).
        """
        return {}

    def check_stored(self, values: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Check the stored values of the valid samples (``precompute verify``).

        ``values`` has the sample axis first. Default: nothing to check beyond the array's
        shape and dtype. Raises ``ValueError`` saying what is wrong.
        """
        return None

    def class_counts(self, values: np.ndarray, opts: Mapping[str, Any]) -> ClassCounts | None:
        """How much of each class each of the stored ``values`` holds (sample axis first).

        Default: None (a field without classes: it cannot be balanced). A label field gives
        one count a sample, a mask its pixels per class, boxes their count per class; holes
        count nothing.
        """
        return None

    def band_values(
        self, name: str, arrays: Mapping[str, Any], opts: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """One shard's values of field ``name`` for per-band statistics, or None (the default).

        ``arrays``: the shard's arrays by name (the field's, its companions, ``valid``). A kind
        whose values are bands (an audio feature's mel bands or MFCCs) returns them bands
        last with a boolean mask of the values that count (valid samples, valid frames); the
        build folds them into ``report.band_stats.FIELD`` (count, mean, std, min, max per
        band: :mod:`precompute.arrays.stats`), which loaders normalise with.
        """
        return None

    def spec_defaults(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Build spec values this kind's flags imply where the user gave none (default: none).

        Called by ``precompute build`` with the options its flags set on the field of this
        kind (``given``, unchecked); e.g. ``position``: ``--patch P`` stores the patches as
        cut, ``{"size": P}``.
        """
        return {}

    def placed(
        self, key: str, value: np.ndarray, stored: np.ndarray, frame: tuple[int, int]
    ) -> None:
        """Told by the build what placement did to one checked ``value`` (default: nothing).

        Called once per item (not per offline variant) with the ``stored`` value and the
        source ``frame`` ``(w, h)``, for build notes (:mod:`precompute.notes`): e.g.
        keypoints that the build's crop cut off.
        """
        return None

    def note_holds(self, name: str, before: Any, after: Any) -> bool:
        """Whether note ``name``, made of the source, holds once a user's transform ran.

        ``before`` is this field's value the transform was given, ``after`` the one it
        returned (``docs/transforms.md``: as decoded, or as stored). A kind whose notes
        describe values a transform can change says here whether they are still true of
        ``after`` (an image's ``gray_low_bits``: still dark); the build drops those that are
        not, so a note describes what is stored. Default: every note holds (the kind has
        no such note, or it is about the source whatever the transform does).
        """
        return True

    def describe(self, opts: Mapping[str, Any], size: Size) -> str:
        """This field in a few words, for a one-line summary of a store (``cache ls``).

        Default: the kind's name, and the stored shape and dtype of one sample
        (``array 11x11x200 float32``; ``label`` for a scalar). A kind whose options say more
        says them (audio: ``audio 1 s logmel 64 mels``; an image its side).
        """
        st = self.storage(opts, size)
        shape = "x".join(map(str, st.shape))
        return f"{self.name} {shape} {st.dtype}" if shape else self.name

    def flip_warning(self, field: str, opts: Mapping[str, Any]) -> str | None:
        """What a loader's horizontal flip does to this field's meaning, to warn of (default: None).

        Asked once when a loader is made whose policy may flip (not per batch); the loader
        warns a ``UserWarning`` with the text. E.g. keypoints without flip pairs: a flip
        mirrors the points, and a left landmark then lies where the right one should.
        """
        return None

    def float_scale(self, opts: Mapping[str, Any]) -> float | None:
        """What a loader's ``dtype=`` multiplies this field's integer values by (default: None).

        None: the field is not signal and keeps its dtype under a loader's ``dtype=`` (class
        ids, labels, coordinates). A number: the field is converted to the loader's float
        dtype, an integer stored value times this factor (``image``: 1/255, so [0, 1];
        ``audio`` waveforms: 1/32768, so [-1, 1)), a float one cast as it is.
        """
        return None

    def pad(self, opts: Mapping[str, Any]) -> int | float:
        """The letterbox padding value of a spatial field (default: the hole value)."""
        return self.storage(opts, 1).fill

    @abstractmethod
    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """Return ``value`` as the stored array; raise ``ValueError`` naming what is wrong."""

    def parse_inline(self, raw: Any) -> Any:
        """Parse a manifest cell of an inline kind into a hashable value (``ValueError``)."""
        raise ValueError(f"kind {self.name!r} is read from a file, not written inline")

    def validate(self, value: Any, field: str, opts: Mapping[str, Any], key: str) -> np.ndarray:
        """Return ``value`` checked and converted for storage.

        Raises:
            DecodeError: Naming the input ``key``, the field and what is wrong with the value.
        """
        try:
            return self.check(value, opts)
        except ValueError as exc:
            raise DecodeError(key, f"field {field!r} ({self.name}): {exc}") from None

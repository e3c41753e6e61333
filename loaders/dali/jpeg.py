"""``JpegLoader``: decode a raw image folder or manifest with DALI, no precompute step.

The GPU-decode strategy (TF-native style): the same sources ``precompute build`` takes
(:func:`precompute.sources.classes.list_source`), the same order function over the sorted items (a
chunk
is ``chunk_samples`` consecutive items), decoded by ``fn.decoders.image`` (``device="mixed"``
with a GPU, ``"cpu"`` without), then the same crop/flip/colour/normalise graph.

Bad files follow the build's policy (``on_error``): ``raise`` raises
:class:`precompute.errors.DecodeError` naming the file when its batch is reached; ``skip``
drops it from its batch and records it in :attr:`JpegLoader.skipped`. DALI aborts a whole batch
on one undecodable file, so files are checked in two places: every header is parsed with
Pillow before the batch is fed (cheap; also gives the size the crop is drawn in), and when DALI
still fails on a batch, the files of the batches in flight are decoded one by one with Pillow
to name the culprit, and the pipeline is rebuilt from that batch without it.

Pixels follow the build's decode rules (``precompute.stages.decode``): EXIF orientation is
applied and 16-bit gray is scaled by 1/257 (DALI does both), and images with an alpha channel,
which DALI would simply drop, and GIFs, which it cannot decode, are decoded on the host with the
build's decoder (alpha composited over white) and handed to DALI as PPM. That costs host CPU
for those (usually rare) files only.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from PIL import Image, UnidentifiedImageError

from loaders.contract import check_int
from loaders.dali.base import DaliLoaderBase, Fetched, PipelineRunError
from loaders.dali.graph import GraphSpec
from loaders.errors import LoaderError
from loaders.selection import SampleTable
from precompute.fields import v1_fields

__all__ = ["ON_ERROR", "JpegLoader"]

ON_ERROR = ("raise", "skip")
_ORIENTATION = 0x0112
_EXIF_IN_HEADER = frozenset({"JPEG", "MPO"})
_HOST_FORMATS = frozenset({"GIF"})  # formats DALI's decoder does not read
_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_DEFAULT_MAX_PIXELS = 89_478_485  # as precompute.spec.DEFAULT_MAX_PIXELS


def _placeholder() -> np.ndarray:
    """A valid 1x1 PNG, fed (with index -1) when every file of a batch was skipped."""
    buf = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buf, "PNG")
    return np.frombuffer(buf.getvalue(), np.uint8)


def header_info(raw: bytes, max_pixels: int) -> tuple[int, int, bool]:
    """Return ``(height, width, host)`` from the header only.

    ``height, width`` are what the decoder produces (EXIF orientation applied); ``host`` says
    the file must be decoded on the host: it has an alpha channel (DALI would drop it; the
    build composites it over white) or a format DALI cannot decode (GIF).

    Raises:
        ValueError: Not an image Pillow recognises, or larger than ``max_pixels``.
    """
    try:
        with Image.open(io.BytesIO(raw)) as im:
            w, h = im.size
            # JPEG keeps EXIF in a header segment; other formats (PNG) would decode to find it
            exif = im.getexif() if im.format in _EXIF_IN_HEADER else {}
            rotated = exif.get(_ORIENTATION, 1) in (5, 6, 7, 8)
            host = (
                im.mode in _ALPHA_MODES
                or im.format in _HOST_FORMATS
                or (im.mode == "P" and "transparency" in im.info)
            )
    except UnidentifiedImageError as exc:
        raise ValueError("not an image format Pillow recognises") from exc
    except Exception as exc:  # Pillow raises many types for garbage
        raise ValueError(f"unreadable image header ({type(exc).__name__}: {exc})") from exc
    if w * h > max_pixels:
        raise ValueError(f"{w}x{h} pixels exceed max_pixels={max_pixels}")
    return (w, h, host) if rotated else (h, w, host)


def _host_decoded(raw: bytes, key: str, max_pixels: int) -> bytes:
    """Decode with the build's rules (alpha over white) and re-encode as PPM for DALI."""
    from precompute.errors import DecodeError
    from precompute.stages.decode import decode_bytes

    try:
        img = decode_bytes(raw, key, max_pixels)
    except DecodeError as exc:
        raise ValueError(exc.reason) from exc
    buf = io.BytesIO()
    img.save(buf, "PPM")
    return buf.getvalue()


def full_decode_error(raw: bytes) -> str | None:
    """Return why Pillow cannot decode ``raw`` fully, or None when it can."""
    try:
        with Image.open(io.BytesIO(raw)) as im:
            im.load()
    except Exception as exc:
        return f"undecodable ({type(exc).__name__}: {exc})"
    return None


class JpegLoader(DaliLoaderBase):
    """Decode raw images with DALI behind the ``StoreLoader`` contract.

    Batches are dicts of torch tensors ``image`` (B, 3, size, size), ``label`` and ``index``
    (position in the sorted source items).

    Args:
        src: Image folder (class sub-folders) or CSV/JSONL manifest, as for ``precompute build``.
        batch_size: Samples per batch.
        size: Output side length (overrides ``augment.size``).
        chunk_samples: Items per order chunk (consecutive sorted items).
        on_error: ``raise`` or ``skip`` undecodable files (see module docstring).
        max_pixels: Files whose header claims more pixels are bad (decompression bombs).
        prescan: Read every file's header once up front. Files found bad there are left out of
            the order like a store's holes (every rank still gets equally many samples); with
            ``on_error="raise"`` the first one raises here. Without it, a bad file is found
            when its batch is fed, and that batch is one sample short.
        **kwargs: See :class:`loaders.dali.base.DaliLoaderBase`.
    """

    def __init__(
        self,
        src: str | os.PathLike[str],
        batch_size: int,
        size: int = 224,
        *,
        chunk_samples: int = 32,
        on_error: str = "raise",
        max_pixels: int = _DEFAULT_MAX_PIXELS,
        prescan: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(batch_size, **kwargs)
        from precompute.sources.classes import list_source

        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.augment = replace(self.augment, size=size)
        self.source = list_source(src)
        self.num_samples = len(self.source)
        self.chunk_samples = check_int("chunk_samples", chunk_samples, 1)
        self.on_error, self.max_pixels = on_error, max_pixels
        # key -> reason, for every file left out so far (listing skips included, as the build)
        self.skipped: dict[str, str] = dict(self.source.skipped)
        self._bad: dict[int, str] = {}  # item index -> reason
        self._batch_bad: dict[tuple[int, int], list[int]] = {}
        self._holes: npt.NDArray[np.bool_] | None = self._prescan() if prescan else None
        self._check_serves()

    def _prescan(self) -> npt.NDArray[np.bool_]:
        """Check every header; return the mask of good files (bad ones follow ``on_error``)."""
        for i in range(self.num_samples):
            try:
                self._read(i)
            except (OSError, ValueError) as exc:
                self._bad[i] = str(exc)
                self._apply_policy(i)
        mask = np.ones(self.num_samples, bool)
        mask[list(self._bad)] = False
        return mask

    def _data_identity(self) -> dict[str, Any]:
        from precompute.sources.classes import fingerprint

        if not hasattr(self, "_fingerprint"):
            self._fingerprint = fingerprint(self.source)
        return {"chunk_samples": self.chunk_samples, "source_fingerprint": self._fingerprint}

    def _valid(self) -> npt.NDArray[np.bool_] | None:
        return self._holes

    def _sample_tables(self) -> list[SampleTable]:
        """The listed files: labels (field ``label``) and keys (``subset``, ``balance``)."""
        n = self.num_samples
        labels = np.asarray([label for _, label in self.source.items], np.int64)
        keys = [key for key, _ in self.source.items]
        valid = np.ones(n, bool) if self._holes is None else self._holes
        classes = len(self.source.classes) or None
        fields = v1_fields(classes)
        return [
            SampleTable(
                str(self.source.root), n, self.chunk_samples, valid, fields, {"label": labels},
                lambda: keys,
            )
        ]  # fmt: skip

    def _graph(self) -> GraphSpec:
        return self._graph_spec(self.augment.size, decode=True)

    def _read(self, i: int) -> tuple[np.ndarray, tuple[int, int]]:
        key = self.source.items[i][0]
        raw = self.source.read_bytes(key)
        h, w, host = header_info(raw, self.max_pixels)
        if host:
            raw = _host_decoded(raw, key, self.max_pixels)
        return np.frombuffer(raw, np.uint8), (h, w)

    def _fetch(self, epoch: int, batch: int, indices: npt.NDArray[np.int64]) -> Fetched:
        data, hw, keep, rows = [], [], [], []
        for row, i in enumerate(int(i) for i in indices):
            if i not in self._bad:
                try:
                    raw, shape = self._read(i)
                except (OSError, ValueError) as exc:
                    self._bad[i] = str(exc)
                else:
                    data.append(raw)
                    hw.append(shape)
                    keep.append(i)
                    rows.append(row)
        self._batch_bad[(epoch, batch)] = [int(i) for i in indices if int(i) in self._bad]
        if not keep:  # a placeholder row, left out of the batch by its index -1
            data, hw, keep, rows = [_placeholder()], [(1, 1)], [-1], [0]
        idx = np.asarray(keep, np.int64)
        labels = np.asarray([self.source.items[i][1] if i >= 0 else -1 for i in keep], np.int64)
        return Fetched(
            data=data,
            hw=np.asarray(hw, np.int64),
            offset=None,
            label=labels,
            index=idx,
            rows=np.asarray(rows, np.intp),
        )

    def _run(self, epoch: int, start: int, mine: int) -> Iterator[dict[str, torch.Tensor]]:
        b = start
        while b < self.num_batches(epoch):
            try:
                yield from self._run_from(epoch, b, mine)
                return
            except PipelineRunError as exc:  # DALI aborts the whole batch on one bad file
                b = self._batch  # the batches served so far: the failed one is next
                self._identify_bad(epoch, b, exc)

    def _pipeline(self, epoch: int, start: int) -> Any:
        self._batch_bad.clear()  # records of batches fed to a previous pipeline
        return super()._pipeline(epoch, start)

    def _police(self, epoch: int, batch: int) -> None:
        """Apply ``on_error`` to the files of ``batch`` found bad while feeding it."""
        for i in self._batch_bad.pop((epoch, batch), []):
            if self._holes is None or self._holes[i]:  # prescan holes are not in the order
                self._apply_policy(i)

    def _apply_policy(self, i: int) -> None:
        """Raise :class:`precompute.errors.DecodeError` for bad item ``i``, or record it."""
        key = self.source.items[i][0]
        if self.on_error == "raise":
            from precompute.errors import DecodeError

            raise DecodeError(key, self._bad[i])
        self.skipped[key] = self._bad[i]

    def _identify_bad(self, epoch: int, batch: int, exc: PipelineRunError) -> None:
        """Decode the files of the batches in flight one by one and mark the bad ones.

        Raises:
            LoaderError: DALI failed but Pillow decodes every file in flight (the message
                names the batch's files and carries DALI's error).
        """
        order, bs = self.epoch_indices(epoch), self.batch_size
        stop = min(len(order), (batch + self.prefetch + 1) * bs)
        found = False
        for i in (int(i) for i in order[batch * bs : stop]):
            if i in self._bad:
                continue
            reason = full_decode_error(self.source.read_bytes(self.source.items[i][0]))
            if reason is not None:
                self._bad[i], found = reason, True
        if not found:
            keys = [self.source.items[int(i)][0] for i in order[batch * bs : (batch + 1) * bs]]
            raise LoaderError(
                f"DALI failed on batch {batch} of epoch {epoch} (files {keys}), "
                f"but Pillow decodes each of them: {exc.reason}"
            ) from exc

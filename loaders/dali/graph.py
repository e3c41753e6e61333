"""Build the DALI pipeline shared by both loaders: (decode) -> crop+resize -> colour -> normalise.

With encoded input and a crop, decoding and cropping are one op (``fn.decoders.image_slice``:
only the crop window is decoded); otherwise the crop is a ``fn.slice`` before ``fn.resize``.

The graph takes everything random as external per-sample inputs (see :mod:`.params`), so the
pipeline itself is deterministic. The Python feeder gives one batch per call in batch mode,
with ``cycle="raise"``: at the end of the epoch it raises ``StopIteration``, which DALI turns
into the end of the epoch instead of silently yielding nothing on the next one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from loaders.dali._compat import require_dali
from loaders.dali.params import DaliAugment

__all__ = ["PASSED", "GraphSpec", "build_pipeline"]

# Per-sample feeds the graph passes through to its outputs unchanged, after the image.
PASSED = ("label", "index", "is_pad")


@dataclass(frozen=True)
class GraphSpec:
    """What the pipeline does.

    Attributes:
        aug: Augmentation policy.
        out_size: Output side length; None keeps the input size (no resize).
        decode: True when the feeder gives encoded image bytes (JPEG/PNG...).
        batch_size: Maximum batch size.
        device_id: None for a CPU-only pipeline, else the GPU index.
        num_threads: DALI CPU worker threads.
        prefetch: DALI prefetch queue depth.
    """

    aug: DaliAugment
    out_size: int | None
    decode: bool
    batch_size: int
    device_id: int | None
    num_threads: int = 2
    prefetch: int = 2

    @property
    def resize(self) -> bool:
        """Whether the graph crops/resizes (else images pass at their input size)."""
        return self.out_size is not None or self.aug.crops

    @property
    def feed_names(self) -> tuple[str, ...]:
        """The per-batch inputs the graph uses, in the order the feeder gives them."""
        names = ["data"]
        names += ["roi_start", "roi_end"] if self.aug.crops else []
        names += ["mirror"]
        names += ["brightness", "contrast"] if self.aug.brightness or self.aug.contrast else []
        names += ["saturation"] if self.aug.saturation else []
        return (*names, *PASSED)


def _images(spec: GraphSpec, data: Any, start: Any, end: Any) -> Any:
    fn, types = require_dali().fn, require_dali().types
    gpu = spec.device_id is not None
    if spec.resize and spec.out_size is None:
        raise ValueError("an output size is needed when cropping (DaliAugment.size)")
    crop = spec.aug.crops
    if spec.decode and crop:  # decode only the crop (ROI decoding): about half the work
        data = fn.decoders.image_slice(
            data,
            device="mixed" if gpu else "cpu",
            start=start,
            end=end,
            axis_names="HW",
            output_type=types.RGB,
        )
        crop = False
    elif spec.decode:
        data = fn.decoders.image(data, device="mixed" if gpu else "cpu", output_type=types.RGB)
    elif gpu:
        data = data.gpu()
    if not spec.resize:
        return data
    if crop:  # crop first: the resize filter never reaches outside it
        data = fn.slice(data, start=start, end=end, axis_names="HW")
    return fn.resize(
        data, size=[spec.out_size, spec.out_size], interp_type=types.INTERP_LINEAR, antialias=True
    )


def _colour(aug: DaliAugment, img: Any, f: dict[str, Any]) -> Any:
    fn = require_dali().fn
    if aug.brightness or aug.contrast:
        img = fn.brightness_contrast(img, brightness=f["brightness"], contrast=f["contrast"])
    if aug.saturation:
        img = fn.saturation(img, saturation=f["saturation"])
    return img


def _normalise(aug: DaliAugment, img: Any, mirror: Any) -> Any:
    fn, types = require_dali().fn, require_dali().types
    layout = "HWC" if aug.channels_last else aug.layout  # torch permutes HWC to NCHW-last
    if aug.dtype == "uint8":
        return fn.crop_mirror_normalize(img, mirror=mirror, dtype=types.UINT8, output_layout=layout)
    dtype = types.FLOAT16 if aug.dtype == "float16" else types.FLOAT  # bfloat16: torch casts
    return fn.crop_mirror_normalize(
        img,
        mirror=mirror,
        dtype=dtype,
        output_layout=layout,
        mean=[255.0 * m for m in aug.mean],
        std=[255.0 * s for s in aug.std],
    )


def build_pipeline(spec: GraphSpec, feeder: Iterable[tuple[Any, ...]]) -> Any:
    """Return a built DALI pipeline whose outputs are ``(image, label, index, is_pad)``.

    ``feeder`` yields, per batch, a tuple of per-sample inputs named by ``spec.feed_names``.
    """
    dali = require_dali()
    pipe = dali.Pipeline(
        batch_size=spec.batch_size,
        num_threads=spec.num_threads,
        device_id=spec.device_id,
        prefetch_queue_depth=spec.prefetch,
    )
    with pipe:
        names = spec.feed_names
        feeds = dali.fn.external_source(
            source=feeder, num_outputs=len(names), batch=True, cycle="raise"
        )
        f = dict(zip(names, feeds, strict=True))
        img = _images(spec, f["data"], f.get("roi_start"), f.get("roi_end"))
        img = _colour(spec.aug, img, f)
        pipe.set_outputs(_normalise(spec.aug, img, f["mirror"]), *(f[k] for k in PASSED))
    pipe.build()
    return pipe

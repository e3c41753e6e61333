"""``gpu-decode`` for segmentation: DALI decodes image and mask, one crop and flip for both.

Per batch, the feeder reads both files and draws each sample's random resized crop and flip
on the host (:func:`loaders.dali.params.batch_params`, the DALI loaders' draw, inside the
image's size read from its header once). The graph decodes only the crop window of the image
(``fn.decoders.image_slice``; nvJPEG with CUDA), resizes it bilinear, flips and normalises
it (``fn.crop_mirror_normalize``, CHW); it decodes the mask (``fn.decoders.image``), cuts the
same window, resizes it nearest-neighbour and flips it. DALI's PNG decoder gives a palette
mask's colours, not its indices, so the colours go back to class ids through one table
(:func:`colour_table`: the palette the mask files share, or ``--colormap``) on the device.
Class labels the source has beside the masks ride through the graph untouched, one output each.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from benchmarks.errors import NotApplicable
from benchmarks.harness.native.dali_epochs import DaliEpochs, device_id, host_labels

__all__ = ["colour_table", "mask_source"]


def _palette(path: str) -> tuple[str, bytes | None]:
    from PIL import Image

    with Image.open(path) as im:  # the header and palette only: no pixels decoded
        return im.mode, (bytes(im.getpalette() or []) if im.mode == "P" else None)


def colour_table(paths: Sequence[str], options: Mapping[str, Any]) -> dict[int, int] | None:
    """``{packed RGB: class id}`` of DALI's decoded colours, or None for grey id masks.

    Raises:
        NotApplicable: Masks of mixed modes, palettes that differ between files, or two
            classes of one colour: DALI's colours cannot be read back as ids.
    """
    classes = int(options["classes"])
    table = options.get("colormap")
    modes = {_palette(p) for p in paths}
    kinds = {mode for mode, _ in modes}
    if kinds <= {"L"} and table is None:
        return None
    if table is not None and kinds <= {"RGB", "RGBA", "L"}:
        colours = [tuple(int(c) for c in rgb) for rgb in table]
    elif kinds == {"P"} and len(modes) == 1:
        pal = next(iter(modes))[1] or b""
        pal = pal + bytes(3 * 256 - len(pal))
        colours = [tuple(pal[3 * i : 3 * i + 3]) for i in range(classes)]
    else:
        raise NotApplicable(
            f"the mask files are {sorted(kinds)} images of {len(modes)} different palettes: "
            "DALI decodes a palette mask to colours, and these colours cannot be read back "
            "as one set of class ids"
        )
    packed = [(r << 16) | (g << 8) | b for r, g, b in colours]
    if len(set(packed)) < len(packed):
        raise NotApplicable("two classes have one colour in the masks' palette")
    return {code: i for i, code in enumerate(packed)}


def _ids(mask: torch.Tensor, table: dict[int, int] | None, ignore: int) -> torch.Tensor:
    """``[B, S, S, C]`` decoded mask values -> ``[B, S, S]`` int64 class ids."""
    if table is None:
        return mask[..., 0].long()
    rgb = mask[..., :3].long()
    code = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    keys = torch.tensor(sorted(table), device=mask.device)
    ids = torch.tensor([table[k] for k in sorted(table)], device=mask.device)
    at = torch.searchsorted(keys, code).clamp(max=len(keys) - 1)
    return torch.where(keys[at] == code, ids[at], torch.full_like(code, ignore))


def _graph(feeder: Any, cfg: Any, labels: int = 0) -> Any:
    from loaders.dali._compat import require_dali

    dali: Any = require_dali()
    fn, types = dali.fn, dali.types

    from benchmarks.harness.strategies import MEAN, STD

    dev = device_id(torch.device(cfg.device))
    pipe = dali.Pipeline(batch_size=cfg.batch_size, num_threads=cfg.threads, device_id=dev)
    with pipe:
        img, mask, start, end, mirror, *carried = fn.external_source(
            source=feeder, num_outputs=5 + labels, batch=True, cycle="raise"
        )
        img = fn.decoders.image_slice(img, start=start, end=end, axis_names="HW",
                                      device="mixed" if dev is not None else "cpu",
                                      output_type=types.RGB)  # fmt: skip
        img = fn.resize(img, size=[cfg.size, cfg.size], interp_type=types.INTERP_LINEAR,
                        antialias=True)  # fmt: skip
        img = fn.crop_mirror_normalize(img, mirror=mirror, dtype=types.FLOAT,
                                       output_layout="CHW", mean=[255.0 * m for m in MEAN],
                                       std=[255.0 * s for s in STD])  # fmt: skip
        mask = fn.decoders.image(mask, device="cpu", output_type=types.ANY_DATA)
        mask = fn.slice(mask, start=start, end=end, axis_names="HW")
        if dev is not None:
            mask = mask.gpu()
        mask = fn.resize(mask, size=[cfg.size, cfg.size], interp_type=types.INTERP_NN,
                         antialias=False)  # fmt: skip
        pipe.set_outputs(img, fn.flip(mask, horizontal=mirror), *carried)
    pipe.build()
    return pipe


def mask_source(
    images: Sequence[str],
    masks: Sequence[str],
    options: Mapping[str, Any],
    cfg: Any,
    labels: Sequence[Sequence[int]] = (),
) -> DaliEpochs:
    """The ``gpu-decode`` epoch source of image/mask file pairs.

    ``labels``: the class index of every pair, per carried label field; the batches' targets
    are then ``(masks, label, ...)``.

    Raises:
        NotApplicable: The masks' colours cannot be read back as class ids.
    """
    from PIL import Image

    from loaders.batching.order import batch_seed
    from loaders.dali import DaliAugment
    from loaders.dali._compat import to_torch
    from loaders.dali.params import batch_params

    table = colour_table(masks, options)
    ignore = int(options.get("ignore_index", 255))
    aug = DaliAugment(size=cfg.size)
    hw = []
    for path in images:
        with Image.open(path) as im:
            hw.append((im.height, im.width))
    sizes, n, size = np.asarray(hw), len(images), cfg.batch_size

    def feeder(epoch: int) -> Iterator[Any]:
        order = np.random.default_rng([cfg.seed, 0x5A, epoch]).permutation(n)
        for b in range(n // size):
            rows = order[b * size : (b + 1) * size]
            p = batch_params(aug, sizes[rows], batch_seed(cfg.seed, epoch, 0, b))
            yield (
                [np.fromfile(images[r], np.uint8) for r in rows],
                [np.fromfile(masks[r], np.uint8) for r in rows],
                list(p.roi_start),
                list(p.roi_end),
                list(p.mirror.astype(np.int32)),
                *([np.array([lab[r]], np.int64) for r in rows] for lab in labels),
            )

    def finish(outs: Any, device: torch.device) -> tuple[torch.Tensor, Any]:
        x, ids = to_torch(outs[0], device), _ids(to_torch(outs[1], device), table, ignore)
        if not labels:
            return x, ids
        return x, (ids, *(host_labels(o, device) for o in outs[2:]))

    def build(source: Any) -> Any:
        return _graph(source, cfg, len(labels))

    return DaliEpochs(build, feeder, finish, n, torch.device(cfg.device))

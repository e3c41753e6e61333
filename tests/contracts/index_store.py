"""Stores whose pixels encode each sample's index, and reading batches back as numpy.

The contract suites (:mod:`tests.contracts.loader_contract`, :mod:`tests.contracts.state_contract`)
and many loader tests check what a loader serves against these stores: channel 0 of every pixel
is ``i % 256``, channel 1 ``i // 256``, channel 2 the variant, and the label is ``i % 7``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec

__all__ = [
    "NUM_CLASSES",
    "LoaderFactory",
    "cat",
    "collect",
    "decode_index",
    "index_images",
    "make_index_store",
    "to_numpy",
]

LoaderFactory = Callable[..., Any]
NUM_CLASSES = 7


def make_index_store(
    root: str | Path,
    num_samples: int = 100,
    *,
    size: int = 16,
    chunk_samples: int = 4,
    shard_samples: int = 16,
    variants: int = 1,
    holes: Sequence[int] = (),
) -> Path:
    """Write a store whose pixels encode each sample's index (and variant); return its path.

    Labels are ``index % 7``; ``holes`` get label -1 and zero pixels, as a skipped input would.
    """
    n, k = num_samples, variants
    images = index_images(n, size, k)
    labels = (np.arange(n) % NUM_CLASSES).astype(np.int64)
    holes = list(holes)
    labels[holes] = -1
    images[holes] = 0
    spec = BuildSpec(
        size=size, chunk_samples=chunk_samples, shard_samples=shard_samples, variants=k
    )
    write_store_from_arrays(root, images, labels, spec)
    return Path(root)


def index_images(num_samples: int, size: int, variants: int = 1) -> np.ndarray:
    """``(n, size, size, 3)`` uint8 (``(n, k, ...)`` for ``k > 1`` variants) encoding the index.

    Channel 0 is ``i % 256``, channel 1 ``i // 256``, channel 2 the variant (0 for one).
    """
    n, k, idx = num_samples, variants, np.arange(num_samples)
    shape = (n, size, size, 3) if k == 1 else (n, k, size, size, 3)
    images = np.zeros(shape, np.uint8)
    images[..., 0] = (idx % 256).reshape(-1, *[1] * (len(shape) - 2))
    images[..., 1] = (idx // 256).reshape(-1, *[1] * (len(shape) - 2))
    if k > 1:
        images[..., 2] = np.arange(k).reshape(1, k, 1, 1)
    return images


def to_numpy(x: Any) -> np.ndarray:
    """Return a tensor (any device) or array as a numpy array."""
    if hasattr(x, "detach"):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


def decode_index(images: Any) -> np.ndarray:
    """Return the sample index encoded in each image of an NHWC uint8 batch."""
    arr = to_numpy(images).astype(np.int64)
    return arr[:, 0, 0, 0] + 256 * arr[:, 0, 0, 1]


def collect(loader: Iterable[dict[str, Any]], limit: int | None = None) -> list[dict[str, Any]]:
    """Return up to ``limit`` batches of ``loader`` as dicts of numpy arrays."""
    out = []
    for batch in loader:
        out.append({k: to_numpy(v) for k, v in batch.items()})
        if limit is not None and len(out) >= limit:
            break
    return out


def cat(batches: list[dict[str, Any]], key: str) -> np.ndarray:
    """Return ``key`` of every batch, concatenated (empty for no batches)."""
    return np.concatenate([b[key] for b in batches]) if batches else np.zeros(0, np.int64)

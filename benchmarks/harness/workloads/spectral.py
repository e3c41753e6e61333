"""Spectral patches (array + label): flips, quarter turns and per-band normalisation.

Every strategy serves patches float32 ``[B, C, P, P]`` (bands first), each flipped with
probability 1/2 and turned by a random multiple of 90 degrees, normalised per band, and
``label`` int64 ``[B]``. ``StoreLoader`` normalises with the store's band statistics
(``TrainAugment(rot90=True)``); the ``workers`` and ``memmap`` strategies with the statistics
of the source's samples (up to :data:`STATS_SAMPLES` of them, computed once when they open).
``memmap`` is the reference read: the scene (a ``.npy``) or each ``.npy`` file mapped once
by numpy, each batch gathered from the mapping on the training thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Transform, Workload, register_workload
from benchmarks.harness.workloads.items import decoded_values
from benchmarks.harness.workloads.nets import ConvNet

__all__ = ["STATS_SAMPLES", "Spectral", "turn"]

STATS_SAMPLES = 512


def turn(patch: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``(P, P, C)``: flipped left-right with probability 1/2, then turned ``k`` quarters."""
    flip, k = bool(rng.random() < 0.5), int(rng.integers(0, 4))
    return np.rot90(patch[:, ::-1] if flip else patch, k, axes=(0, 1))


def _reflect(idx: np.ndarray, n: int) -> np.ndarray:
    """Indices outside ``[0, n)`` mirrored without repeating the border (numpy's reflect)."""
    idx = np.abs(idx)
    return np.where(idx >= n, 2 * (n - 1) - idx, idx)


@register_workload
class Spectral(Workload):
    """Spectral patch classification."""

    name = "spectral"
    kinds = ("array", "label")
    task = "spectral patches (array + label)"
    engines = ("memmap",)
    reads = ("position",)  # the scene's patch centres (memmap), never served
    mixes = "the loaders refuse to blend array fields (kind array), so no strategy could mix alike"
    classic_text = "decode the patch (numpy), flip + quarter turn, per-band normalise per item"

    @property
    def stored(self) -> str:
        """A patch's side and bands."""
        p, _, c = self.plan.field_spec(self.input).options["shape"]
        return f"{self.input}: {p} x {p} patches of {c} bands"

    @property
    def store_text(self) -> str:
        """The store loaders' augmentation."""
        return "TrainAugment(flip + rot90, the store's per-band normalisation), io='ram' if it fits"

    @functools.cached_property
    def stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-band mean and std (1 where 0) over up to :data:`STATS_SAMPLES` samples."""
        n = len(self.plan)
        pick = np.random.default_rng(0).permutation(n)[:STATS_SAMPLES]
        stack = np.stack([decoded_values(self.plan, int(i))[self.input] for i in pick])
        flat = stack.reshape(-1, stack.shape[-1]).astype(np.float64)
        std = flat.std(0)
        return flat.mean(0).astype(np.float32), np.where(std > 0, std, 1.0).astype(np.float32)

    def classic(self, seed: int) -> Transform:
        """Flip, turn and normalise each patch (bands first)."""
        array, label = self.input, self.target
        mean, std = self.stats

        def transform(values: Mapping[str, Any], rng: np.random.Generator) -> Any:
            x = (turn(values[array], rng) - mean) / std
            return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1), np.float32)), (
                torch.tensor(int(values[label]))
            )

        return transform

    def store_augment(self, threads: int) -> Any:
        """``TrainAugment``: no crop (the whole patch), flip, quarter turns, bands."""
        from loaders.augment import RandomResizedCrop, TrainAugment

        whole = RandomResizedCrop(scale=(1.0, 1.0), ratio=(1.0, 1.0))
        return TrainAugment(size=self.hw, crop=whole, rot90=True, threads=threads)

    def store_options(self, store: str) -> dict[str, Any]:
        """``io="ram"`` when the store fits the loader's map budget, as ``docs/arrays.md`` says.

        Patches are small rows: a batch from memory is one gather, as from a numpy memmap.
        """
        from benchmarks.common import store_bytes
        from loaders.store.open_store import MAP_BYTES

        total = sum(store_bytes(Path(store), f.name) for f in self.plan.fields)
        return {"io": "ram"} if total <= MAP_BYTES else {}

    def model(self) -> tuple[nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """A conv net over the bands (stride 1 first: patches are small); cross-entropy."""
        from benchmarks.harness.sources import num_classes

        bands = int(self.plan.field_spec(self.input).options["shape"][-1])
        net = ConvNet(bands, num_classes(self.plan), strides=(1, 2, 2))
        return net, nn.functional.cross_entropy

    def served(self) -> str:
        """What a batch holds."""
        p, _, c = self.plan.field_spec(self.input).options["shape"]
        return (
            f"{self.input} float32 [B, {c}, {p}, {p}] normalised per band, {self.target} int64 [B]"
        )

    def gpu_decode(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "the patches are arrays, nothing to decode: DALI's numpy reader reads whole files, "
            "not patches of a scene; memmap is the raw-read reference"
        )

    def tf_native(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "TensorFlow reads no .npy/.npz/.mat files (tf.io has no array decoder); memmap is "
            "the raw-read reference and tf-store serves the patches"
        )

    def memmap(self, cfg: Any) -> Any:
        """Batches gathered from a numpy memmap of the scene, or of each ``.npy`` file."""
        from benchmarks.harness.strategies.epochs import FunctionSource

        self.one_label("memmap")
        read, what = self._reader()
        n, size = len(self.plan), cfg.batch_size
        labels = np.array([int(i.value(self.target)) for i in self.plan.source.items])
        mean, std = self.stats
        device = torch.device(cfg.device)

        def epoch(e: int) -> Iterator[Any]:
            order = np.random.default_rng([cfg.seed, 0x5A, e]).permutation(n)
            for b in range(n // size):
                rows = order[b * size : (b + 1) * size]
                rng = np.random.default_rng([cfg.seed, e, b])
                patches = read(rows)
                x = np.stack([turn(p, rng) for p in patches])
                x = ((x - mean) / std).transpose(0, 3, 1, 2)
                yield (
                    torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(device),
                    torch.from_numpy(labels[rows]).to(device),
                )

        return FunctionSource(epoch, n, note=what)

    def _reader(self) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
        """``read(rows) -> (B, P, P, C)`` from a memmap, and what it maps."""
        files = [self.plan.source.locate(i.file(self.input)) for i in self.plan.source.items]
        scenes = {f.split("#", 1)[0] for f in files}
        if any("#" in f for f in files) and len(scenes) == 1:
            return self._scene_reader(scenes.pop())
        if not all(f.endswith(".npy") for f in files):
            raise NotApplicable("numpy maps .npy files only; this source has other array files")
        maps = [np.load(f, mmap_mode="r") for f in files]
        return (lambda rows: np.stack([maps[i] for i in rows])), (
            f"{len(files)} .npy files, each memory-mapped once, a batch stacked from the maps"
        )

    def _scene_reader(self, scene: str) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
        if not scene.endswith(".npy"):
            raise NotApplicable(f"numpy maps a .npy scene; {scene} is not one")
        data = np.load(scene, mmap_mode="r")
        p = int(self.plan.field_spec(self.input).options["shape"][0])
        position = self.field("position")  # the scene's patch centres (row, col)
        centre = np.array([i.value(position) for i in self.plan.source.items], np.int64)
        offsets = np.arange(p) - p // 2

        def read(rows: np.ndarray) -> np.ndarray:
            r = _reflect(centre[rows, :1] + offsets, data.shape[0])
            c = _reflect(centre[rows, 1:] + offsets, data.shape[1])
            return np.asarray(data[r[:, :, None], c[:, None, :]])

        return read, f"{scene} memory-mapped once, each batch one fancy-index gather of patches"

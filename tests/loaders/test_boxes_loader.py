"""Boxes stores through ``StoreLoader``: crop, flip, rotate-90 and mixing, checked by the pixels.

The store is built from a real COCO file over real PNG/JPEG files whose boxes are drawn white
on black, so every returned image shows where its returned boxes must be.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from loaders import StoreLoader
from loaders.augment import EvalAugment, Mixup, TrainAugment
from loaders.augment.image.ops import CenterCrop, HorizontalFlip, RandomResizedCrop
from loaders.dali.store import refuse_unserved_fields
from loaders.errors import StoreOpenError
from loaders.store.open_store import open_store
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.kinds.boxes.batch import count_boxes, mix_boxes
from precompute.kinds.hooks import MixDraw
from precompute.spec import BuildSpec
from tests.precompute.boxdata import make_coco

OUT = 24


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("boxes")
    coco, _ = make_coco(root / "set", n=40, per_image=1, empty=3)
    # min_visibility 0: any box with a visible part is kept, so no rectangle shows unboxed
    fields = (FieldSpec("image", "image"), FieldSpec("boxes", "boxes", {"min_visibility": 0.0}))
    spec = BuildSpec(
        size=40, mode="letterbox", shard_samples=16, chunk_samples=8, seed=1, fields=fields
    )
    build(str(coco), str(root / "store"), spec, runner="sequential", progress=False)
    return root / "store"


def _white(image: torch.Tensor) -> torch.Tensor | None:
    """``(x0, y0, x1, y1)`` pixel edges of the white pixels of ``[C, H, W]`` in [0, 1]."""
    on = image.mean(0) > 0.5
    rows, cols = torch.nonzero(on.any(1)).flatten(), torch.nonzero(on.any(0)).flatten()
    if not len(rows):
        return None
    return torch.tensor([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1], dtype=torch.float32)


def _check_batch(batch: dict[str, torch.Tensor]) -> tuple[float, int]:
    """Every box frames its rectangle (worst edge distance), none shows without its box."""
    assert torch.equal(batch["boxes.count"], count_boxes(batch["boxes"]))
    assert batch["boxes.count"].dtype == torch.int32
    worst, seen = 0.0, 0
    for b in range(batch["boxes"].shape[0]):
        white, box = _white(batch["image"][b]), batch["boxes"][b, 0]
        if int(batch["boxes.count"][b]) == 0:
            assert white is None, f"sample {b}: no box, but a rectangle shows: {white}"
        elif white is not None:
            worst = max(worst, float((white - box[:4]).abs().max()))
            seen += 1
    return worst, seen


@pytest.mark.parametrize("path", ["fast", "grid"])
@pytest.mark.parametrize("rot90", [False, True])
def test_random_crops_flips_and_turns_move_each_box_with_its_pixels(
    store: Path, path: str, rot90: bool
) -> None:
    augment = TrainAugment(
        size=(OUT, OUT), crop=RandomResizedCrop(scale=(0.3, 1.0)), flip=HorizontalFlip(),
        normalize=None, path=path, rot90=rot90,
    )  # fmt: skip
    worst, seen, dropped = 0.0, 0, 0
    with StoreLoader(store, 8, seed=4, augment=augment, prefetch=0) as loader:
        for _ in range(3):  # three epochs
            for batch in loader:
                w, n = _check_batch(batch)
                worst, seen = max(worst, w), seen + n
                dropped += int((batch["boxes.count"] == 0).sum())
    assert seen > 60 and dropped > 9  # boxes seen, and some cut away by the crop (3 empty)
    assert worst <= 1.0, worst  # within a pixel (a resampled edge moves by half of one)


def test_the_eval_view_moves_the_boxes_with_the_centre_crop(store: Path) -> None:
    augment = EvalAugment(size=(OUT, OUT), crop=CenterCrop(1.0), normalize=None)
    counts, worst = [], 0.0
    with StoreLoader(store, 8, shuffle=False, drop_last=False, augment=augment) as loader:
        for batch in loader:
            worst = max(worst, _check_batch(batch)[0])
            counts += batch["boxes.count"][~batch["is_pad"]].tolist()
    assert worst <= 1.0 and len(counts) == 40 and counts.count(1) >= 30


def test_without_augment_the_batches_hold_the_stored_rows_and_count(store: Path) -> None:
    with StoreLoader(store, 8, shuffle=False, drop_last=False) as loader:
        batch = next(iter(loader))
    assert batch["boxes"].shape == (8, 1, 5) and batch["boxes"].dtype == torch.float32
    assert torch.equal(batch["boxes.count"], count_boxes(batch["boxes"]))


def test_mixup_and_cutmix_batches_carry_2m_rows_and_their_count(store: Path) -> None:
    augment = TrainAugment(size=(OUT, OUT), normalize=None)
    mix = Mixup(3, mixup_alpha=0.4, cutmix_alpha=1.0, switch_prob=0.5)
    totals = []
    with StoreLoader(store, 8, seed=2, augment=augment, mixup=mix, prefetch=0) as loader:
        for batch in loader:
            assert batch["boxes"].shape == (8, 2, 5)  # capacity 2 x max_boxes (1)
            assert torch.equal(batch["boxes.count"], count_boxes(batch["boxes"]))
            totals.append(int(batch["boxes.count"].sum()))
    assert max(totals) > 8  # some batch mixed in its partners' boxes


def _draw(cutmix: bool, lam: float, box: tuple[int, int, int, int] = (0, 0, 0, 0)) -> MixDraw:
    return MixDraw(
        cutmix=torch.tensor(cutmix), lam=torch.tensor(lam), box=torch.tensor(box),
        height=20, width=20, num_classes=3, label_smoothing=0.0,
        weights=lambda dtype: torch.ones(20, 20, dtype=dtype),
    )  # fmt: skip


class _Field:
    options = {"min_visibility": 0.25}


A = [[2.0, 2, 8, 8, 0], [12, 12, 18, 18, 1]]  # sample 0
B = [[0.0, 0, 20, 10, 2], [-1] * 5]  # sample 1: one box, one padding row


def test_mixup_is_the_union_of_both_samples_boxes_own_first() -> None:
    boxes = torch.tensor([A, B])
    out = mix_boxes(boxes, _Field, _draw(False, 0.7))
    assert out[0].tolist() == [*A, B[0], [-1] * 5]
    assert out[1].tolist() == [B[0], *A, [-1] * 5]
    unmixed = mix_boxes(boxes, _Field, _draw(False, 1.0))  # lam 1: the partner does not show
    assert unmixed[0].tolist() == [*A, [-1] * 5, [-1] * 5]


def test_cutmix_cuts_own_boxes_by_the_paste_and_clips_the_partners_to_it() -> None:
    boxes = torch.tensor([A, B])
    # paste rows 0..10, columns 5..20 of the partner: region [5, 20] x [0, 10]
    out = mix_boxes(boxes, _Field, _draw(True, 0.6, (0, 10, 5, 20)))
    # sample 0: A[0] spans 2..8 x 2..8; the paste covers its full height from x=5: it keeps
    # [2, 5] x [2, 8] (half its area); A[1] lies below the paste; B's box clipped to the
    # region keeps [5, 20] x [0, 10] (3/4 of it)
    assert out[0].tolist() == [[2, 2, 5, 8, 0], A[1], [5, 0, 20, 10, 2], [-1] * 5]
    # sample 1: its own box keeps [0, 5] x [0, 10] (1/4: the threshold, kept); A[0] clipped to
    # the region keeps [5, 8] x [2, 8] (1/2); A[1] lies outside the region: dropped
    assert out[1].tolist() == [[0, 0, 5, 10, 2], [5, 2, 8, 8, 0], [-1] * 5, [-1] * 5]
    field = type("F", (), {"options": {"min_visibility": 0.26}})
    assert mix_boxes(boxes, field, _draw(True, 0.6, (0, 10, 5, 20)))[1, 0, 4] == 0  # below


def test_a_paste_over_every_pixel_of_a_box_edge_shrinks_it_whatever_the_fraction() -> None:
    """A box edge at 4.63 has its first pixel at column 5 (centre 5.5): a paste from column 5
    covers the box's whole width, as one from column 4 does; both leave rows 36..38.53."""
    box = [4.63, 18.83, 33.84, 38.53, 0.0]
    boxes = torch.tensor([[box], [[-1.0] * 5]])
    field = type("F", (), {"options": {"min_visibility": 0.1}})  # it keeps 13% of its area
    got = [mix_boxes(boxes, field, _draw(True, 0.5, (4, 36, x, 37)))[0, 0].tolist() for x in (5, 4)]
    assert got[0] == got[1]
    assert got[0] == pytest.approx([4.63, 36.0, 33.84, 38.53, 0.0], abs=1e-5)


def test_the_middle_sample_of_an_odd_batch_keeps_its_boxes_once() -> None:
    """Sample i mixes with B - 1 - i: in a batch of 3, sample 1 with itself (its image is
    unchanged); its boxes were listed twice by Mixup and cut in two by CutMix."""
    boxes = torch.tensor([B, A, B])
    for draw in (_draw(False, 0.7), _draw(True, 0.6, (0, 10, 5, 20))):
        assert mix_boxes(boxes, _Field, draw)[1].tolist() == [*A, [-1] * 5, [-1] * 5]
    assert mix_boxes(boxes, _Field, _draw(False, 0.7))[0].tolist() == [B[0], B[0], *[[-1] * 5] * 2]


def test_dali_refuses_a_boxes_store_naming_the_field(store: Path) -> None:
    source = open_store(store)
    try:
        with pytest.raises(StoreOpenError, match=r"field\(s\) 'boxes' \(boxes\) it cannot serve"):
            refuse_unserved_fields(source)
    finally:
        source.close()

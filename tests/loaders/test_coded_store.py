"""Stores with coded fields (zstd, jpeg) streamed: decoded on the reader threads, checked first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

from loaders import StoreLoader
from loaders.errors import CorruptChunkError
from loaders.store.open_store import open_store
from loaders.transfer.devicedecode import unpack
from precompute.fields import FieldSpec
from precompute.pipeline.arraystore import write_fields_store
from precompute.sample import make_image
from precompute.spec import BuildSpec

SIZE, N = 32, 20


@pytest.fixture(scope="module")
def coded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A v2 store: jpeg image, zstd mask, zstd label; two holes; chunks of 4, shards of 8."""
    root = tmp_path_factory.mktemp("coded") / "store"
    fields = (
        FieldSpec("image", "image", {}),
        FieldSpec("mask", "mask", {"classes": 4}),
        FieldSpec("label", "label", {"classes": 4}),
    )
    spec = BuildSpec(size=SIZE, shard_samples=8, chunk_samples=4, fields=fields,
                     codecs={"image": "jpeg:90", "mask": "zstd:3", "label": "zstd"})  # fmt: skip
    images = np.stack([np.asarray(make_image(1, i, i % 4, (SIZE, SIZE))) for i in range(N)])
    ids = np.repeat(np.repeat(np.arange(N * 16).reshape(N, 4, 4) % 4, 8, 1), 8, 2).astype("u1")
    valid = np.ones(N, np.uint8)
    valid[[3, 17]] = 0
    images[valid == 0], ids[valid == 0] = 0, 255
    labels = np.where(valid == 1, np.arange(N) % 4, -1)
    keys = [f"k{i}" if v else "" for i, v in enumerate(valid)]
    write_fields_store(
        root, spec, {"image": images, "mask": ids, "label": labels, "valid": valid, "key": keys}
    )
    return root


def _zarr(root: Path, name: str) -> np.ndarray:
    return np.asarray(zarr.open_array(root / name)[:])


@pytest.mark.parametrize("io", ["pread", "mmap", "ram"])
def test_batches_hold_what_zarr_python_decodes(coded: Path, io: str) -> None:
    loader = StoreLoader(coded, 5, device="cpu", seed=3, drop_last=False, io=io, num_threads=2)
    image, mask, label = (_zarr(coded, n) for n in ("image", "mask", "label"))
    seen = []
    for batch in loader:
        idx = batch["index"].numpy()
        assert np.array_equal(batch["image"].numpy(), image[idx])
        assert np.array_equal(batch["mask"].numpy(), mask[idx])
        assert np.array_equal(batch["label"].numpy(), label[idx])
        seen += idx.tolist()
    assert sorted(seen) == [i for i in range(N) if i not in (3, 17)]
    loader.close()


def test_resume_mid_epoch_gives_the_same_remaining_batches(coded: Path) -> None:
    first = StoreLoader(coded, 4, device="cpu", seed=1)
    it = iter(first)
    next(it)
    state = first.state_dict()
    rest = [b["image"].clone() for b in it]
    again = StoreLoader(coded, 4, device="cpu", seed=1)
    again.load_state_dict(state)
    assert all(torch.equal(a, b["image"]) for a, b in zip(rest, again, strict=True))


@pytest.mark.parametrize("name", ["image", "mask"])
def test_a_damaged_coded_chunk_raises_never_serves_pixels(
    tmp_path: Path, coded: Path, name
) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(coded, root)
    shard = root / name / "c" / "1" / "0" / "0" / ("0" if name == "image" else "")
    shard = shard if shard.is_file() else shard.parent
    data = bytearray(shard.read_bytes())
    data[len(data) // 5] ^= 0x04  # inside the shard's first chunk's stored bytes
    shard.write_bytes(bytes(data))
    loader = StoreLoader(root, 4, device="cpu", shuffle=False, drop_last=False)
    with pytest.raises(CorruptChunkError, match="crc32c checksum mismatch"):
        for _ in loader:
            pass


def test_packed_rows_hold_the_streams_a_device_decoder_reads(coded: Path) -> None:
    """The CPU half of the device route: rows packed undecoded, unpacked, decoded: same pixels."""
    import simplejpeg

    source = open_store(coded)
    reader = source.streams["image"]
    reader.pack = True
    rows = np.zeros((4, SIZE * SIZE * 3), np.uint8)
    reader.read_chunk_runs((0, 0, 0, 0), [(rows, np.arange(4))])
    streams = unpack(rows)
    assert len(streams[3]) == 0  # sample 3: a hole, no stream (fill)
    want = _zarr(coded, "image")[:4]
    for i in (0, 1, 2):
        assert np.array_equal(simplejpeg.decode_jpeg(bytes(streams[i])), want[i])
    source.close()


def test_jpeg_decoder_device_is_refused_where_the_device_cannot_decode(coded: Path) -> None:
    with pytest.raises(ValueError, match=r"jpeg_decoder must be one of .*got 'gpu'"):
        StoreLoader(coded, 4, device="cpu", jpeg_decoder="gpu")
    with pytest.raises(ValueError, match=r"jpeg_decoder='device': the loader's device is cpu, "):
        StoreLoader(coded, 4, device="cpu", jpeg_decoder="device")
    with pytest.raises(ValueError, match=r"jpeg_decoder='device': io='ram' reads and decodes"):
        StoreLoader(coded, 4, device="cpu", io="ram", jpeg_decoder="device")


def test_the_reader_threads_decode_alike_whatever_the_route_asked(coded: Path) -> None:
    got = {}
    for mode in ("auto", "reader"):
        loader = StoreLoader(coded, 5, device="cpu", seed=4, jpeg_decoder=mode)
        assert loader._decoders == {}  # no CUDA here: the reader threads decode
        got[mode] = [b["image"].clone() for b in loader]
        loader.close()
    assert all(torch.equal(a, b) for a, b in zip(got["auto"], got["reader"], strict=True))


@pytest.mark.dali
def test_dali_decodes_the_stored_streams_as_the_reader_does(coded: Path, tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from loaders.dali import DaliStoreLoader
    from precompute.pipeline.writer import write_store_from_arrays

    images = np.stack([np.asarray(make_image(2, i, i % 4, (SIZE, SIZE))) for i in range(12)])
    spec = BuildSpec(size=SIZE, shard_samples=8, chunk_samples=4, codecs={"image": "jpeg:90"})
    write_store_from_arrays(tmp_path / "v1", images, np.arange(12) % 3, spec)
    out = {}
    for decoder in ("reader", "dali"):
        loader = DaliStoreLoader(tmp_path / "v1", 4, device="cpu", seed=0, jpeg_decoder=decoder)
        out[decoder] = [b["image"].clone() for b in loader]
        loader.close()
    assert len(out["dali"]) == 3
    for a, b in zip(out["reader"], out["dali"], strict=True):
        assert torch.equal(a, b)


@pytest.mark.gpu
def test_a_jpeg_field_decoded_on_the_device_matches_the_cpu(coded: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    pytest.importorskip("nvidia.nvimgcodec")
    cpu = StoreLoader(coded, 5, device="cpu", seed=0)
    gpu = StoreLoader(coded, 5, device="cuda", seed=0)
    reader = StoreLoader(coded, 5, device="cuda", seed=0, jpeg_decoder="reader")
    assert gpu._decoders and not reader._decoders  # the device route, and the reader's
    for a, b, c in zip(cpu, gpu, reader, strict=True):
        assert torch.equal(a["index"], b["index"].cpu())
        diff = (a["image"].int() - b["image"].cpu().int()).abs()
        assert diff.float().mean() < 1.5 and int(diff.max()) <= 16  # IDCT rounding only
        assert torch.equal(a["mask"], b["mask"].cpu())
        assert torch.equal(a["image"], c["image"].cpu())  # libjpeg-turbo on the reader threads

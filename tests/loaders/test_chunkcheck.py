"""The chunk checksum: whichever crc32c implementation is installed gives the crc32c package's
values, over whole buffers and continued part by part, and a changed byte fails the check."""

from __future__ import annotations

import crc32c as crc32c_package
import numpy as np
import pytest

from loaders.errors import CorruptChunkError
from loaders.store.chunkcheck import ChunkChecker, crc32c


@pytest.mark.parametrize("size", [0, 1, 7, 63, 64, 65, 4095, 150_528, 4_816_896 + 3])
def test_the_checksum_is_the_crc32c_packages_whole_and_in_parts(size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size + 5, dtype=np.uint8)[5:]  # unaligned
    assert crc32c(data) == crc32c_package.crc32c(data.tobytes())
    value = 0
    for part in np.array_split(data, 7):
        value = crc32c(memoryview(part), value)
    assert value == crc32c_package.crc32c(data.tobytes())


def test_a_changed_byte_fails_the_check_naming_the_chunk() -> None:
    rows = np.random.default_rng(0).integers(0, 256, (4, 1000), dtype=np.uint8)
    stored = crc32c_package.crc32c(rows.tobytes())
    checker = ChunkChecker("image", "always")
    checker.check((0,), "store/image/c/0", list(rows), stored, None)
    rows[2, 500] ^= 1
    with pytest.raises(CorruptChunkError, match="crc32c checksum mismatch"):
        checker.check((0,), "store/image/c/0", list(rows), stored, None)

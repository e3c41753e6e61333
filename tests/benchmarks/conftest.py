import numpy as np
import pytest
from PIL import Image

from precompute.pipeline.writer import write_store_from_arrays
from precompute.sample import make_sample_dataset
from precompute.sources.classes import list_source
from precompute.spec import BuildSpec


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench") / "data"
    make_sample_dataset(root, num_images=48, num_classes=3, size_range=(32, 56), seed=3)
    return root


@pytest.fixture(scope="session")
def tiny_store(tiny_data, tmp_path_factory):
    """A store of the tiny dataset at 32 px, written without Ray (decode + resize here)."""
    src = list_source(str(tiny_data))
    images = np.stack(
        [
            np.asarray(Image.open(src.locate(k)).convert("RGB").resize((32, 32)))
            for k, _ in src.items
        ]
    )
    labels = np.array([label for _, label in src.items])
    out = tmp_path_factory.mktemp("bench") / "store.zarr"
    write_store_from_arrays(
        out, images, labels, BuildSpec(size=32, shard_samples=16, chunk_samples=8)
    )
    return out

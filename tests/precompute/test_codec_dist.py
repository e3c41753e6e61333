"""The ``zarr.codecs`` entry point, from an installed dist: zarr-python reads decoded pixels.

docs/FORMAT.md ("Codecs") says that with nostall installed, ``zarr.open_array`` on a JPEG
store's image array returns decoded pixels. Here the project is built into a wheel and
installed into a folder of its own; a fresh interpreter that sees only that folder and the
third-party packages (no site hooks: the checkout's editable install is not on its path) opens
the array with zarr-python alone. zarr finds the ``nostall.jpeg`` codec through the installed
dist's entry point, imports it from the installed package, and returns the pixels the codec
decodes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from precompute.format.codecs import CodecSpec
from precompute.pipeline.writer import write_store_from_arrays
from precompute.sample import make_image
from precompute.spec import BuildSpec
from tests.processes import REPO

PACKAGES = ("precompute", "loaders", "service", "benchmarks")

_CHILD = """
import importlib.metadata as md, json, sys
import numpy as np, zarr
before = sorted(m for m in sys.modules if m.split(".")[0] in ("precompute", "loaders"))
pixels = zarr.open_array(sys.argv[1], mode="r")[:]
np.save(sys.argv[2], pixels)
(ep,) = [e for e in md.entry_points(group="zarr.codecs") if e.name == "nostall.jpeg"]
import precompute
print(json.dumps({"value": ep.value, "dist": str(ep.dist.locate_file("")),
                  "package": precompute.__file__, "before": before}))
"""


def _installed(tmp: Path) -> Path:
    """The project built into a wheel (from a copy of its sources) and installed into a folder."""
    src = tmp / "src"
    for name in PACKAGES:
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    pip = [sys.executable, "-m", "pip", "-q", "--no-input", "--disable-pip-version-check"]
    for args in (
        ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp / "dist")],
        ["install", "--no-deps", "--no-index", "--no-compile", "--target", str(tmp / "site")],
    ):
        what = str(src) if args[0] == "wheel" else str(next((tmp / "dist").glob("nostall-*.whl")))
        done = subprocess.run([*pip, *args, what], capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
    return tmp / "site"


@pytest.mark.slow
def test_zarr_python_reads_decoded_pixels_through_the_installed_entry_point(
    tmp_path: Path,
) -> None:
    site = _installed(tmp_path)
    images = np.stack([np.asarray(make_image(3, i, i % 4, (48, 48))) for i in range(6)])
    images[4] = 0  # a hole: no stream, decodes to exactly the fill
    spec = BuildSpec(size=48, shard_samples=4, chunk_samples=2, codecs={"image": "jpeg:90"})
    store = tmp_path / "store.zarr"
    write_store_from_arrays(store, images, np.arange(6) % 4, spec)
    third_party = sysconfig.get_paths()["purelib"]  # numpy, zarr, simplejpeg, Pillow
    env = {"PYTHONPATH": f"{site}:{third_party}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", _CHILD, str(store / "image"), str(tmp_path / "px.npy")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["value"] == "precompute.format.codecs.jpeg:JpegCodec"
    assert seen["before"] == []  # nothing of nostall imported before zarr looked the codec up
    assert Path(seen["dist"]).resolve() == site.resolve()  # the installed dist's entry point
    assert Path(seen["package"]).resolve().is_relative_to(site.resolve())  # and its package
    pixels = np.load(tmp_path / "px.npy")
    assert pixels.dtype == np.uint8 and pixels.shape == images.shape
    jpeg = CodecSpec.from_dict("jpeg:90")
    for i in range(0, 6, 2):  # what the codec decodes of each stored chunk, exactly
        want = np.empty((2, 48, 48, 3), np.uint8)
        stored = jpeg.codec.encode(images[i : i + 2], jpeg.options, 0)
        jpeg.codec.decode_into(stored, want, jpeg.options, 0)
        np.testing.assert_array_equal(pixels[i : i + 2], want)
    assert np.array_equal(pixels[4], images[4])  # the hole: exactly the fill
    err = np.abs(pixels.astype(int) - images.astype(int))
    assert err.mean() < 8  # the noisy test image as a q90 JPEG keeps it (raw bytes: ~100)

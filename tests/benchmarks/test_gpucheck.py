"""scripts/gpu-check.sh run --cpu end to end, at small sizes: the GPU check kit cannot rot."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from benchmarks.gpucheck.data import make_photos
from benchmarks.gpucheck.gputests import gpu_test_files
from tests.processes import REPO

FILES = {
    "report.md",
    "report.json",
    "pytest.txt",
    "throughput.png",
    "utilisation.png",
    "step_times.png",
}


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("gpucheck")
    data = ["--out", str(root / "data"), "--images", "64"]
    made = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpucheck", "make-data", *data],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    args = ["--data", str(root / "data"), "--size", "32", "--stored", "40", "--batch-size", "8"]
    args += ["--workers", "1", "--epochs", "2", "--train-epochs", "2"]
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(root / "out")}
    proc = subprocess.run(
        ["bash", "scripts/gpu-check.sh", "run", "--cpu", "--", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "out", proc.stdout


@pytest.mark.slow
def test_the_cpu_run_writes_its_report_files(cpu_run: tuple[Path, str]) -> None:
    out, stdout = cpu_run
    assert {p.name for p in out.iterdir()} == FILES  # at most 8 files come back from a GPU
    assert all(p.stat().st_size > 0 for p in out.iterdir())
    assert "gpu-check summary:" in stdout and "CUDA steps skipped (--cpu)" in stdout


@pytest.mark.slow
def test_the_cpu_run_reports_finite_positive_figures(cpu_run: tuple[Path, str]) -> None:
    report = json.loads((cpu_run[0] / "report.json").read_text())
    assert report["config"]["device"] == "cpu" and report["model"]["name"] == "tiny"
    assert report["build"]["runner"] == "sequential" and report["build"]["num_valid"] == 64
    assert _positive(report["build"]["samples_per_s"])
    for phase in ("alone", "trained"):
        ran = [s for s in report[phase] if s["status"] == "ok"]
        assert {s["name"] for s in ran} >= {"store-f32", "store-bf16", "workers"}
        for s in ran:
            assert _positive(s["samples_per_s"]) and _positive(s["cpu_s_per_sample"])
            assert s["util_source"] == "cpu_percent"  # no NVML figures invented
        others = [s for s in report[phase] if s["status"] != "ok"]
        assert all(s["name"] == "nvjpeg" and "torchvision" in s["reason"] for s in others)
    decode = report["decode"]
    assert decode["build"]["codec"] == "jpeg:90"
    assert 0 < decode["build"]["image_bytes_per_sample"] < decode["build"]["raw_bytes_per_sample"]
    runs = {s["name"]: s for s in decode["runs"]}
    assert list(runs) == ["decode-raw", "decode-device", "decode-cpu"]
    for name in ("decode-raw", "decode-cpu"):  # the JPEG store decoded on the reader threads
        assert runs[name]["status"] == "ok", runs[name]
        assert _positive(runs[name]["samples_per_s"]) and _positive(runs[name]["cpu_s_per_sample"])
    device = runs["decode-device"]
    assert device["status"] == "unavailable"
    assert device["reason"].startswith("jpeg_decoder='device': the loader's device is cpu")


@pytest.mark.slow
def test_the_cpu_run_says_the_cuda_steps_were_skipped(cpu_run: tuple[Path, str]) -> None:
    md = (cpu_run[0] / "report.md").read_text()
    assert "CUDA steps skipped (--cpu)" in md
    assert (
        "the JPEG store's device decode (nvImageCodec): its CPU decode and the raw store ran" in md
    )
    assert "| decode-device | unavailable: jpeg_decoder='device': the loader's device is cpu" in md
    assert "- decode-cpu / decode-raw: " in md and "x smaller than raw)" in md
    report = json.loads((cpu_run[0] / "report.json").read_text())
    tests = report["tests"]
    assert tests["counts"]["skipped"] > 0 and tests["counts"]["passed"] == 0
    assert set(tests["skipped"].values()) <= {"Skipped: needs a CUDA device", "Skipped: needs CUDA"}
    assert tests["cannot_run"] and all("DALI" in why for why in tests["cannot_run"].values())


def test_the_gpu_test_files_are_found_by_what_they_hold() -> None:
    files = {p.relative_to(REPO).as_posix() for p in gpu_test_files(REPO / "tests")}
    assert "tests/loaders/test_augment_gpu.py" in files  # a module-wide gpu marker
    assert "tests/loaders/test_augment_bands.py" in files  # the CUDA case of the shared device list
    assert "tests/benchmarks/test_gpucheck.py" not in files


def test_the_decode_feeds_read_their_stores_and_say_why_the_device_cannot_decode() -> None:
    from benchmarks.gpucheck.decode import decode_configs
    from benchmarks.harness.strategies import RunConfig, get_strategy

    cfg = RunConfig("data", "raw.zarr", 8, 1, 32, device="cpu")
    stores = {name: c.store for name, c in decode_configs(cfg, "jpeg.zarr")}
    assert stores == {
        "decode-raw": "raw.zarr",
        "decode-device": "jpeg.zarr",
        "decode-cpu": "jpeg.zarr",
    }
    why = get_strategy("decode-device").unavailable(cfg)
    assert why is not None and "not a CUDA device" in why
    assert get_strategy("decode-cpu").unavailable(cfg) is None  # simplejpeg is installed here


def test_the_photos_are_jpegs_in_class_folders(tmp_path: Path) -> None:
    size = make_photos(tmp_path, 10, classes=3)
    files = sorted(tmp_path.rglob("*.jpg"))
    assert len(files) == 10 and sum(f.stat().st_size for f in files) == size
    assert {f.parent.name for f in files} == {"circles", "crosses", "dots"}
    assert all(f.read_bytes()[:2] == b"\xff\xd8" for f in files)
    assert make_photos(tmp_path / "again", 10, classes=3) == size  # a pure function of the seed


def test_the_test_conftest_loads_without_the_object_server_packages() -> None:
    # the GPU machine has pytest but not moto: the shared conftest must not need it to load
    code = "import sys, tests.conftest; sys.exit('moto' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_a_pytest_that_runs_nothing_is_reported_with_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.gpucheck.gputests import run_gpu_tests
    from benchmarks.gpucheck.report import _tests_lines

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text("import a_package_this_machine_lacks\n")
    marker = "@pytest.mark." + "gpu"  # spelled apart: this file holds no gpu test itself
    (tmp_path / "tests" / "test_a.py").write_text(
        f"import pytest\n\n{marker}\ndef test_a():\n    pass\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    got = run_gpu_tests(tmp_path, tmp_path, timeout_s=120)
    assert got["counts"]["passed"] == 0 and got["exit_code"] not in (0, 5)
    assert "a_package_this_machine_lacks" in got["problem"]
    assert any("NOT RUN" in ln and "a_package_this_machine_lacks" in ln for ln in _tests_lines(got))


@pytest.mark.slow
@pytest.mark.parametrize("given", [False, True])
def test_prepare_takes_the_readme_venvs_python_unless_python_is_given(
    tmp_path: Path, given: bool
) -> None:
    # a checkout with the README's .venv (it has zarr) and a python3 on PATH without zarr
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "gpu-check.sh", tmp_path / "scripts")
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    venv.create(tmp_path / "bare", with_pip=False)  # a real Python with nothing installed
    env = {**os.environ, "PATH": f"{tmp_path / 'bare' / 'bin'}:{os.environ['PATH']}"}
    env["PIP_NO_INDEX"] = "1"  # pip download stops at once: no wheel is fetched
    env.pop("PYTHON", None)
    if given:
        env["PYTHON"] = str(tmp_path / "bare" / "bin" / "python3")
    proc = subprocess.run(
        ["bash", "scripts/gpu-check.sh", "prepare"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0  # no wheels without an index
    if given:  # the Python asked for, which lacks zarr: named by importlib
        assert "PackageNotFoundError" in proc.stderr, proc.stderr
    else:  # the venv's versions were read; pip was asked for them
        import zarr

        assert "PackageNotFoundError" not in proc.stderr, proc.stderr
        assert f"zarr=={zarr.__version__}" in proc.stderr, proc.stderr


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    """A real wheel of ``members`` with its METADATA, WHEEL and a RECORD of sha256 hashes."""
    import base64
    import hashlib

    info = "fake_codec-1.0.dist-info"
    members = {
        **members,
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: fake-codec\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    rows = []
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
    rows.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return path


def test_the_slim_wheel_keeps_one_pythons_module_and_the_jpeg_decoders(tmp_path: Path) -> None:
    from benchmarks.gpucheck.wheels import slim_wheel

    pkg = "nvidia/nvimgcodec"
    members = {
        "nvidia/__init__.py": b"",
        f"{pkg}/__init__.py": b"",
        f"{pkg}/libnvimgcodec.so.0": b"L" * 4000,
        **{
            f"{pkg}/nvimgcodec_impl.cpython-{v}-x86_64-linux-gnu.so": v.encode() * 3000
            for v in ("39", "311", "312", "313", "313t", "314t")
        },
        **{
            f"{pkg}/extensions/lib{e}_ext.so.0.9.0": e.encode() * 2000
            for e in ("jpeg_turbo", "nvjpeg", "nvjpeg2k", "nvtiff", "tiff", "opencv", "nvbmp")
        },
        f"{pkg}/include/nvimgcodec.h": b"/* header */",
    }
    wheel = _wheel(tmp_path / "fake_codec-1.0-py3-none-any.whl", members)
    before, after = slim_wheel(wheel, "3.12")
    assert before > after == wheel.stat().st_size
    with zipfile.ZipFile(wheel) as z:  # its RECORD names exactly what it holds
        record = z.read("fake_codec-1.0.dist-info/RECORD").decode().splitlines()
        assert {row.split(",")[0] for row in record} == set(z.namelist())
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
         str(site), str(wheel)], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # pip checks the rewritten RECORD's hashes
    got = sorted(p.relative_to(site / pkg).as_posix() for p in (site / pkg).rglob("*.so*"))
    assert got == [
        "extensions/libjpeg_turbo_ext.so.0.9.0",
        "extensions/libnvjpeg_ext.so.0.9.0",
        "libnvimgcodec.so.0",
        "nvimgcodec_impl.cpython-312-x86_64-linux-gnu.so",
    ]
    assert not (site / pkg / "include").exists()

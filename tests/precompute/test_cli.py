"""The precompute CLI: exit codes, one-line errors, build/inspect/verify on real stores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from precompute.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--size", "abc"], "'--size'"),
        (["--size", "0"], "size must be an integer"),
        (["--mode", "stretch"], "mode must be one of"),
        (["--on-error", "ignore"], "on_error must be one of"),
        (["--shard-samples", "10", "--chunk-samples", "4"], "multiple of"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    small_dataset: Path,
    tmp_path: Path,
    extra: list[str],
    needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _run(["build", str(small_dataset), "--out", str(tmp_path / "s"), *extra], capsys)
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_bad_paths_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["build", str(tmp_path / "nope"), "--out", str(tmp_path / "s")], capsys)
    assert code == 2 and "nope: source folder does not exist" in err
    assert len(err.strip().splitlines()) == 1
    (tmp_path / "spec.yaml").write_text("size: [1, 2\n")
    code, _, err = _run(
        [
            "build",
            str(tmp_path),
            "--out",
            str(tmp_path / "s"),
            "--spec",
            str(tmp_path / "spec.yaml"),
        ],
        capsys,
    )
    assert code == 2 and "cannot read spec file" in err
    code, _, err = _run(["inspect", str(tmp_path)], capsys)
    assert code == 1 and "not a Zarr v3 group" in err
    for command in ("inspect", "verify"):  # a typo in the path is named as such
        code, out, err = _run([command, str(tmp_path / "nope")], capsys)
        assert code == 1 and f"{tmp_path / 'nope'}: does not exist" in out + err
    code, _, err = _run(["build", str(tmp_path), "--out", str(tmp_path / "spec.yaml")], capsys)
    assert code == 2 and "must be a local folder" in err
    code, _, err = _run(["build", str(tmp_path), "--out", "ftp://bucket/store"], capsys)
    assert code == 2 and "must be a local path or an object-store URL (s3://" in err


def test_a_build_that_kept_no_input_exits_1_after_writing_its_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a/0.png", "a/1.png", "b/2.png"):  # every file empty: each one skipped
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_bytes(b"")
    out = tmp_path / "s"
    flags = ["--size", "8", "--runner", "sequential", "--on-error", "skip", "--quiet"]
    code, _, err = _run(["build", str(tmp_path / "src"), "--out", str(out), *flags], capsys)
    assert code == 1
    assert f"{out}: no input could be used: all 3 were skipped (precompute inspect" in err
    code, shown, _ = _run(["inspect", str(out)], capsys)  # the store is there, saying why
    assert code == 0 and "3 slots, 0 valid, 3 skipped" in shown and "a/0.png: empty file" in shown


@pytest.mark.parametrize("runner", ["sequential", "auto"])
def test_quiet_drops_only_the_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runner: str
) -> None:
    """A quiet build that skipped inputs says so: the summary and the notes print."""
    from PIL import Image

    for name in ("a/0.png", "a/1.png", "b/2.png", "b/3.png"):
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (12, 10), (3, 4, 5)).save(tmp_path / "src" / name)
    (tmp_path / "src" / "a" / "bad.png").write_bytes(b"not a png")
    (tmp_path / "src" / "c").mkdir()  # a class without a single input: a note
    out = tmp_path / "s"
    flags = ["--size", "8", "--runner", runner, "--on-error", "skip", "--quiet"]
    code, _, err = _run(["build", str(tmp_path / "src"), "--out", str(out), *flags], capsys)
    assert code == 0
    assert f"built {out}: 5 samples, 4 valid, 1 skipped" in err
    assert "note: 1 class (e.g. c): classes without a single input" in err
    assert "precompute build:" not in err and "shard/s" not in err  # no progress bar


def test_help_works_with_lazy_subcommands() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "precompute.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    for name in ("build", "inspect", "verify", "demo", "cache", "serve", "bench"):
        assert f"  {name}" in proc.stdout
    probe = "import sys, precompute, precompute.cli; print('ray' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"  # Ray is imported only by a build


@pytest.mark.ray
def test_build_spec_file_inspect_verify_and_flipped_byte(
    ray_local: None, small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "spec.yaml").write_text(
        "size: 16\nmode: letterbox\nshard_samples: 8\nchunk_samples: 4\n"
    )
    store = tmp_path / "s"
    src = "local://" + str(small_dataset)  # an fsspec URL source
    code, _, err = _run(
        ["build", src, "--out", str(store), "--spec", str(tmp_path / "spec.yaml"), "--seed", "5"],
        capsys,
    )
    assert code == 0 and "40 samples, 40 valid, 0 skipped" in err
    code, out, _ = _run(["inspect", str(store)], capsys)
    assert code == 0 and "status     complete" in out and "16x16x3 uint8, mode letterbox" in out
    code, out, _ = _run(["inspect", str(store), "--json"], capsys)
    assert code == 0 and '"seed": 5' in out
    code, out, _ = _run(["verify", str(store)], capsys)
    assert code == 0 and out.startswith("OK")
    shard_file = store / "image" / "c" / "2" / "0" / "0" / "0"
    data = bytearray(shard_file.read_bytes())
    data[len(data) // 3] ^= 0x04
    shard_file.write_bytes(bytes(data))
    code, _, err = _run(["verify", str(store)], capsys)
    assert code == 1 and "BAD shard 2: image" in err and "checksum" in err
    shard_file.unlink()
    code, _, err = _run(["verify", str(store)], capsys)
    assert code == 1 and "shard 2: image: shard file is missing" in err


@pytest.mark.ray
def test_demo(ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["demo", "--out", str(tmp_path), "--images", "24", "--size", "16"], capsys)
    assert code == 0 and "status     complete" in out and "24 slots, 24 valid" in out
    assert len(list((tmp_path / "images").rglob("*.*"))) == 24
    assert "loader     1 epoch on cpu: 24 samples, batches of (" in out  # streamed, augmented
    assert "3, 14, 14) torch.float32" in out
    code, out, _ = _run(["demo", "--out", str(tmp_path), "--images", "24", "--size", "16"], capsys)
    assert code == 0 and "24 slots" in out  # re-running reuses the images and the store


@pytest.mark.ray
def test_unreachable_ray_address_is_one_line_exit_1(small_dataset: Path, tmp_path: Path) -> None:
    # Ray's client tries a ray:// address 3 times, 5 + 10 + 15 s; its own settings (not ours)
    # make it 3 tries of no time at all: the error it then raises, and ours, are the same
    fast = {
        "RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S": "0",
        "RAY_CLIENT_MAX_CONNECTION_TIMEOUT_S": "0",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "precompute.cli",
            "build",
            str(small_dataset),
            "--out",
            str(tmp_path / "s"),
            "--size",
            "16",
            "--ray-address",
            "ray://nowhere.invalid:10001",
        ],
        env={**os.environ, **fast},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "cannot start or reach Ray at ray://nowhere.invalid:10001" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_lazy_subcommand_import_failure_only_disables_that_command() -> None:
    import click
    from click.testing import CliRunner

    from precompute.clilazy import LazyGroup

    @click.group(
        cls=LazyGroup,
        lazy_commands={"gone": ("no_such_module_xyz", "cmd", "A missing command.")},
    )
    def group() -> None:
        """Test group."""

    @group.command()
    def ok() -> None:
        click.echo("fine")

    runner = CliRunner()
    helped = runner.invoke(group, ["--help"])
    assert helped.exit_code == 0 and "A missing command." in helped.output
    assert runner.invoke(group, ["ok"]).output == "fine\n"
    broken = runner.invoke(group, ["gone", "--flag"])
    assert broken.exit_code == 1 and "cannot import no_such_module_xyz" in broken.output

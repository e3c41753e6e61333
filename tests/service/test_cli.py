"""The ``cache`` CLI group and ``python -m service`` as real commands."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from service import Cache
from service.cli import cache as cache_cli
from service.cli import human_bytes, parse_bytes
from tests.servers import free_port
from tests.service.helpers import SPEC, index_builder, make_source
from tests.service.serving import serve_process

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def filled(tmp_path: Path) -> tuple[Path, list[str]]:
    source = make_source(tmp_path / "src")
    ticks = itertools.count(1_700_000_000.0)  # each use of the cache one second after the last
    cache = Cache(tmp_path / "cache", builder=index_builder(), clock=lambda: next(ticks))
    keys = []
    for seed in (0, 1):
        cache.get_or_build(source, {**SPEC, "seed": seed})
        keys.append(cache.key_for(source, {**SPEC, "seed": seed}))
    return cache.root, keys


def _fields(out: str) -> dict[str, str]:
    """Return the ``name: value`` lines of ``cache info`` as a dict."""
    return dict(line.strip().split(": ", 1) for line in out.splitlines())


def _run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cache_cli, ["--root", str(root), *args])
    return result.exit_code, result.output


def test_ls_info_rm_gc(filled: tuple[Path, list[str]]) -> None:
    root, (k0, k1) = filled
    code, out = _run(root, "ls")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["KEY", "SIZE", "SAMPLES"]
    assert out.index(k1[:12]) < out.index(k0[:12]) and "2 stores" in out
    code, out = _run(root, "ls", "--json")
    assert [e["key"] for e in json.loads(out)] == [k1, k0]
    code, out = _run(root, "info", k0[:8], "--json")
    assert code == 0 and json.loads(out)["status"] == "ready" and json.loads(out)["key"] == k0
    code, out = _run(root, "info", k0[:8])
    info = _fields(out)
    assert code == 0 and (info["key"], info["status"]) == (k0, "ready")
    assert info["path"] == str(root / "stores" / k0) and info["num_samples"] == "12"
    assert float(info["last_access"]) == float(info["created"])  # published: its first use
    assert 1_700_000_000 < float(info["created"]) < 1_700_000_010  # on the cache's clock
    code, out = _run(root, "rm", k0[:6], "--json")
    assert code == 0 and json.loads(out)[0]["key"] == k0
    code, out = _run(root, "info", k0[:8])
    assert code == 1
    assert out == f"Error: no store matches key '{k0[:8]}' in {root} (give more hex digits)\n"
    code, out = _run(root, "gc", "--budget", "0", "--json")
    assert code == 0 and json.loads(out)["evicted"] == [k1]
    code, out = _run(root, "gc")
    assert code == 0 and "evicted 0 stores" in out


def test_cli_errors_are_one_line(filled: tuple[Path, list[str]]) -> None:
    root, (k0, k1) = filled
    for short in ("ab", k0[:3]):  # too short, whether or not a store's key starts so
        code, out = _run(root, "rm", short)
        assert code == 1 and out == f"Error: key {short!r} is too short: give >= 4 hex digits\n"
    assert {k0, k1} == {e.name for e in (root / "stores").iterdir()}  # nothing removed
    other = next(p for p in ("0000", "ffff") if not k0.startswith(p) and not k1.startswith(p))
    code, out = _run(root, "rm", other)
    assert (
        code == 1
        and out == f"Error: no store matches key '{other}' in {root} (give more hex digits)\n"
    )
    code, out = _run(root, "gc", "--budget", "lots")
    assert code == 2
    assert out.splitlines()[-1] == (
        "Error: Invalid value: not a byte size: 'lots' (e.g. 500M, 20GiB, 1048576)"
    )


def test_byte_units() -> None:
    assert parse_bytes("1024") == 1024 and parse_bytes("2GiB") == 2 * 2**30
    assert parse_bytes("1.5k") == 1500 and human_bytes(3 * 2**20) == "3.0 MiB"


def test_python_m_service_refuses_public_bind_without_token(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "service",
            "--root",
            str(tmp_path / "c"),
            "--source-root",
            str(tmp_path),
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 1 and "refusing to bind '0.0.0.0' without a token" in proc.stderr


def test_python_m_service_serves_with_token(tmp_path: Path) -> None:
    token, args = "t" * 24, ["--root", tmp_path / "c", "--source-root", tmp_path]
    with serve_process(tmp_path / "log", *args, "--log-level", "warning", token=token) as (_, url):
        r = httpx.get(f"{url}/healthz", headers={"Authorization": f"Bearer {token}"})
        assert r.json() == {"status": "ok"}
        assert httpx.get(f"{url}/stores").status_code == 401

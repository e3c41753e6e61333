"""A real Azure Blob server for the tests: Azurite (Microsoft's emulator) on 127.0.0.1.

Azurite is a Node package, installed under ``.azurite/`` by ``bash scripts/dev.sh test``
(``npm install --prefix .azurite azurite``). :func:`azurite_server` starts it in memory on a free
port and sets the client environment the usual way for the emulator (obstore reads
``AZURE_STORAGE_USE_EMULATOR``, ``AZURITE_BLOB_STORAGE_URL`` and the account's name and key), so
``az://container/key`` URLs reach it; Ray workers and subprocesses inherit it. The account key is
Azurite's published development key: still, nothing here prints it. :func:`create_container`
makes a container, which the store interface never does (one request signed with the shared key).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import http.client
import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["ACCOUNT", "azurite_server", "create_container"]

ACCOUNT = "devstoreaccount1"  # the emulator's one account, and its published development key:
_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_VERSION = "2021-08-06"
_LISTENS = re.compile(r"listens on (http://127\.0\.0\.1:\d+)")
_ROOT = Path(__file__).resolve().parent.parent


def _binary() -> str | None:
    local = _ROOT / ".azurite" / "node_modules" / ".bin" / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


def create_container(endpoint: str, name: str) -> None:
    """Create container ``name`` on the Azurite at ``endpoint`` (a Shared Key request)."""
    date = email.utils.formatdate(usegmt=True)
    headers = f"x-ms-date:{date}\nx-ms-version:{_VERSION}"
    resource = f"/{ACCOUNT}/{ACCOUNT}/{name}\nrestype:container"
    signed = "\n".join(["PUT", *[""] * 11, headers, resource]).encode()
    mac = hmac.new(base64.b64decode(_KEY), signed, hashlib.sha256).digest()
    where = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    auth = f"SharedKey {ACCOUNT}:{base64.b64encode(mac).decode()}"
    conn.request(
        "PUT",
        f"/{ACCOUNT}/{name}?restype=container",
        headers={"x-ms-date": date, "x-ms-version": _VERSION, "Authorization": auth},
    )
    answer = conn.getresponse()
    answer.read()
    conn.close()
    if answer.status != 201:
        raise OSError(f"Azurite: creating container {name} answered HTTP {answer.status}")


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Azurite's blob service on 127.0.0.1 (a free port, in memory); yields its endpoint.

    Fails, naming the install, where Azurite is missing (never skips).
    """
    binary = _binary()
    if binary is None:
        pytest.fail(
            "Azurite is not installed: run `bash scripts/dev.sh test`, or "
            "`npm install --prefix .azurite azurite` (Node 18+)",
            pytrace=False,
        )
    flags = ["--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence"]
    flags += ["--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"]
    folder = tmp_path_factory.mktemp("azurite")
    log = folder / "azurite.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [binary, *flags],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            preexec_fn=_die_with_parent,
        )
    try:
        endpoint = _listening(proc, log)
        env = {
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURITE_BLOB_STORAGE_URL": endpoint,
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": _KEY,
        }
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _die_with_parent() -> None:
    """In the child: SIGTERM when the test process dies, even by SIGKILL (Linux's prctl)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _listening(proc: subprocess.Popen[bytes], log: Path) -> str:
    """The endpoint Azurite says it listens on (its log read until it does, 60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        found = _LISTENS.search(log.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.1)
    tail = "; ".join(log.read_text(errors="replace").splitlines()[-5:])
    pytest.fail(f"Azurite did not start (exit code {proc.poll()}): {tail}", pytrace=False)

"""Shared fixtures: markers that skip on missing hardware, and small real datasets."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

import tests.workerexit  # its exit handler runs after every one registered later
from tests.azurite import azurite_server  # noqa: F401  (a fixture: Azure Blob on Azurite)
from tests.xdistscope import pytest_xdist_make_scheduler  # noqa: F401  (one unit a module)

if TYPE_CHECKING:  # moto, a dev dependency, loads only where a test asks for the S3 server
    from tests.storeclock import StoreClock


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests without CUDA and `dali` tests without DALI, saying why."""
    import torch  # here, not at the top: xdist's controller process never collects

    no_gpu = pytest.mark.skip(reason="needs a CUDA device")
    no_dali = pytest.mark.skip(reason="needs nvidia-dali (pip install -e .[dali])")
    has_dali = importlib.util.find_spec("nvidia.dali") is not None
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_gpu)
        if "dali" in item.keywords and not has_dali:
            item.add_marker(no_dali)
    # the session's Ray must inherit the object servers' AWS_* and AZURE_* settings, as a
    # user's Ray workers inherit theirs: a server any test uses starts before Ray does
    config.stash[_SERVERS] = [
        name for name in _OBJECT_SERVERS if any(name in item.fixturenames for item in items)
    ]


class _SlowModulesFirst:
    """Runs the modules that hold a ``slow`` test first (each module's tests in their order):
    under xdist the longest tests start first instead of holding one worker at the end."""

    @pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture parameters
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        slow = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in slow)  # stable


def pytest_configure(config: pytest.Config) -> None:
    tests.workerexit.pytest_configure(config)
    config.pluginmanager.register(_SlowModulesFirst(), "nostall-slow-modules-first")


_OBJECT_SERVERS = ("s3_server", "azurite_server")
_SERVERS = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3-compatible server (moto's server mode) on 127.0.0.1, over real HTTP.

    The AWS SDK finds it the usual way: ``AWS_ENDPOINT_URL`` and test credentials in the
    environment (also inherited by Ray workers and subprocesses). Yields the endpoint URL.
    """
    import logging

    from tests.s3wire import WiredMotoServer  # moto[server], a dev dependency, with test hooks

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = WiredMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "nostall-test-key",
        "AWS_SECRET_ACCESS_KEY": "nostall-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        mp.delenv("AWS_PROFILE", raising=False)
        yield endpoint
    server.stop()


@pytest.fixture
def store_clock(s3_server: str) -> Iterator[StoreClock]:
    """The object store's clock as this process sees it; ``advance(s)`` ages every object
    written so far by ``s`` seconds at once (:mod:`tests.storeclock`), instead of a sleep."""
    from tests.storeclock import StoreClock

    clock = StoreClock()
    yield clock
    clock.close()


@pytest.fixture(scope="session")
def ray_local(request: pytest.FixtureRequest):
    """One local Ray for the whole test session (2 CPUs, no dashboard), shut down at the end.

    Started by ``precompute.runtime.raylocal``, so it dies with the test process even when that is
    killed (a timeout): no Ray process outlives the session.
    """
    import ray

    from precompute.runtime.raylocal import start_local_ray

    for server in request.config.stash.get(_SERVERS, []):
        request.getfixturevalue(server)

    local = None if ray.is_initialized() else start_local_ray(num_cpus=2)
    yield ray
    if local is not None:
        local.stop()


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory):
    """Headless Chromium (Debian's, driven by selenium: :mod:`tests.browser`) with a fresh
    profile; a run without it fails here, naming what to install, instead of skipping."""
    from tests.browser import chromium, missing_browser

    if (why := missing_browser()) is not None:
        pytest.fail(why, pytrace=False)
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


@pytest.fixture()
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """A list the test adds its processes to; those still running are killed afterwards."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:  # only the processes this test started
        if proc.poll() is None:
            proc.kill()
        proc.communicate()

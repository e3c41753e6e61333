"""The suite's xdist scheduler: one work unit per test module (``--dist loadscope``).

Kept out of ``tests/conftest.py`` so that a pytest run that only needs the scheduler (the check
in ``tests/foundation/test_markers.py``) imports no torch.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["pytest_xdist_make_scheduler"]


# Modules whose tests are independent and each long (a fresh build process killed and resumed):
# under xdist each of their tests is its own work unit, so they spread over the workers.
_SPREAD_MODULES = frozenset({"tests/precompute/test_resume.py"})


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: none without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope``: one work unit per test module (except :data:`_SPREAD_MODULES`).

    A module-scoped fixture (a Ray cluster, a benchmark run) is then made once, on one worker.
    xdist's own ``loadgroup`` cannot do it beside pytest 9: the group it writes into a test's
    node id no longer takes effect (pytest-dev/pytest-xdist#1386), so every worker that ran one
    of a module's tests made the module's fixtures again.
    """
    if config.getvalue("dist") != "loadscope":
        return None  # xdist's own scheduler for the mode asked for
    from xdist.scheduler import LoadScopeScheduling

    # in collection order (the modules with slow tests first: _SlowModulesFirst), not xdist's
    # default of the modules with the most tests first, which left the slow ones for the end
    config.option.loadscopereorder = False

    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in _SPREAD_MODULES else module

    return ByModule(config, log)

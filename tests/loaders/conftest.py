"""Fixtures of the loader tests."""

from __future__ import annotations

import pytest

from precompute.policy import Policy


@pytest.fixture()
def built_policies(monkeypatch: pytest.MonkeyPatch) -> list[Policy]:
    """Every box-sampler :class:`Policy` built during the test (the real constructor runs)."""
    built: list[Policy] = []
    init = Policy.__post_init__

    def counted(self: Policy) -> None:
        built.append(self)
        init(self)

    monkeypatch.setattr(Policy, "__post_init__", counted)
    return built

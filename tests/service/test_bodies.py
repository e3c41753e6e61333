"""Property tests of the service's request bodies: any input is a value or our own error.

The parsers (``service.http.bodies``, ``service.cache.keys.parse_spec``, ``SourcePolicy.check``) are
called directly with arbitrary JSON and bytes, then the same bodies go over real HTTP to a
real server, where every answer must be a 2xx/4xx, never a 500.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precompute.errors import PrecomputeError
from precompute.spec import AugmentPolicy, BuildSpec
from service import BuildRequest, Cache
from service.errors import ServiceError, SourceNotAllowedError
from service.http.app import create_app
from service.http.bodies import MAX_BODY_BYTES, parse_build_body, parse_json
from service.http.paths import SourcePolicy
from tests.service.helpers import make_source
from tests.service.server_util import serving

OURS = (ServiceError, PrecomputeError)
FIXTURES = [HealthCheck.function_scoped_fixture]  # module-scoped: shared by examples on purpose

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
spec_fields = [f.name for f in dataclasses.fields(BuildSpec) if f.name != "extra"]
augment_fields = [f.name for f in dataclasses.fields(AugmentPolicy)]
# Dicts whose keys are (mostly) real field names, so parsing gets past the key checks.
augments = st.dictionaries(st.sampled_from(augment_fields), json_values, max_size=5)
specs = st.dictionaries(
    st.sampled_from(spec_fields) | st.text(max_size=6), json_values | augments, max_size=6
)
sources = st.text(max_size=40) | st.sampled_from(["ds", "/", ".", "ds/..", "a\0b", "s3://x/y"])
bodies = (
    json_values
    | st.fixed_dictionaries({"source": sources | json_values, "spec": specs | json_values})
    | st.fixed_dictionaries({"source": sources}, optional={"spec": specs, "x": json_values})
)


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_build_body_parses_or_raises_our_error(body: Any) -> None:
    try:
        source, spec = parse_build_body(body)
    except OURS as exc:
        assert str(exc)  # a message naming the problem
        return
    assert isinstance(spec, BuildSpec) and source is body["source"]
    assert BuildSpec.from_dict(json.loads(spec.canonical_json())) == spec


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | bodies.filter(_json_safe).map(lambda v: json.dumps(v).encode()))
def test_raw_body_parses_or_raises_our_error(raw: bytes) -> None:
    try:
        value = parse_json(raw)
    except ServiceError as exc:
        assert "JSON" in str(exc)
        return
    with contextlib.suppress(*OURS):
        parse_build_body(value)


def test_too_big_body_is_refused() -> None:
    with pytest.raises(ServiceError, match=f"at most {MAX_BODY_BYTES} bytes"):
        parse_json(b" " * (MAX_BODY_BYTES + 1))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bodies") / "data"
    make_source(root / "ds")
    return root


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURES)
@given(sources | json_values)
def test_source_policy_checks_or_raises_our_error(data_root: Path, raw: object) -> None:
    try:
        path = SourcePolicy([data_root]).check(raw)
    except SourceNotAllowedError as exc:
        assert str(exc)
        return
    assert path.is_relative_to(data_root.resolve())


@pytest.fixture(scope="module")
def url(data_root: Path) -> Iterator[str]:
    def nothing(request: BuildRequest) -> None:  # leaves no store: the build fails cleanly
        return None

    cache = Cache(data_root.parent / "cache", builder=nothing)
    with serving(create_app(cache, SourcePolicy([data_root]), max_pending=10_000)) as base:
        yield base


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[httpx.Client]:
    """One client for every example (a new one costs about 17 ms of CPU: its SSL context)."""
    with httpx.Client(base_url=url, timeout=30) as c:
        yield c


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(st.binary(max_size=100) | bodies.filter(_json_safe).map(lambda v: json.dumps(v).encode()))
def test_any_body_over_http_is_answered_without_a_500(client: httpx.Client, raw: bytes) -> None:
    r = client.post("/stores", content=raw)
    assert r.status_code in (200, 202, 400), r.text
    if r.status_code == 400:
        assert r.json()["error"]


def test_nan_is_not_a_spec_value() -> None:
    with pytest.raises(PrecomputeError):
        parse_build_body({"source": "ds", "spec": {"size": math.nan}})

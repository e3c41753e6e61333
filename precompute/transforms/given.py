"""A transform given to a build: set in its spec, and its tasks' ``runtime_env`` on Ray.

:func:`with_transform` is ``build(..., transform=fn)``'s: the spec's ``transform`` set from a
function, its name or a :class:`~precompute.transforms.spec.TransformSpec`. :func:`job_env` is
the ``runtime_env`` a joined Ray's job gets, :func:`check_nodes` what the build asks once Ray
is open (:mod:`precompute.transforms.onray`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from precompute.errors import SpecError
from precompute.spec import BuildSpec
from precompute.transforms.spec import TransformSpec

__all__ = ["check_nodes", "job_env", "with_transform"]


def with_transform(
    spec: BuildSpec,
    transform: Callable[..., Any] | str | TransformSpec | None,
    args: Mapping[str, Any] | None = None,
    at: str | None = None,
) -> BuildSpec:
    """``spec`` with ``build()``'s ``transform`` (unchanged without one).

    Raises:
        SpecError: The transform cannot be named or imported; ``args`` or ``at`` without a
            transform; a spec that holds another transform already.
    """
    if transform is None:
        if args is not None or at is not None:
            raise SpecError("transform_args and transform_at need a transform")
        return spec
    given = TransformSpec.of(transform, args, at)
    if spec.transform is not None and spec.transform.name != given.name:
        raise SpecError(
            f"the spec holds transform {spec.transform.name}; build(transform=...) gives "
            f"{given.name}: give one"
        )
    return dataclasses.replace(spec, transform=given)


def job_env(transform: TransformSpec | None) -> dict[str, Any] | None:
    """The ``runtime_env`` a joined Ray's job gets for ``transform`` (None: none needed)."""
    if transform is None:
        return None
    from precompute.transforms import onray

    return onray.job_env(transform)


def check_nodes(transform: TransformSpec | None, ray: Any) -> None:
    """Check every node of the build's Ray session ``ray`` imports ``transform`` (Ray only).

    Raises:
        ClusterError: A node cannot import it, or imports other code
            (:func:`precompute.transforms.onray.check_nodes`).
    """
    if ray is None or transform is None:
        return
    from precompute.transforms import onray

    onray.check_nodes(transform, ray.runtime_env, own_local=ray.local is not None)

"""A transform given to a build: set in its spec, and its tasks' ``runtime_env`` on Ray.

:func:`with_transform` is ``build(..., transform=fn)``'s: the spec's ``transform`` set from a
function, its name or a :class:`~precompute.transforms.spec.TransformSpec`. :func:`task_env`
is what the build asks once Ray is open: the ``runtime_env`` of its shard tasks
(:mod:`precompute.transforms.onray`, which imports Ray, is imported only then).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from precompute.errors import SpecError
from precompute.spec import BuildSpec
from precompute.transforms.spec import TransformSpec

__all__ = ["task_env", "with_transform"]


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


def task_env(transform: TransformSpec | None, ray: Any) -> dict[str, Any] | None:
    """The shard tasks' ``runtime_env`` for ``transform`` on the build's Ray session ``ray``.

    None without a transform or without Ray (in process). Every node is checked first
    (:func:`precompute.transforms.onray.task_env`).

    Raises:
        ClusterError: A node cannot import the transform, or imports other code.
    """
    if ray is None or transform is None:
        return None
    from precompute.transforms import onray

    return onray.task_env(transform, own_local=ray.local is not None)

"""A transform on a Ray build: its code brought to the workers, checked on every node first.

A shard task imports the transform by name (:func:`precompute.transforms.apply.loaded`), so
every node must import the same code. Where the build joins a running Ray (a cluster,
``--ray-address``, ``RAY_ADDRESS``, a ``ray start`` Ray of this machine), the user's own
modules the transform reaches (:func:`precompute.transforms.fingerprint.user_roots`: their
top-level packages or files) are the job's ``runtime_env`` ``{"py_modules": [...]}``
(:func:`job_env`, given to ``ray.init``, which packs and uploads them once; each node unpacks
them once). The build's own local Ray needs none: its workers see what the driver sees
(``PYTHONPATH``, and Ray puts the driver's working and script folders on their path). A Ray
initialised in the process before the build keeps the ``runtime_env`` it was given.

Before any shard runs, :func:`check_nodes` runs one tiny task pinned to each alive node that
imports the transform and compares its fingerprint with the driver's; a node that cannot, or
imports other code, fails the build naming the node, what it said and what was shipped
(``docs/scale.md``, "Transforms"). Imports Ray.
"""

from __future__ import annotations

from typing import Any

from precompute.errors import ClusterError, PrecomputeError
from precompute.transforms.fingerprint import user_roots
from precompute.transforms.spec import TransformSpec

__all__ = ["check_here", "check_nodes", "job_env"]

_PROBE_TIMEOUT_S = 300.0  # a node's first task of the job unpacks its runtime_env first


def job_env(spec: TransformSpec | None) -> dict[str, Any] | None:
    """The ``runtime_env`` of a joined Ray's job for ``spec`` (None: nothing to ship)."""
    roots = [] if spec is None else user_roots(spec.name)
    return {"py_modules": roots} if roots else None


def check_here(data: dict[str, Any]) -> str | None:
    """On a worker: None if the transform imports here as the same code, else why not."""
    from precompute.transforms.apply import loaded

    try:
        loaded(TransformSpec.from_dict(data))
    except PrecomputeError as exc:
        return str(exc)
    return None


def _probe(spec: TransformSpec) -> list[tuple[str, str]]:
    """``(node, why)`` of every alive node where :func:`check_here` fails."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    probe = ray.remote(num_cpus=0, max_retries=0)(check_here)
    refs = {
        f"{n['NodeManagerAddress']} (node {n['NodeID'][:8]})": probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(spec.to_dict())
        for n in nodes
    }
    failed = []
    for where, ref in refs.items():
        try:
            why = ray.get(ref, timeout=_PROBE_TIMEOUT_S)
        except Exception as exc:  # the runtime_env could not be set up, or the node died
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
        if why is not None:
            failed.append((where, why))
    return failed


def check_nodes(spec: TransformSpec, env: dict[str, Any] | None, own_local: bool) -> None:
    """Check that every alive node imports ``spec``'s transform as the driver's code.

    Args:
        spec: The build's transform.
        env: The ``runtime_env`` the build gave the job it joined (None: none).
        own_local: The Ray is the build's own, on this machine.

    Raises:
        ClusterError: A node cannot import the transform, or imports other code.
    """
    failed = _probe(spec)
    if not failed:
        return
    where, why = failed[0]
    if env is not None:
        how = f"shipped as runtime_env py_modules {env['py_modules']}"
    elif own_local:
        how = "the build's own Ray: its workers have the driver's PYTHONPATH and folder"
    else:
        how = (
            "nothing shipped: an installed package must be installed on every node, and a "
            "Ray initialised before the build needs ray.init(runtime_env={'py_modules': [...]})"
        )
    raise ClusterError(
        f"Ray node {where} cannot run transform {spec.name} ({how}): {why}; "
        f"{len(failed)} node(s) failed (docs/scale.md, 'Transforms')"
    )

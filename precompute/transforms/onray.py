"""A transform on a Ray build: its code brought to the workers, checked on every node first.

A shard task imports the transform by name (:func:`precompute.transforms.apply.loaded`), so
every node must be able to import the same code. Before any shard runs, :func:`task_env`
runs one tiny task pinned to each alive node that imports the transform and compares its
fingerprint with the driver's:

* the build's own local Ray: its workers see what the driver sees (``PYTHONPATH``, and Ray
  puts the driver's working folder and script folder on their path), so the check runs on
  them as they are, and the tasks get no ``runtime_env`` unless that check fails;
* a joined Ray (a cluster, ``--ray-address``, ``RAY_ADDRESS``, a Ray initialised in the
  process): the user's own modules the transform reaches
  (:func:`precompute.transforms.fingerprint.user_roots`: their top-level packages or files)
  are shipped to the workers as the tasks' ``runtime_env`` ``{"py_modules": [...]}`` (Ray
  packs them once, each node unpacks them once), then checked with it.

A node that cannot import it, or imports other code, fails the build naming the node, what it
said and how to bring the code there (``docs/scale.md``). Imports Ray.
"""

from __future__ import annotations

from typing import Any

from precompute.errors import ClusterError, PrecomputeError
from precompute.transforms.fingerprint import user_roots
from precompute.transforms.spec import TransformSpec

__all__ = ["check_here", "task_env"]

_PROBE_TIMEOUT_S = 300.0  # a node's first task with a runtime_env unpacks it first


def check_here(data: dict[str, Any]) -> str | None:
    """On a worker: None if the transform imports here as the same code, else why not."""
    from precompute.transforms.apply import loaded

    try:
        loaded(TransformSpec.from_dict(data))
    except PrecomputeError as exc:
        return str(exc)
    return None


def _probe(spec: TransformSpec, env: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(node, why)`` of every alive node where :func:`check_here` fails."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    probe = ray.remote(num_cpus=0, max_retries=0)(check_here)
    options: dict[str, Any] = {} if env is None else {"runtime_env": env}
    refs = {
        f"{n['NodeManagerAddress']} (node {n['NodeID'][:8]})": probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            **options,
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


def task_env(spec: TransformSpec, own_local: bool) -> dict[str, Any] | None:
    """The ``runtime_env`` of the build's tasks (None: none needed), every node checked.

    Args:
        spec: The build's transform.
        own_local: The Ray is the build's own, on this machine.

    Raises:
        ClusterError: A node cannot import the transform, or imports other code.
    """
    if own_local and not _probe(spec, None):
        return None
    roots = user_roots(spec.name)
    env = {"py_modules": roots} if roots else None
    failed = _probe(spec, env)
    if failed:
        where, why = failed[0]
        shipped = (
            f"shipped as runtime_env py_modules {roots}"
            if roots
            else "its package is installed here, so it must be installed on every node too"
        )
        raise ClusterError(
            f"Ray node {where} cannot run transform {spec.name} ({shipped}): {why}; "
            f"{len(failed)} of the nodes failed (docs/scale.md, 'Transforms')"
        )
    return env

"""A build on a Ray cluster: what every node must see, checked before any shard is scheduled.

With ``--ray-address`` the shard tasks run on every node of the cluster and each one writes its
shard straight into ``--out`` and reads its inputs from ``SRC``. Both must therefore be paths
every node sees (a shared filesystem mounted at the same path; an fsspec URL for ``SRC``).
:func:`check_shared_paths` runs one tiny task pinned to each alive node and fails the build
naming the node and the path it cannot see, instead of failing shard by shard later.

Imports Ray (like :mod:`precompute.job`, which calls it once Ray is connected).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from precompute.errors import ClusterError

__all__ = ["check_shared_paths", "current_node"]

# A node that does not answer the probe within this many seconds fails the check.
_PROBE_TIMEOUT_S = 120.0


def _missing(paths: Sequence[str]) -> list[str]:
    return [p for p in paths if not os.path.exists(p)]


def current_node() -> str:
    """Return the id of the Ray node this code runs on (in a task), or ``"local"``."""
    import ray

    if not ray.is_initialized():
        return "local"
    return str(ray.get_runtime_context().get_node_id())


def check_shared_paths(paths: Sequence[str]) -> int:
    """Check that every alive Ray node sees every local path in ``paths``; return the nodes.

    URLs (``scheme://...``) are skipped: each node reaches them on its own.

    Raises:
        ClusterError: A node does not see a path (names the node's address and the path), or a
            node did not answer.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    local = [p for p in paths if "://" not in p]
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    probe = ray.remote(num_cpus=0, max_retries=0)(_missing)
    refs = {
        n["NodeManagerAddress"] + " (node " + n["NodeID"][:8] + ")": probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(local)
        for n in nodes
    }
    for where, ref in refs.items():
        try:
            missing = ray.get(ref, timeout=_PROBE_TIMEOUT_S)
        except Exception as exc:  # the node died or hung: the build cannot rely on it
            raise ClusterError(
                f"Ray node {where} did not answer the shared-path check ({type(exc).__name__})"
            ) from exc
        if missing:
            raise ClusterError(
                f"Ray node {where} cannot see {missing[0]}: with --ray-address, --out and a "
                "local SRC must be on storage every node mounts at the same path"
            )
    return len(nodes)

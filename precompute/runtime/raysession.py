"""Which Ray a build runs on: its own local Ray, or one that is running already.

:func:`open_ray` decides and connects; :meth:`RaySession.close` undoes exactly what it did.
The rules, in order (``docs/scale.md``, "Which Ray a build uses"):

1. Ray is initialised in this process already: it is used and left as it is.
2. ``--ray-address local``: a Ray of the build's own, whatever else is set or running.
3. ``--ray-address ADDR`` (or ``auto``), else the environment variable ``RAY_ADDRESS`` (as
   ``ray.init()`` reads it; ``ray job submit`` sets it for its entrypoint): that Ray is joined,
   and every node is probed for the shared paths (:mod:`precompute.runtime.cluster`).
4. Neither: a Ray started with ``ray start`` on this machine (the address it records in Ray's
   temporary folder, its GCS port open) is joined if it is one node (this machine's) with the CPUs
   a build's own Ray would get; otherwise, or if there is none, the build starts its own
   (:func:`precompute.runtime.raylocal.start_local_ray`) and stops it afterwards. The choice is
   logged (logger ``precompute.runtime.raysession``), never made silently.

Before ``ray.init`` (which retries a silent GCS for minutes) an address is asked for the
answer every GCS gives at once (:func:`precompute.runtime.gcsprobe.check_gcs`): a named one that
gives none within :data:`JOIN_PROBE_S` is a :class:`ClusterError`, a recorded one that gives
none within :data:`~precompute.runtime.gcsprobe.PROBE_S` is not joined. Both budgets are kept
by the clock given to :func:`open_ray` (``time.monotonic`` by default).

A joined Ray is only disconnected from (``ray.shutdown()`` in this process): it keeps running,
unchanged, for the next build.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any

from precompute.errors import ClusterError
from precompute.runtime.gcsprobe import PROBE_S, Clock, check_gcs
from precompute.runtime.raylocal import LocalRay, available_cpus, init_options, start_local_ray

__all__ = ["RaySession", "open_ray", "running_local_address"]

log = logging.getLogger("precompute.runtime.raysession")

LOCAL = "local"
JOIN_PROBE_S = 5.0  # a named Ray may be across a network; one on this machine gets PROBE_S
# Errors ray.init raises for an address it cannot reach or use.
_CONNECT_ERRORS = (ConnectionError, RuntimeError, ValueError, TimeoutError)


@dataclasses.dataclass
class RaySession:
    """The Ray a build uses and how it got it.

    Attributes:
        address: The joined Ray's address (recorded in the build report), or None for a local
            Ray (the build's own, or one this process had initialised).
        probe: Whether the build checks that every node sees its paths (a joined cluster).
        local: The build's own Ray, stopped by :meth:`close`.
        joined: Whether this session connected to a running Ray (disconnected by :meth:`close`).
        runtime_env: The job's ``runtime_env`` this session gave ``ray.init`` (None: none).
    """

    address: str | None = None
    probe: bool = False
    local: LocalRay | None = None
    joined: bool = False
    runtime_env: dict[str, Any] | None = None

    def close(self) -> None:
        """Stop the build's own Ray, or disconnect from a joined one (which keeps running)."""
        import ray

        if self.local is not None:
            self.local.stop()
        elif self.joined:
            ray.shutdown()


def open_ray(
    option: str | None,
    clock: Clock = time.monotonic,
    runtime_env: dict[str, Any] | None = None,
) -> RaySession:
    """Connect this process to the Ray a build with ``--ray-address option`` uses.

    Args:
        option: ``--ray-address``: ``local``, ``auto``, an address, or None.
        clock: The clock the GCS probes keep their budgets by.
        runtime_env: The job's ``runtime_env`` where a running Ray is joined (a transform's
            modules: ``py_modules``, uploaded by ``ray.init``); the build's own local Ray,
            whose workers see what this process sees, and a Ray initialised in the process
            before do not take it.

    Raises:
        ClusterError: The named Ray (``option`` or ``RAY_ADDRESS``) cannot be reached or
            gives no gRPC answer, a local Ray cannot be started, or a ``ray start`` Ray found
            on this machine fails while it is joined; the message names the address and where
            it came from.
    """
    import ray

    if ray.is_initialized():
        named = None if option == LOCAL else option
        return RaySession(address=named, probe=named is not None)
    env = os.environ.get("RAY_ADDRESS") or None
    if option == LOCAL or (option is None and env == LOCAL):
        return RaySession(local=start_local_ray())
    if option is not None:
        return _join(option, f"--ray-address {option}", clock, runtime_env)
    if env is not None:
        return _join(env, f"RAY_ADDRESS={env}", clock, runtime_env)
    found = running_local_address(clock)
    session = _join_local(found, clock, runtime_env) if found is not None else None
    return session or RaySession(local=start_local_ray())


def _job(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """``ray.init``'s options of a joined Ray: :func:`init_options`, the job's runtime_env."""
    return {**init_options(), **({} if runtime_env is None else {"runtime_env": runtime_env})}


def _join(
    address: str,
    origin: str,
    clock: Clock = time.monotonic,
    runtime_env: dict[str, Any] | None = None,
) -> RaySession:
    """Join the Ray at ``address`` (``origin``: the option or variable that named it)."""
    import ray

    try:
        check_gcs(_target(address), JOIN_PROBE_S, clock=clock)
        ray.init(address=address, **_job(runtime_env))
    except _CONNECT_ERRORS as exc:
        raise ClusterError(f"cannot start or reach Ray at {address} ({origin}): {exc}") from exc
    return RaySession(address=address, probe=True, joined=True, runtime_env=runtime_env)


def running_local_address(clock: Clock = time.monotonic) -> str | None:
    """The address ``ray start`` recorded on this machine, if its GCS port accepts connections.

    Ray records it in ``ray_current_cluster`` in its temporary folder (``$RAY_TMPDIR/ray``, else
    ``$TMPDIR/ray`` or ``/tmp/ray``) and removes it on ``ray stop``; a file left by a Ray that
    died is recognised by its closed port, without waiting on a connection.

    Args:
        clock: The clock the probe of the port keeps its budget by.
    """
    address = _recorded()
    try:
        check_gcs(address, JOIN_PROBE_S, handshake=False, clock=clock)
    except ConnectionError:  # nothing listening: a Ray that died
        return None
    return address or None


def _target(address: str) -> str:
    """What ``ray.init(address)`` connects to: for ``auto``, ``RAY_ADDRESS``, else the file's."""
    if address != "auto":
        return address
    env = os.environ.get("RAY_ADDRESS")
    return env if env and env != "auto" else _recorded()


def _recorded() -> str:
    """The address in :func:`_address_file` ("" if there is none, or it cannot be read)."""
    try:
        return _address_file().read_text(encoding="utf-8").strip()
    except (OSError, ValueError):  # no file, unreadable, not UTF-8
        return ""


def _address_file() -> Path:
    """Where ``ray start`` records its address (Ray's own rule for its temporary folder)."""
    tmp = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return Path(tmp) / "ray" / "ray_current_cluster"


def _join_local(
    address: str, clock: Clock = time.monotonic, runtime_env: dict[str, Any] | None = None
) -> RaySession | None:
    """Join the ``ray start`` Ray at ``address`` if its GCS answers and it is a local build's size.

    Raises:
        ClusterError: Ray failed otherwise than by refusing the connection, or the joined
            Ray did not answer for its nodes (a GCS that went away); the message names
            ``address``.
    """
    import ray

    try:
        check_gcs(
            address, PROBE_S, clock=clock
        )  # what accepts and says nothing would hold ray.init
    except ConnectionError as exc:
        log.info(
            "not joining the local Ray at %s (found in %s): %s; starting a local Ray",
            address,
            _address_file(),
            exc,
        )
        return None
    try:
        # "auto", not the address: Ray then also takes up the token that `ray start` uses
        # when token authentication is on (an explicit address never does, in Ray 2.60)
        ray.init(address="auto", **_job(runtime_env))
    except _CONNECT_ERRORS as exc:
        _disconnect(ray)  # a half-made connection would be reused by the next open_ray
        log.info("not joining the local Ray at %s (%s): starting a local Ray", address, exc)
        return None
    except Exception as exc:  # grpc and Ray's own errors: Ray documents no narrower type
        _disconnect(ray)
        raise _local_error(address, "cannot join", exc) from exc
    try:
        why = _unrelated(ray.nodes(), available_cpus())  # type: ignore[no-untyped-call]
        joined = ray.get_runtime_context().gcs_address
    except Exception as exc:  # as above: whatever a GCS that stops answering raises
        ray.shutdown()
        raise _local_error(address, "joined, but cannot list the nodes of", exc) from exc
    if joined != address:  # `ray start` ran again meanwhile
        why = f"Ray joined {joined} instead"
    if why is not None:
        ray.shutdown()
        log.info(
            "not joining the local Ray at %s: %s; starting a local Ray (--ray-address auto "
            "joins it)",
            address,
            why,
        )
        return None
    log.info("joined the local Ray at %s (--ray-address local starts a separate one)", address)
    return RaySession(address=address, joined=True, runtime_env=runtime_env)


def _disconnect(ray: Any) -> None:
    """Undo a ``ray.init`` that failed part-way (the process may open Ray again: the service)."""
    if ray.is_initialized():
        ray.shutdown()


def _local_error(address: str, what: str, exc: Exception) -> ClusterError:
    """The error of a failed join of the ``ray start`` Ray at ``address``, naming both."""
    return ClusterError(
        f"{what} the local Ray at {address} (found in {_address_file()}): "
        f"{type(exc).__name__}: {exc}; stop it (ray stop) or give --ray-address local"
    )


def _unrelated(nodes: list[dict[str, Any]], cpus: int) -> str | None:
    """Why a running Ray is not one a local build would start (None if it is)."""
    alive = [n for n in nodes if n.get("Alive")]
    if len(alive) != 1:
        return f"it has {len(alive)} nodes"
    have = alive[0].get("Resources", {}).get("CPU", 0)
    if have != cpus:
        return f"it has {have:g} CPUs, a local build uses {cpus}"
    return None

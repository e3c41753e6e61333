"""service.coord: coordination of the processes sharing a cache (locks, claims, leases).

:mod:`~service.coord.lease` (what every reader's lease shares, the local ``flock`` lease),
:mod:`~service.coord.objholder` (holders of claim and lease objects: heartbeats, liveness by the
object store's clock, fenced writes), :mod:`~service.coord.objclaim` (conditional-PUT claims and
their takeover), :mod:`~service.coord.objlease` (lease objects).
"""

"""service.http: the cache's HTTP API and its status page.

:mod:`~service.http.paths` (which sources a client may ask for), :mod:`~service.http.bodies`
(request bodies), :mod:`~service.http.jobs` (the build queue), :mod:`~service.http.app` (the
FastAPI app), :mod:`~service.http.server` (uvicorn), :mod:`service.http.web` (``GET /``).
"""

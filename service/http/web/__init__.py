"""service.http.web: the cache's HTML status page (``GET /`` of the HTTP API).

``page.py`` turns what the JSON API returns into a :class:`StatusView` and renders it with the
Jinja2 template ``templates/status.html`` (autoescaped); ``units.py`` formats bytes and ages
for it and for the CLI.
"""

from service.http.web.page import REFRESH_S, StatusView, render_status, spec_summary
from service.http.web.units import ago, human_bytes

__all__ = ["REFRESH_S", "StatusView", "ago", "human_bytes", "render_status", "spec_summary"]

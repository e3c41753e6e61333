"""The cache's HTML status page (``GET /``), read in a real headless Chromium.

A real server on 127.0.0.1 builds real stores (one of them held half way, so its progress shows),
answers a hit and misses, and the page must show what the JSON API says: each store's source,
size and samples, the build's shard progress, the counters, the budget. A source whose name is
markup must show as text and run nothing. Screenshots go to the test artefacts
(``tests/browser.py``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from service import BuildRequest, Cache
from service.http.app import create_app
from service.http.paths import SourcePolicy
from service.http.web import StatusView, human_bytes, render_status
from tests.browser import screenshot
from tests.servers import wait_ready
from tests.service.helpers import SPEC, gated_builder, make_source
from tests.service.server_util import serving

HOSTILE = "x\"'><img src=x onerror=document.title='pwned'>"
BUDGET = 2**20


def _metrics(client: httpx.Client) -> dict[str, str]:
    text = client.get("/metrics").text
    return dict(ln.rsplit(" ", 1) for ln in text.splitlines() if not ln.startswith("#"))


def _text(driver: WebDriver, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _wait_progress(client: httpx.Client, key: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        doc = dict(client.get(f"/stores/{key}").json())
        if doc["status"] == "building" and (doc.get("progress") or {}).get("shards_done"):
            return doc
        time.sleep(0.05)
    raise AssertionError(f"the build of {key} never showed progress")


def _check_store_row(driver: WebDriver, store: dict[str, Any]) -> None:
    row = f"#store-{store['key']}"
    assert _text(driver, f"{row} .source") == store["source"]
    assert _text(driver, f"{row} .size") == human_bytes(store["size_bytes"])
    assert _text(driver, f"{row} .samples") == str(store["num_valid"])
    assert _text(driver, f"{row} .spec").startswith("16 px center-crop x1 seed 0")


def _check_nothing_injected(driver: WebDriver) -> None:
    assert driver.title == "nostall cache"  # the hostile onerror would have set it
    assert driver.find_elements(By.TAG_NAME, "img") == []
    assert driver.find_elements(By.TAG_NAME, "script") == []


def test_status_page_in_chromium(browser: WebDriver, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for name, n in (("ds", 12), (HOSTILE, 12), ("slow", 24)):
        make_source(data / name, num_images=n)
    gate, started = threading.Event(), threading.Event()
    gate.set()  # builds run through until the test closes the gate
    cache = Cache(tmp_path / "cache", BUDGET, builder=gated_builder(gate, started))
    with (
        serving(create_app(cache, SourcePolicy([data]))) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        ds = client.post("/stores", json={"source": "ds", "spec": SPEC}).json()["key"]  # a miss
        wait_ready(client, ds)
        assert client.post("/stores", json={"source": "ds", "spec": SPEC}).status_code == 200
        evil = client.post("/stores", json={"source": HOSTILE, "spec": SPEC}).json()["key"]
        wait_ready(client, evil)
        gate.clear()
        slow = client.post("/stores", json={"source": "slow", "spec": SPEC}).json()["key"]
        assert started.wait(30)
        progress = _wait_progress(client, slow)["progress"]
        assert (progress["shards_done"], progress["shards_total"]) == (1, 3)
        assert (progress["samples_done"], progress["samples_total"]) == (8, 24)

        browser.get(f"{url}/")
        stores = {s["key"]: s for s in client.get("/stores").json()["stores"]}
        counts = _metrics(client)
        shot = screenshot(browser, "status-page-building")
        for key in (ds, evil):
            _check_store_row(browser, stores[key])
        assert stores[evil]["source"] == str(data / HOSTILE)
        _check_nothing_injected(browser)
        assert (counts["nostall_cache_hits_total"], counts["nostall_cache_misses_total"]) == (
            "1",
            "3",
        )
        assert _text(browser, "#count-hits") == "1" and _text(browser, "#count-misses") == "3"
        assert _text(browser, "#hit-rate") == "25%"
        build = f"#build-{slow}"
        assert _text(browser, f"{build} .status") == "building"
        assert _text(browser, f"{build} .source") == str(data / "slow")
        assert _text(browser, f"{build} .shards") == "1 / 3 shards"
        assert _text(browser, f"{build} .samples") == "8 / 24 samples"
        bar = browser.find_element(By.CSS_SELECTOR, f"{build} progress")  # samples, not shards
        assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("8", "24")
        used = sum(s["size_bytes"] for s in stores.values())
        assert _text(browser, "#budget-used") == human_bytes(used)
        assert _text(browser, "#budget-limit") == "1.0 MiB"
        assert _text(browser, "#budget-share") == f"{100 * used / BUDGET:.0f}%"
        assert browser.find_elements(By.CSS_SELECTOR, "meta[http-equiv=refresh]")

        gate.set()
        assert wait_ready(client, slow)["num_valid"] == 24
        browser.get(f"{url}/")
        done = client.get("/stores").json()["stores"]
        screenshot(browser, "status-page")
        assert [s["key"] for s in done if s["key"] == slow]
        _check_store_row(browser, next(s for s in done if s["key"] == slow))
        assert _text(browser, "#builds p") == "No build queued, running or failed on this server."
        assert _text(browser, "#count-builds") == "3"
        assert not browser.find_elements(By.CSS_SELECTOR, "meta[http-equiv=refresh]")
        _check_nothing_injected(browser)
    assert shot.stat().st_size > 10_000  # a real picture of the page, kept for a person


def test_a_failed_build_shows_its_error_as_text(browser: WebDriver, tmp_path: Path) -> None:
    def explode(request: BuildRequest) -> None:
        raise RuntimeError(f"<b>disk</b> on fire in {request.source}")

    make_source(tmp_path / "data" / HOSTILE)
    cache = Cache(tmp_path / "cache", builder=explode)
    with (
        serving(create_app(cache, SourcePolicy([tmp_path / "data"]))) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        key = client.post("/stores", json={"source": HOSTILE, "spec": SPEC}).json()["key"]
        doc = wait_ready(client, key)
        assert doc["status"] == "failed" and "<b>disk</b> on fire" in doc["job"]["error"]
        browser.get(f"{url}/")
        screenshot(browser, "status-page-failed")
        cell = f"#build-{key} .status"
        assert _text(browser, cell).startswith("failed")
        assert _text(browser, f"{cell} .error") == doc["job"]["error"]  # as text, as the JSON
        assert _text(browser, "#budget-text").startswith("No budget:")
        assert browser.find_elements(By.TAG_NAME, "b") == []
        _check_nothing_injected(browser)


def test_every_value_is_escaped_in_the_html() -> None:
    view = StatusView(
        root="/cache</code><script>alert(1)</script>",
        stores=[
            {
                "key": "a" * 64,
                "source": HOSTILE,
                "spec": {"size": 16, "mode": "<i>m</i>", "fields": [{"name": "<u>f</u>"}]},
                "size_bytes": 1,
                "num_samples": 1,
                "num_valid": 1,
                "last_access": 0.0,
                "created": 0.0,
                "build_seconds": 0.0,
            }
        ],
        builds=[{"key": "b" * 64, "status": "failed", "job": {"error": "<script>x</script>"}}],
        counters={"hits": 0, "misses": 0},
        gauges={"bytes": (1, ""), "budget_bytes": (0, "")},
        since=0.0,
        now=1.0,
    )
    page = render_status(view)
    for tag in ("<script", "<img", "<i>", "<u>"):
        assert tag not in page
    assert "x&#34;&#39;&gt;&lt;img src=x onerror=document.title=&#39;pwned&#39;&gt;" in page
    assert "&lt;u&gt;f&lt;/u&gt;" in page and "&lt;script&gt;x&lt;/script&gt;" in page

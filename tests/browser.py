"""A real headless browser for the tests that look at a page: Debian's Chromium, driven by selenium.

Selenium talks WebDriver to Debian's ``chromedriver``, which comes from the same source package
as ``chromium`` and so always matches its version; nothing is downloaded (the driver and the
browser are given by path, so selenium-manager never runs). ``scripts/dev.sh test`` installs
both (``apt-get install chromium chromium-driver``) when they are missing; a test run without
them fails, naming that command, rather than skipping the page tests.

Each page test keeps a screenshot under ``$NOSTALL_TEST_ARTIFACTS`` (default
``tests/artifacts/``, ignored by git) for a person to look at.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

from tests.processes import REPO

__all__ = ["ARTIFACTS_ENV", "artifact_dir", "chromium", "missing_browser", "screenshot"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS_ENV = "NOSTALL_TEST_ARTIFACTS"
# headless, and nothing that reaches the network on its own (this machine has none to reach)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)


def missing_browser() -> str | None:
    """Return why no browser can be started here (what to install), or None when one can."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if not absent:
        return None
    return (
        f"the page tests need Debian's Chromium and its driver; missing: {', '.join(absent)}. "
        "Install them with `apt-get install -y chromium chromium-driver` (as root; "
        "`bash scripts/dev.sh test` does it when apt-get is there)."
    )


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[WebDriver]:
    """Start headless Chromium with a fresh profile in ``profile``; quit it on exit."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def artifact_dir() -> Path:
    """Return the folder test artefacts are kept in (created if missing)."""
    folder = Path(os.environ.get(ARTIFACTS_ENV) or REPO / "tests" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshot(driver: WebDriver, name: str) -> Path:
    """Save the whole page, not only the window's part, as ``<artefacts>/<name>.png``."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}
    )
    path = artifact_dir() / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path

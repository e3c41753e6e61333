"""``benchmarks run`` writes report.html: one self-contained file, read in a real headless Chromium.

The file is copied alone into an empty folder before Chromium opens it, so a plot it did not
embed cannot load. A data folder whose name is markup must show as text and run nothing. The
screenshot goes to the test artefacts (``tests/browser.py``).
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from PIL import Image
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from benchmarks.cli import bench
from tests.browser import screenshot

HOSTILE = 'data<img src="x" onerror="document.title=\'pwned\'">'  # valid CommonMark raw HTML
PLOTS = ("throughput", "utilisation", "step_times")


def _run(data: Path, store: Path, out: Path) -> None:
    argv = ["run", "--data", str(data), "--store", str(store), "--out", str(out)]
    argv += ["--strategies", "workers,precompute", "--epochs", "1", "--batch-size", "8"]
    argv += ["--workers", "0", "--size", "32", "--consumer", "none"]
    res = CliRunner().invoke(bench, argv)
    assert res.exit_code == 0, res.output
    assert f"report: {out / 'report.md'} (and report.html, the plots inside it)" in res.output


def _rows(driver: WebDriver, table: int) -> dict[str, list[str]]:
    """The rows of the ``table``-th table, by their first cell (the strategy)."""
    found = driver.find_elements(By.TAG_NAME, "table")[table]
    cells = (r.find_elements(By.TAG_NAME, "td") for r in found.find_elements(By.TAG_NAME, "tr"))
    return {c[0].text: [x.text for x in c] for c in cells if c}


def test_report_html_is_one_self_contained_file(
    browser: WebDriver, tiny_data: Path, tiny_store: Path, tmp_path: Path
) -> None:
    data = shutil.copytree(tiny_data, tmp_path / HOSTILE)
    out = tmp_path / "out"
    _run(data, tiny_store, out)
    report = json.loads((out / "report.json").read_text())
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(out / "report.html", alone / "report.html")

    browser.get((alone / "report.html").as_uri())
    screenshot(browser, "benchmark-report")
    assert browser.title == "nostall benchmark report"  # the hostile onerror would set it
    assert browser.find_element(By.TAG_NAME, "h1").text == "nostall benchmark report"
    assert f"Data {data}, batch size 8" in browser.find_element(By.TAG_NAME, "p").text
    rows, verdicts = _rows(browser, 0), _rows(browser, 1)
    for s in report["strategies"]:  # per strategy: samples/s, CPU per sample, data wait, verdicts
        assert s["status"] == "ok", s
        row = rows[s["name"]]
        assert row[1] == f"{s['samples_per_s']:.1f}"  # as report.md and the JSON
        assert row[4] == f"{s['cpu_s_per_sample'] * 1e3:.2f}"
        assert row[5] == f"{s['data_wait_share']:.0%}"
        checks = {c["name"]: c for c in s["verdict"]["checks"]}
        gpu, wait, cv = verdicts[s["name"]][1:]
        assert gpu.startswith("n/a: " if checks["gpu_util"]["ok"] is None else "o")
        assert wait == f"MISSED: {checks['data_wait']['detail']}"  # consumer none: data-bound
        assert cv.endswith(checks["step_cv"]["detail"])
    assert "- Warning: --store" in (out / "report.md").read_text()
    assert "Warning: --store" in browser.find_element(By.TAG_NAME, "body").text

    images = browser.find_elements(By.TAG_NAME, "img")
    assert [i.get_attribute("alt") for i in images] == list(PLOTS)  # no injected <img>
    for image, name in zip(images, PLOTS, strict=True):
        src = str(image.get_attribute("src"))
        png = out / f"{name}.png"
        assert src == "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
        shown = browser.execute_script(
            "return [arguments[0].complete, arguments[0].naturalWidth, arguments[0].naturalHeight]",
            image,
        )
        with Image.open(png) as im:
            assert shown == [True, *im.size]  # decoded by the browser, at the plot's size
    linked = browser.find_elements(By.CSS_SELECTOR, "[src]:not(img), [href], link, script")
    assert linked == []  # nothing else to fetch

"""A comparison report of two real runs, opened in headless Chromium.

Two ``diskbench run`` of the same two small dd cells under TCG (base, then head),
then ``diskbench report HEAD --against BASE --html``: the page loads in
Chromium with every chart drawn, one chart per workload and metric family, each
titled in words and with base and head side by side; a screenshot of the page
is kept in ``tests/artifacts/report.png``.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.guest]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
RUN = ["run", "--format", "raw,qcow2", "--workload", "dd", "--dd-mib", "8", "--size", "256M", "--repeat", "2"]


def full_page(driver: Any) -> bytes:
    """A PNG of the whole page, past the window's height (Chrome's DevTools protocol)."""
    width, height = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": int(width), "height": int(height), "scale": 1},
        },
    )
    return base64.b64decode(shot["data"])


WIDTHS = (1000, 1400, 1920)


def chromium(width: int = 1400) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", f"--window-size={width},1000"):
        options.add_argument(arg)
    options.binary_location = str(CHROMIUM)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def page_widths(page: Path, widths: tuple[int, ...] = WIDTHS) -> dict[int, tuple[int, int]]:
    """The page's scroll width and client width at each window width: no sideways scroll where the
    first is at most the second."""
    driver = chromium()
    out = {}
    try:
        for width in widths:
            driver.set_window_size(width, 1000)
            driver.get(page.as_uri())
            scroll, client = driver.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
            )
            out[width] = (int(scroll), int(client))
    finally:
        driver.quit()
    return out


def open_in_chromium(page: Path, screenshot: Path) -> list[dict[str, Any]]:
    """Every image of ``page`` as Chromium loaded it (src, alt, data-*, natural width); a screenshot."""
    driver = chromium()
    try:
        driver.get(page.as_uri())
        images: list[dict[str, Any]] = driver.execute_script(
            "return Array.from(document.images).map(i => ({src: i.getAttribute('src'), alt: i.alt, "
            "workload: i.dataset.workload, family: i.dataset.family, width: i.complete ? i.naturalWidth : 0}))"
        )
        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert not severe, severe
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(full_page(driver))
    finally:
        driver.quit()
    return images


def test_a_comparison_report_of_two_real_runs_renders_in_chromium(
    guest: Any, disk_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is absent: scripts/setup.sh installs them")
    for side in ("base", "head"):
        argv = [*RUN, "--accel", "tcg", "--work-dir", str(disk_dir), "--results-dir", str(tmp_path / side)]
        assert main(argv) == 0, capsys.readouterr().err[-3000:]
    (base,) = (tmp_path / "base" / "records").iterdir()
    (head,) = (tmp_path / "head" / "records").iterdir()
    page = tmp_path / "report" / "report.html"
    capsys.readouterr()
    assert main(["report", str(head), "--against", str(base), "--html", str(page)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("diskbench report: head against base\n")
    # the cell, the comparison's verdict beside it, then base's and head's figures and the change
    assert re.search(r"\nqcow2 +[a-z]+ +[\d.]+ s ± [\d.]+% +[\d.]+ s ± [\d.]+% +[-+][\d.]+%", text), text

    images = open_in_chromium(page, ARTIFACTS / "report.png")
    assert images and all(i["width"] >= 500 for i in images), images
    families = [(i["workload"], i["family"]) for i in images]
    # one chart per family the dd samples carry, none twice, no other workload
    assert sorted(families) == sorted(set(families))
    assert {f for _w, f in families} >= {"total", "phases", "rate", "create"}
    assert {w for w, _f in families} == {"dd"}
    for image in images:
        assert image["alt"].startswith("dd (a file written and flushed): "), image
        assert not re.search(r"\d{8}T\d{6}Z|_s\b", image["alt"]), image
    html = page.read_text()
    assert '<th colspan="3">total</th>' in html and "<th>base</th><th>head</th><th>change</th>" in html
    # each phase its own panel, and the device's latency percentiles drawn
    assert {"phases", "latency"} <= {f for _w, f in families}
    # no sideways scroll at common widths
    widths = page_widths(page)
    assert all(scroll <= client for scroll, client in widths.values()), widths
    assert sorted(widths) == list(WIDTHS)

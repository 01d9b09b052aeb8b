"""A comparison report's verdicts are seen without scrolling sideways, in headless Chromium.

Records as two ``diskbench run`` of dd and install cells write them (base, then head 30 % slower),
then ``report HEAD --against BASE --html``: at 1200 and at 1920 px every cell's verdict lies
inside its table's visible box, on one line, and no table scrolls sideways at 1920 px (the
figures wrap before their spread).  Screenshots go to ``tests/artifacts/report-verdicts-*.png``.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_report_families import write  # noqa: E402
from test_report_reads import real_run  # noqa: E402

from harness.report.command import make_report  # noqa: E402

pytestmark = [pytest.mark.integration]

ARTIFACTS = ROOT / "tests" / "artifacts"
WIDTHS = (1200, 1920)

# per verdict cell: its right edge against its table box's and the window's, its height against
# one line's; per table box: how far it scrolls sideways
MEASURE = """
const boxes = Array.from(document.querySelectorAll('div.table'));
const verdicts = [];
for (const box of boxes) {
  const column = Array.from(box.querySelectorAll('thead tr:last-child th')).findIndex(th => th.textContent === 'verdict');
  if (column < 0) continue;
  const edge = box.getBoundingClientRect().right;
  for (const row of box.querySelectorAll('tbody tr')) {
    const td = row.children[column];
    const r = td.getBoundingClientRect();
    // the lines its text takes (the cell itself is as tall as its row)
    const range = document.createRange();
    range.selectNodeContents(td);
    const lines = new Set(Array.from(range.getClientRects()).map(q => Math.round(q.top))).size;
    verdicts.push({text: td.textContent, right: r.right, box: edge, window: window.innerWidth, lines});
  }
}
return {verdicts, overflow: boxes.map(b => b.scrollWidth - b.clientWidth)};
"""


def test_every_verdict_is_seen_without_scrolling_at_1200_and_1920_px(tmp_path: Path) -> None:
    from served_chromium import CHROMEDRIVER, CHROMIUM, served

    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is absent: scripts/setup.sh installs them")
    pytest.importorskip("matplotlib")
    base = write(real_run("20261123T200116Z-aaaa"), tmp_path / "base")
    head = write(real_run("20261124T010000Z-bbbb", slower=1.3), tmp_path / "head")
    page = tmp_path / "report" / "index.html"
    make_report([head], against=[base], html_out=page)
    ARTIFACTS.mkdir(exist_ok=True)
    with served(page.parent, window="1200,1000") as (driver, url):
        for width in WIDTHS:
            driver.set_window_size(width, 1000)
            driver.get(url + "index.html")
            figures: dict[str, Any] = driver.execute_script(MEASURE)
            shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
            (ARTIFACTS / f"report-verdicts-{width}.png").write_bytes(base64.b64decode(shot["data"]))
            verdicts = figures["verdicts"]
            assert len(verdicts) == 4 and {v["text"] for v in verdicts} == {"inconclusive"}, verdicts
            for v in verdicts:
                assert v["right"] <= min(v["box"], v["window"]), (width, v)
                assert v["lines"] <= 1, (width, v)
            if width >= 1920:
                assert max(figures["overflow"]) <= 0, (width, figures["overflow"])

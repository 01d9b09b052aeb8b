"""The pull request comment of five comparisons, rendered by the action and opened in headless Chromium.

The action's own renderer (``scripts/preview.mjs`` in ``.github/actions/gate-comment``: its
``renderMarkdown``, then GitHub-flavoured markdown to HTML with GitHub's comment styles) turns each
comparison into a page, with the history pages' URL (metrics link to their graphs); Chromium opens
it in a window 780 px wide, GitHub's comment column (the comment box is then 732 px, its text
698 px).  For a regression, an unchanged comparison, an
inconclusive one and one whose head timed out (the action's fixtures; the last two derived from
real comparisons, ``tests/unit/test_comment_fixtures.py``), a real gate of guest pairs and
replay cells, inconclusive, with its figures not gated, and that gate's eight cells as a QEMU
7.2 → 10.0 upgrade read them (five guest cells regressed crossed, derived the same way):

* what regressed (each regressed cell's short name and change), or what an unchanged or
  inconclusive comparison says first, lies inside the top 900 px, and each regression's change
  is written once (folds closed);
* the page never scrolls sideways, nor does any table in it, its folds closed or open;
* the whole comment, its folds closed, is at most 2,500 px tall.

Screenshots go to ``tests/artifacts/comment-*.png`` and the heights to
``tests/artifacts/comment-heights.json``.  ``python tests/integration/test_comment_chromium.py
[ACTION_DIR]`` prints the heights of another checkout's action (its renderer, these fixtures).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / ".github" / "actions" / "gate-comment"
FIXTURES = ACTION / "__tests__" / "fixtures"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# as a repository with published history pages has it (the action's pages-url input): links to graphs
PAGES_URL = "https://acme.github.io/diskbench/"
WIDTH_PX = 780
FIRST_SCREEN_PX = 900
MAX_HEIGHT_PX = 2500
COMPARISONS = {
    "regression": "real-regression.json",
    "unchanged": "real-unchanged.json",
    "inconclusive": "derived-inconclusive.json",
    "timed-out": "derived-timed-out.json",
    "pairs": "real-gate-pairs.json",
    "qemu-upgrade": "derived-qemu-upgrade.json",
}

# the page's figures: its width and the widest table (closed and open), the comment's height, and
# where the text that must be seen first ends (the first paragraph, list item or table cell that holds it)
MEASURE = """
const wanted = arguments[0];
const said = arguments[1];
const page = document.documentElement;
const tables = () => Array.from(document.querySelectorAll('table'))
  .filter(t => t.offsetParent !== null)
  .map(t => t.scrollWidth - t.clientWidth);
// the first place the text is drawn (a closed fold draws nothing)
const bottom = text => {
  const found = Array.from(document.querySelectorAll('.body li, .body p, .body td'))
    .filter(e => e.textContent.includes(text) && e.getClientRects().length > 0);
  return found.length ? Math.min(...found.map(e => e.getBoundingClientRect().bottom + window.scrollY)) : null;
};
// how often a text is written where a reader sees it (a closed fold shows only its summary)
const seen = document.querySelector('.body').innerText;
const closed = {
  counts: Object.fromEntries(said.map(t => [t, seen.split(t).length - 1])),
  height: Math.ceil(document.querySelector('.box').getBoundingClientRect().height),
  pageWidth: page.scrollWidth - page.clientWidth,
  tableOverflow: Math.max(0, ...tables()),
  bottoms: Object.fromEntries(wanted.map(t => [t, bottom(t)])),
};
document.querySelectorAll('details').forEach(d => { d.open = true; });
return {
  ...closed,
  openPageWidth: page.scrollWidth - page.clientWidth,
  openTableOverflow: Math.max(0, ...tables()),
  openHeight: Math.ceil(document.querySelector('.box').getBoundingClientRect().height),
};
"""


@dataclass(frozen=True)
class Rendered:
    """One comment as Chromium drew it at 780 px."""

    height_px: int
    open_height_px: int
    page_overflow_px: int
    table_overflow_px: int
    bottoms: dict[str, float | None]
    # each regression's change: how many times the comment writes it, folds closed
    counts: dict[str, int]
    screenshot: bytes


def first_texts(doc: dict[str, Any]) -> list[str]:
    """What a reader must see first, as the comment writes it: each regressed cell's short name
    and change (or what happened to it), else the unchanged or inconclusive sentence's start."""
    cells = doc["cells"]
    texts = []
    for line in doc["summary"]["screen"]["first"]:
        cell = cells[line["cell"]]
        if cell["verdict"] != "regression":
            continue
        texts.append(str(cell["title"]))
        metric = next((m for m in cell["metrics"] if m["metric"] == line["metric"]), None)
        texts.append(f"{metric['change_pct']:+.1f}%" if metric else str(line["said"]))
    if doc["summary"]["screen"]["unchanged"]:
        texts.append(f"All {doc['summary']['cells']} cells unchanged: each would have caught a regression of")
    if doc["summary"]["screen"]["inconclusive"]:
        texts.append(f"{len(doc['summary']['screen']['inconclusive']['cells'])} inconclusive:")
    return texts


def regression_changes(doc: dict[str, Any]) -> list[str]:
    """Each regressed cell's change of its lead metric, as the comment writes it (``+15.1%``)."""
    out = []
    for line in doc["summary"]["screen"]["first"]:
        cell = doc["cells"][line["cell"]]
        metric = next((m for m in cell["metrics"] if m["metric"] == line["metric"]), None)
        if cell["verdict"] == "regression" and metric is not None and metric["change_pct"] is not None:
            out.append(f"{metric['change_pct']:+.1f}%")
    return out


def open_driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        f"--window-size={WIDTH_PX},{FIRST_SCREEN_PX}",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    # the layout viewport exactly 780 px wide, whatever the window's frame takes
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH_PX, "height": FIRST_SCREEN_PX, "deviceScaleFactor": 1, "mobile": False},
    )
    return driver


def render(driver: Any, action: Path, comparison: Path, html: Path) -> Rendered:
    """The comment of ``comparison`` as ``action``'s renderer writes it, drawn by Chromium."""
    subprocess.run(
        ["node", "scripts/preview.mjs", str(comparison), str(html), "--pages-url", PAGES_URL],
        cwd=action,
        check=True,
        capture_output=True,
        timeout=120,
    )
    driver.get(html.as_uri())
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not severe, severe
    # the comment and the page's margin under it (the window may be taller than a short comment)
    height = driver.execute_script(
        "return Math.ceil(document.querySelector('.box').getBoundingClientRect().bottom) + 24"
    )
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": WIDTH_PX, "height": int(height), "scale": 1},
        },
    )
    doc = json.loads(comparison.read_text())
    figures = driver.execute_script(MEASURE, first_texts(doc), regression_changes(doc))
    return Rendered(
        height_px=int(figures["height"]),
        open_height_px=int(figures["openHeight"]),
        page_overflow_px=max(int(figures["pageWidth"]), int(figures["openPageWidth"])),
        table_overflow_px=max(int(figures["tableOverflow"]), int(figures["openTableOverflow"])),
        bottoms=dict(figures["bottoms"]),
        counts={str(k): int(v) for k, v in figures["counts"].items()},
        screenshot=base64.b64decode(shot["data"]),
    )


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is absent: scripts/setup.sh installs them")
    if not (ACTION / "node_modules" / "marked").is_dir() or shutil.which("node") is None:
        pytest.skip("the action's node_modules are absent: scripts/test-action.sh installs them")
    chrome = open_driver()
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.mark.parametrize("what", list(COMPARISONS))
def test_the_comment_says_what_regressed_in_one_screen_at_githubs_width(
    driver: Any, what: str, tmp_path: Path
) -> None:
    comparison = FIXTURES / COMPARISONS[what]
    shown = render(driver, ACTION, comparison, tmp_path / "comment.html")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"comment-{what}.png").write_bytes(shown.screenshot)
    heights = ARTIFACTS / "comment-heights.json"
    known = json.loads(heights.read_text()) if heights.exists() else {}
    known[what] = {"closed_px": shown.height_px, "open_px": shown.open_height_px}
    heights.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")

    doc = json.loads(comparison.read_text())
    wanted = first_texts(doc)
    assert len(wanted) >= 1
    regressed = [c["title"] for c in doc["cells"] if c["verdict"] == "regression"]
    assert all(title in wanted for title in regressed)
    assert len(regressed) == {"regression": 4, "timed-out": 2, "qemu-upgrade": 3}.get(what, 0)
    # each regression said once: its change is written in one place of the comment, folds closed
    for text, count in shown.counts.items():
        assert count == 1, f"{what}: {text!r} is said {count} times"
    for text, bottom in shown.bottoms.items():
        assert bottom is not None, f"{what}: {text!r} is not in the comment"
        assert bottom <= FIRST_SCREEN_PX, f"{what}: {text!r} ends at {bottom:.0f} px, below {FIRST_SCREEN_PX}"
    assert shown.page_overflow_px == 0, f"{what}: the page scrolls {shown.page_overflow_px} px sideways"
    assert shown.table_overflow_px == 0, f"{what}: a table scrolls {shown.table_overflow_px} px sideways"
    assert shown.height_px <= MAX_HEIGHT_PX, f"{what}: the comment is {shown.height_px} px tall"
    # the folds hold the rest: opened, the comment is taller
    assert shown.open_height_px > shown.height_px


if __name__ == "__main__":
    action = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ACTION
    chrome = open_driver()
    try:
        for name, fixture in COMPARISONS.items():
            out = Path("/tmp") / f"comment-{name}.html"
            shown = render(chrome, action, FIXTURES / fixture, out)
            print(
                f"{name}: {shown.height_px} px tall at {WIDTH_PX} px (open {shown.open_height_px}), "
                f"sideways page {shown.page_overflow_px} px, table {shown.table_overflow_px} px, "
                f"first texts end at {max((b or 1e9) for b in shown.bottoms.values()):.0f} px"
            )
    finally:
        chrome.quit()

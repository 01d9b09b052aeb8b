"""The change points on a page of the history pages: ``changes.html``, linked from asv's index.

:func:`render_page` and :func:`add_nav_link` are pure; :func:`write_page` writes both files.
The page loads nothing (its style is inline), so it works offline as the localized pages do.
Every text from a record (a QEMU version string is a PR's binary's own words) is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.files import write_text_atomic
from harness.history.changes.find import Change, Settings, history_changes, records_identity
from harness.history.changes.points import with_nav_link, write_points
from harness.history.changes.table import confidence_text, settings_line, step_text

PAGE = "changes.html"
NAV_ID = "nav-li-changes"
_STYLE = """
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.cause-other { color: #8a4b00; font-weight: bold; }
"""


def graph_url(change: Change) -> str:
    """asv's graph of the series: ``index.html#BENCH?machine=M&p-NAME='VALUE'``."""
    series = change.series
    params = [("machine", series.machine)]
    params += [
        (f"p-{name}", repr(value)) for name, value in zip(series.param_names, series.params, strict=False)
    ]
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params)
    return f"index.html#{quote(series.benchmark, safe='.')}?{query}"


def render_page(changes: Sequence[Change], settings: Settings, *, series_count: int) -> str:
    esc = html.escape
    rows = []
    for c in changes:
        other = "cause-other" if c.changed else "cause-commit"
        rows.append(
            "<tr>"
            f"<td>{esc(c.series.machine)}</td><td>{esc(c.series.cell)}</td><td>{esc(c.series.metric)}</td>"
            f"<td><code>{esc(c.commit[:12])}</code></td><td>{esc(step_text(c))}</td>"
            f'<td>{esc(confidence_text(c))}</td><td class="{other}">{esc(c.cause)}</td>'
            f'<td><a href="{esc(graph_url(c))}">graph</a></td>'
            "</tr>"
        )
    if rows:
        body = (
            '<table id="changes"><thead><tr><th>machine</th><th>cell</th><th>metric</th><th>commit</th>'
            "<th>before → after</th><th>confidence</th><th>cause</th><th></th></tr></thead><tbody>\n"
            + "\n".join(rows)
            + "\n</tbody></table>"
        )
    else:
        body = '<p id="no-changes">No change point.</p>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Change points</title>'
        f"<style>{_STYLE}</style></head><body>\n"
        '<p><a href="index.html">← the history pages</a></p>\n'
        f"<h1>Change points</h1>\n<p>{len(changes)} change point(s) in {series_count} series: "
        f"{esc(settings_line(settings))}. A step that lines up with a change of QEMU, guest, host "
        "kernel, runner or accel at its commit says so: the commit is not to blame for it.</p>\n"
        f"{body}\n</body></html>\n"
    )


def add_nav_link(index: str) -> str:
    """asv's navigation bar with a "Change points" entry after "Regressions" (once)."""
    return with_nav_link(index, nav_id=NAV_ID, page=PAGE, title="Change points")


def write_page(html_dir: Path, changes: Sequence[Change], settings: Settings, *, series_count: int) -> Path:
    """``changes.html`` in the pages, and the link to it in their ``index.html``."""
    page = html_dir / PAGE
    write_text_atomic(page, render_page(changes, settings, series_count=series_count))
    index = html_dir / "index.html"
    if index.is_file():
        write_text_atomic(index, add_nav_link(index.read_text(encoding="utf-8")))
    return page


def publish_changes(
    html_dir: Path,
    *,
    results_dir: Path,
    records_root: Path,
    thresholds: Mapping[str, Any],
    order: Sequence[str] = (),
    settings: Settings | None = None,
) -> Path:
    """Find the change points of the results with the default settings and write their page, and
    the page of the QEMU of each point (:mod:`~harness.history.changes.points`)."""
    settings = settings or Settings()
    found = history_changes(
        results_dir=results_dir,
        records_root=records_root,
        thresholds=thresholds,
        settings=settings,
        order=order,
    )
    write_points(html_dir, found.points, records_identity(records_root))
    return write_page(html_dir, found.changes, settings, series_count=found.series)

"""The QEMU of each point of the history: ``qemu.html``, linked from asv's index beside the change
points.

Each commit measured on each machine, in the order of the graphs, with the QEMU its records name:
the pin of the commit's policy, QEMU's version, its build (Debian version or binary digest) and
its binary.  A row whose build differs from the row before is marked: the points from there on
are another QEMU's.  :func:`render_points` and :func:`add_nav_link` are pure; every text from a
record is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.files import write_text_atomic
from harness.history.changes.attribution import QEMU_KEYS

PAGE = "qemu.html"
NAV_ID = "nav-li-qemu"
_STYLE = """
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tr.new-build td { background: #fff4e0; font-weight: bold; }
"""

Identity = Callable[[str, str], Mapping[str, str] | None]


def render_points(points: Sequence[tuple[str, str]], identity: Identity) -> str:
    """The page: one table per machine, a row per commit (``points``: machine, commit, in order)."""
    esc = html.escape
    machines: dict[str, list[str]] = {}
    for machine, commit in points:
        machines.setdefault(machine, [])
        if commit not in machines[machine]:
            machines[machine].append(commit)
    tables = []
    for machine, commits in machines.items():
        rows = []
        previous: tuple[str, ...] | None = None
        for commit in commits:
            found = identity(machine, commit)
            values = tuple((found or {}).get(k, "") for k in QEMU_KEYS)
            build = values[1:]
            new = previous is not None and found is not None and build != previous
            cells = "".join(f"<td>{esc(v) if v else '?'}</td>" for v in values)
            rows.append(
                f'<tr class="{"new-build" if new else "point"}"><td><code>{esc(commit[:12])}</code></td>'
                f"{cells}</tr>"
            )
            previous = build if found is not None else previous
        header = "".join(f"<th>{esc(k)}</th>" for k in QEMU_KEYS)
        tables.append(
            f'<h2>machine {esc(machine)}</h2>\n<table class="points" data-machine="{esc(machine)}">'
            f"<thead><tr><th>commit</th>{header}</tr></thead><tbody>\n"
            + "\n".join(rows)
            + "\n</tbody></table>"
        )
    body = "\n".join(tables) if tables else '<p id="no-points">No point measured.</p>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>QEMU of each point</title>'
        f"<style>{_STYLE}</style></head><body>\n"
        '<p><a href="index.html">← the history pages</a></p>\n'
        "<h1>The QEMU of each point</h1>\n<p>Each commit's records name the QEMU its cells ran: the "
        "pin of the commit's policy (runner: the runner's own QEMU), its version and build, its "
        "binary. A highlighted row is a point whose build differs from the point before it; a "
        "step there is the build's (see the change points).</p>\n"
        f"{body}\n</body></html>\n"
    )


def with_nav_link(index: str, *, nav_id: str, page: str, title: str) -> str:
    """asv's navigation bar (``index.html``) with an entry ``title`` for ``page`` after
    "Regressions", once (the pages this package adds share the bar)."""
    if nav_id in index:
        return index
    anchor = '<li id="nav-li-regressions">'
    at = index.find(anchor)
    if at < 0:
        return index
    end = index.find("</li>", at) + len("</li>")
    link = f'\n\t<li id="{nav_id}"><a href="{page}">{title}</a></li>'
    return index[:end] + link + index[end:]


def add_nav_link(index: str) -> str:
    """asv's navigation bar with a "QEMU builds" entry after "Regressions" (once)."""
    return with_nav_link(index, nav_id=NAV_ID, page=PAGE, title="QEMU builds")


def write_points(html_dir: Path, points: Sequence[tuple[str, str]], identity: Identity) -> Path:
    """``qemu.html`` in the pages, and the link to it in their ``index.html``."""
    page = html_dir / PAGE
    write_text_atomic(page, render_points(points, identity))
    index = html_dir / "index.html"
    if index.is_file():
        write_text_atomic(index, add_nav_link(index.read_text(encoding="utf-8")))
    return page

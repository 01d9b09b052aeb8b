"""``diskbench report``: tables, plots and the seeds' figures beside ours.

:func:`make_report` loads records, groups them into series
(:mod:`~harness.report.series`), builds the blocks
(:mod:`~harness.report.blocks`) and writes them as text, and as HTML and
Markdown where asked; the last two draw the charts into PNG files in a
``NAME_files/`` directory next to the output (:mod:`~harness.report.charts`).
Given base's records too (``against``), it builds a comparison report instead
(:mod:`~harness.report.sides`): base and head side by side.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.record import Record
from harness.report.blocks import build_report, charts_in
from harness.report.charts import draw_charts
from harness.report.html import to_html
from harness.report.markdown import to_markdown
from harness.report.series import group_series, load_records
from harness.report.sides import Side, Verdicts, comparison_blocks
from harness.report.text import to_text


@dataclass(frozen=True)
class ReportResult:
    text: str
    written: tuple[Path, ...]
    series: int


def make_report(
    paths: Sequence[Path],
    *,
    against: Sequence[Path] = (),
    labels: tuple[str, str] = ("base", "head"),
    html_out: Path | None = None,
    markdown_out: Path | None = None,
) -> ReportResult:
    """Load, group, build; write HTML and Markdown where asked; return the text version too.

    With ``against`` (base's records), ``paths`` are head's and the report is a
    comparison: both sides' figures side by side, ``labels`` naming them.
    """
    records, dirs = load_records(paths)
    series = group_series(records, dirs)
    if against:
        base_records, base_dirs = load_records(against)
        base_series = group_series(base_records, base_dirs)
        blocks = comparison_blocks(
            Side(labels[0], tuple(base_series)),
            Side(labels[1], tuple(series)),
            verdicts_of(base_records, records),
        )
        series = [*base_series, *series]
    else:
        blocks = build_report(series)
    if (html_out or markdown_out) and charts_in(blocks) and not plots_installed():
        raise UsageError(
            "the HTML and Markdown reports draw charts with matplotlib, which is not installed: "
            "pip install 'diskbench[plots]' (the text report needs neither --html nor --markdown)"
        )
    written = []
    for out, writer in ((html_out, to_html), (markdown_out, to_markdown)):
        if out is None:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        images = draw_charts(charts_in(blocks), out)
        out.write_text(writer(blocks, images), encoding="utf-8")
        written.append(out)
    return ReportResult(text=to_text(blocks), written=tuple(written), series=len(series))


def verdicts_of(base: Sequence[Record], head: Sequence[Record]) -> Verdicts:
    """``diskbench compare``'s verdicts, with its default settings, by cell id and metric: the
    report marks them and decides nothing itself."""
    from harness.compare import Settings, compare_records

    out: dict[tuple[str, str], str] = {}
    for cell in compare_records(base, head, settings=Settings()):
        for figure in (*cell.metrics, *cell.counters):
            out[(cell.cell_id, figure.metric)] = str(figure.verdict)
        out[(cell.cell_id, "")] = str(cell.verdict)
    return out


def plots_installed() -> bool:
    """Whether matplotlib, the ``plots`` extra, can be imported (``pip install 'diskbench[plots]'``)."""
    return importlib.util.find_spec("matplotlib") is not None

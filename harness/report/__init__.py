"""Reports of records: the tables ``run`` and ``show`` print, and ``diskbench report``.

* :mod:`~harness.report.tables`: a run's per-cell tables, summary and time split;
* :mod:`~harness.report.series`: records grouped into series (one sweep on one machine
  identity) and the figures read from their samples;
* :mod:`~harness.report.blocks`: the report as headings, paragraphs, tables and charts;
* :mod:`~harness.report.text`, :mod:`~harness.report.markdown`, :mod:`~harness.report.html`:
  the writers of those blocks;
* :mod:`~harness.report.charts`: the PNG charts (matplotlib);
* :mod:`~harness.report.families`: one chart per workload and metric family, where no preset
  lays the charts out;
* :mod:`~harness.report.sides`: the comparison report, two record sets side by side;
* :mod:`~harness.report.command`: ``make_report``, which ties them together.

Only the tables are imported here, so that a run can print them without loading presets,
series or charts.
"""

from harness.report.tables import (
    HOST_ROWS,
    cell_rows,
    metric_order,
    render,
    render_summary,
    render_table,
    render_time_split,
    time_split,
)

__all__ = [
    "HOST_ROWS",
    "cell_rows",
    "metric_order",
    "render",
    "render_summary",
    "render_table",
    "render_time_split",
    "time_split",
]

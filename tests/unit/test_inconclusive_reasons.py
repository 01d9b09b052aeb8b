"""Why more rounds would or would not decide an inconclusive cell is said once, the same way in
the summary's lines and its closing sentence: a cell with too few samples for an interval is told
to run more, never that more rounds would not decide it."""

from __future__ import annotations

from test_comment_pointers import document
from test_compare import SETTINGS, cell_info, samples

from harness.compare import compare_cell, render_markdown


def test_a_cell_with_too_few_samples_is_told_to_run_more_everywhere() -> None:
    # three samples a side, head 37 % faster: n too small for an interval
    cell = compare_cell(
        cell_info(format="raw"), samples([10.0, 10.4, 9.8]), samples([6.3, 6.5, 6.2]), settings=SETTINGS
    )
    value = document(cells=[cell])
    (figure,) = value.cells[0].metrics
    assert value.cells[0].verdict.value == "inconclusive" and figure.ci_low is None
    assert figure.change_pct is not None and figure.change_pct < -35
    text = render_markdown(value)
    # a comparison of records: more samples, said alike in each place
    assert "Too few samples for an interval: record more samples (`--repeat`) and compare again." in text
    assert "has too few samples for an interval (3 + 3): record more samples (`--repeat`)" in text
    assert "To decide, record more samples (`--repeat`) and compare again" in text
    assert "would not decide" not in text and "sits on the minimum effect" not in text

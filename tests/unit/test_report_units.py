"""Tables name one unit per metric, whatever the run: two runs of a cell read alike; the guest's
RAM is called so; one cell is "1 cell"."""

from __future__ import annotations

from dataclasses import replace

from recordkit import tcg_record
from test_report_html import ok, record_of

from harness.record import Record, Sample
from harness.report.blocks import build_report
from harness.report.series import group_series
from harness.report.show import render_text
from harness.report.summary import render_summary
from harness.report.tables import render_table
from harness.report.text import to_text
from harness.spec import make_cell
from harness.units import column, human


def run_of(total_s: float) -> Record:
    """A dd cell's record whose samples take ``total_s`` (and a quarter of a MiB allocated)."""
    rec = tcg_record(make_cell(format="raw", workload="dd", dd_mib=16, size="256M").as_dict())
    for i in range(3):
        metrics = {"total_s": total_s + i / 1000, "mib_per_s": 16 / total_s, "host.allocated_bytes": 262144.0}
        rec = rec.with_sample(Sample(index=i, status="ok", metrics=metrics))
    return rec


def summary_column(text: str, label: str) -> tuple[str, str]:
    """The unit a summary's column names and its first row's figure."""
    lines = text.splitlines()
    header, units, first = lines[1].split(), lines[2].split(), lines[3].split()
    at = header.index(label)
    # the units row has no word under "cell" (and the figures row one more, the cell's name)
    return units[at - 1], first[at]


def test_two_runs_of_a_cell_name_the_same_unit_for_its_total() -> None:
    slow, fast = render_summary([run_of(1.54)]), render_summary([run_of(0.972)])
    assert summary_column(slow, "total") == ("s", "1.54")
    assert summary_column(fast, "total") == ("s", "0.973")  # never "ms 973"
    # show --all: each figure with its unit, the same unit in both runs
    assert "0.973 s" in render_text([run_of(0.972)], every=True)
    assert "1.54 s" in render_text([run_of(1.54)], every=True)


def test_a_metric_keeps_its_unit_whatever_its_size() -> None:
    assert human(0.972, "s") == "0.972 s" and human(1.54, "s") == "1.54 s" and human(439.6, "s") == "440 s"
    assert human(262144.0, "B") == "0.2500 MiB" and human(3 * 2**30, "B") == "3072 MiB"
    assert column([0.017, 0.02], "s").unit == "s" and column([1.5], "s").unit == "s"
    assert column([2048.0], "B").unit == "MiB" and column([3.0 * 2**30], "B").unit == "MiB"


def test_the_guest_ram_is_called_so_never_a_bare_size_beside_the_dd_size() -> None:
    rec = run_of(1.5)
    for text in (render_text([rec], every=True), render_table([rec])):
        assert "guest RAM 256 MiB, 1 vCPU" in text
        assert ", 256 MiB, 1 vCPU" not in text
    cell = make_cell(format="raw", workload="dd", dd_mib=16, size="256M")
    (series,) = group_series([record_of(cell, "20261122T000000Z-ab12", [ok({"total_s": 5.0})])])
    report = to_text(build_report([series]))
    assert "guest RAM 256 MiB, 1 vCPU" in report


def test_one_cell_is_one_cell() -> None:
    from harness.units import plural

    assert (
        plural(1, "cell") == "1 cell"
        and plural(2, "cell") == "2 cells"
        and plural(0, "sample") == "0 samples"
    )
    cell = make_cell(format="raw", workload="dd", dd_mib=16, size="256M")
    record = record_of(cell, "20261122T000000Z-ab12", [ok({"total_s": 5.0})])
    (series,) = group_series([record])
    report = " ".join(to_text(build_report([series])).split())
    assert "; 1 cell, 1 sample" in report and "1 cells" not in report and "1 samples" not in report
    two = replace(record, samples=(*record.samples, Sample.from_json({**ok({"total_s": 5.1}), "index": 1})))
    (series,) = group_series([two])
    assert "; 1 cell, 2 samples" in " ".join(to_text(build_report([series])).split())

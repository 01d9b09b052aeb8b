"""What every summary of a comparison says first and in which order (``summary.screen``): the
cells of the lines under the headline and their metric, the rows of the table, what an unchanged
comparison could have seen, and the command that decides an inconclusive gate."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from test_compare import SETTINGS, cell_info, failed, gauss, sample_document, samples

from harness.compare import Settings, build_comparison, compare_cell, compare_family, render_markdown
from harness.compare.document import compared_cell
from harness.compare.model import Budget, ComparedCell, Comparison, Figures, Side
from harness.compare.screen import decide_command, lead_metric, said, with_screen
from harness.compare.verdict import Kind, Verdict
from harness.record import MachineInfo


def document(cells: list[Any], **more: Any) -> Comparison:
    return build_comparison(
        cells, settings=SETTINGS, base=Side(), head=Side(), machine=MachineInfo(), created_at="x", **more
    )


def regressed(seed: int, slower: float, **axes: Any) -> Any:
    return compare_cell(
        cell_info(**axes),
        samples(gauss(seed, 8, 100.0, 0.01)),
        samples(gauss(seed + 1, 8, 100.0 * slower, 0.01)),
        settings=SETTINGS,
    )


def test_the_first_lines_name_the_worst_cells_first_with_the_metric_that_decided() -> None:
    doc = sample_document().to_json()
    screen = doc["summary"]["screen"]
    cells = doc["cells"]
    first = [
        (cells[e["cell"]]["verdict"], cells[e["cell"]]["kind"], e["metric"], e["said"])
        for e in screen["first"]
    ]
    # head failed (no figure) before the regressions, those by size, then changed, then the error
    assert first[0] == ("regression", "failure", None, "head failed 4 of 4 samples")
    assert [f[:3] for f in first[1:3]] == [("regression", "metric", "total_s")] * 2
    sizes = [next(m for m in cells[e["cell"]]["metrics"])["change_pct"] for e in screen["first"][1:3]]
    assert sizes == sorted(sizes, reverse=True) and sizes[1] > 5
    assert first[3] == ("changed", "counter", "host.flushes", None)
    assert first[4] == ("error", "both-failed", None, "both sides failed")
    # the table: the same cells in the same order, then the unchanged one in its fold
    assert [r["cell"] for r in screen["rows"]] == [e["cell"] for e in screen["first"]]
    assert [r["label"] for r in screen["rows"]] == [
        "regression (failure)",
        "regression",
        "regression",
        "changed (counter)",
        "error (both-failed)",
    ]
    (steady,) = screen["unchanged_rows"]
    assert cells[steady["cell"]]["verdict"] == "unchanged"
    assert steady["figures"] == [{"metric": "total_s", "label": "unchanged"}]
    # every figure of the changed cell, the moved counter labelled as the cell's change
    changed = screen["rows"][3]
    assert changed["figures"] == [
        {"metric": "total_s", "label": "unchanged"},
        {"metric": "host.flushes", "label": "changed"},
    ]
    assert screen["unchanged"] is None and screen["inconclusive"] is None


def test_a_head_that_timed_out_comes_first_and_says_so_in_a_few_words() -> None:
    value = document([regressed(1, 1.3)])
    doc = value.to_json()
    timed_out = ComparedCell(
        cell_id="x",
        verdict=Verdict.REGRESSION,
        kind=Kind.HEAD_TIMED_OUT,
        reason="head's guest ran past its deadline of 320 s (10 x base's median workload time + 60 s, "
        "within the budget)",
    )
    again = with_screen(replace(value, cells=(*value.cells, timed_out))).to_json()
    assert again["summary"]["screen"]["first"] == [
        {"cell": 1, "metric": None, "said": "head's guest ran past its deadline of 320 s"},
        {"cell": 0, "metric": "total_s", "said": None},
    ]
    assert again["summary"]["screen"]["rows"][0]["label"] == "regression (head-timed-out)"
    # the document itself is left as it was; a document that has its screen gets the same again
    assert "screen" in doc["summary"] and with_screen(value) == value
    assert (
        said(replace(timed_out, reason="no sample of head: the gate's budget ran out first"))
        == "no sample of head"
    )


def test_the_lead_is_the_deciding_metric_else_the_worst() -> None:
    settings = Settings(metrics=("total_s", "dev.write_p90_ms"))
    base = samples(gauss(1, 8, 10.0, 0.01), dev__write_p90_ms=gauss(2, 8, 3.0, 0.01))
    worse = samples(gauss(3, 8, 10.0, 0.01), dev__write_p90_ms=gauss(4, 8, 9.0, 0.01))
    (cell,) = compare_family([(cell_info(), base, worse)], settings=settings)
    assert cell.verdict is Verdict.REGRESSION
    assert lead_metric(compared_cell(cell)) == "dev.write_p90_ms"
    # an unchanged cell shows its worst metric: the one that moved most toward worse
    same = samples(gauss(5, 8, 10.0, 0.005), dev__write_p90_ms=gauss(6, 8, 3.06, 0.005))
    (steady,) = compare_family([(cell_info(), base, same)], settings=settings)
    assert steady.verdict is Verdict.UNCHANGED
    figures = {m.metric: m.ratio for m in steady.metrics}
    worst = max(figures, key=lambda k: figures[k] or 0)
    assert lead_metric(compared_cell(steady)) == worst
    # a higher-is-better rate that fell is worse than a time that fell
    rate = Figures(metric="mib_per_s", higher_is_better=True, ratio=0.97, verdict=Verdict.UNCHANGED)
    time = Figures(metric="total_s", higher_is_better=False, ratio=0.9, verdict=Verdict.UNCHANGED)
    both = ComparedCell(cell_id="c", verdict=Verdict.UNCHANGED, kind=Kind.METRIC, metrics=(time, rate))
    assert lead_metric(both) == "mib_per_s"
    # no figures at all: no lead
    failure = compare_cell(cell_info(), samples([1.0] * 4), failed(4), settings=SETTINGS)
    assert lead_metric(compared_cell(failure)) is None


def test_an_unchanged_comparison_says_what_it_could_have_seen() -> None:
    cells = [
        compare_cell(
            cell_info(dd_mib=64 * (k + 1)),
            samples(gauss(10 + k, 8, 100.0, cv)),
            samples(gauss(20 + k, 8, 100.0, cv)),
            settings=SETTINGS,
        )
        for k, cv in enumerate((0.002, 0.025))
    ]
    doc = document(cells).to_json()
    assert doc["verdict"] == "unchanged"
    seen = [c["metrics"][0]["could_see_pct"] for c in doc["cells"]]
    # never below the minimum effect: a smaller change cannot fail the gate
    floor = SETTINGS.min_effect * 100
    assert doc["summary"]["screen"]["unchanged"] == {
        "cells": 2,
        "could_see_low_pct": round(max(min(seen), floor), 2),
        "could_see_high_pct": round(max(max(seen), floor), 2),
    }
    assert min(seen) < floor < max(seen)
    assert doc["summary"]["screen"]["first"] == [] and doc["summary"]["screen"]["rows"] == []


def noisy(seed: int) -> Any:
    return compare_cell(
        cell_info(format="raw", dd_mib=64 + 2 * seed),
        samples([100.0, 60.0, 140.0, 90.0, 120.0, 70.0]),
        samples([v * (1.1 + seed / 100) for v in (100.0, 68.0, 136.0, 86.0, 118.0, 73.0)]),
        settings=SETTINGS,
    )


def test_an_inconclusive_gate_names_its_cells_and_the_command_that_decides_them() -> None:
    gate = ["diskbench", "gate", "--base", "a" * 40, "--head", "b" * 40, "--max-rounds", "12", "--seed", "5"]
    value = document(
        [noisy(0), noisy(3), regressed(7, 1.3)],
        budget=Budget.from_json({"budget_min": 11, "used_min": 7.5, "rounds": 6}),
        pointers=None,
    )
    value = with_screen(replace(value, reproduce=tuple(gate)))
    doc = value.to_json()
    entry = doc["summary"]["screen"]["inconclusive"]
    need = [c["metrics"][0]["rounds_to_decide"] for c in doc["cells"][:2]]
    assert [doc["cells"][i]["verdict"] for i in entry["cells"]] == ["inconclusive"] * 2
    assert entry["rounds"] == max(need) and all(n > 6 for n in need)
    minutes = -(-7.5 * max(need) // 6)
    assert entry["command"] == [
        *gate[:6],
        "--seed",
        "5",
        "--max-rounds",
        str(max(need)),
        "--budget-min",
        str(int(minutes)),
    ]
    # the figures of the sentence on what inconclusive means: the same as summary.md's
    slowest = need.index(max(need))
    seen = [c["metrics"][0]["could_see_pct"] for c in doc["cells"][:2]]
    assert (entry["gate"], entry["slowest"], entry["slowest_rounds"]) == (True, slowest, 6)
    assert entry["could_see_pct"] == max(seen)
    assert f"a regression of about {max(seen):.1f}% or more" in render_markdown(value)
    # records compared by hand: no gate to run again, the rounds are said
    records = replace(value, reproduce=("diskbench", "compare", "a", "b"))
    assert with_screen(records).to_json()["summary"]["screen"]["inconclusive"] == entry | {
        "command": None,
        "gate": False,
    }
    assert decide_command(["diskbench", "gate", "--base", "x", "--head", "y"], 40, None) == [
        "diskbench",
        "gate",
        "--base",
        "x",
        "--head",
        "y",
        "--max-rounds",
        "40",
    ]

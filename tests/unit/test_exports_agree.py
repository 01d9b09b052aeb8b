"""The exports agree: ``show`` and ``compare`` write BMF of one shape, github-action-benchmark
keeps dd's headline (its write rate, as a cost), CSV holds no float noise and one spelling of a
boolean, and the gate and ``compare`` write JUnit through one writer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from test_exports import BMF_SCHEMA, _out, _record

from harness.record import write_record


@pytest.fixture
def few(tmp_path: Path) -> tuple[Path, Path]:
    """base and head of one raw dd cell, three samples a side (too few for an interval), head 37 % faster."""
    for side, totals in (("base", [2.0, 2.1, 1.9]), ("head", [1.26, 1.3, 1.25])):
        rec = _record("raw", totals)
        write_record(tmp_path / side / f"{rec.cell_id}.json", rec)
    return tmp_path / "base", tmp_path / "head"


def test_show_and_compare_write_bmf_of_one_shape(
    few: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema

    shown = json.loads(_out(capsys, ["show", str(few[1]), "--output-format", "bmf"]))
    compared = json.loads(_out(capsys, ["compare", *map(str, few), "--output-format", "bmf"]))
    for doc in (shown, compared):
        jsonschema.validate(doc, BMF_SCHEMA)
    assert shown.keys() == compared.keys()
    for cell, measures in shown.items():
        assert compared[cell].keys() <= measures.keys()
        for metric, measure in compared[cell].items():
            assert set(measure) == set(measures[metric]) == {"value", "lower_value", "upper_value"}
            assert measure["value"] == measures[metric]["value"]  # head's median
            assert measure["lower_value"] <= measure["value"] <= measure["upper_value"]


def test_github_action_benchmark_keeps_the_dd_write_rate_as_a_cost(
    few: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # compare exports the metrics it compares: the rate among them
    for argv in (["show", str(few[1])], ["compare", *map(str, few), "--metric", "mib_per_s"]):
        entries = json.loads(_out(capsys, [*argv, "--output-format", "github-action-benchmark"]))
        rate = next(e for e in entries if e["name"].endswith(" s_per_gib"))
        # head's median rate 16 / 1.26 MiB/s: 1024 / rate seconds per GiB, smaller is better
        assert rate["unit"] == "s/GiB" and rate["value"] == pytest.approx(1024 / (16 / 1.26))
        assert "inverse of mib_per_s" in rate["extra"]


def test_csv_rounds_away_float_noise_and_writes_booleans_as_json_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = _record("raw", [0.1 + 0.2, 0.19390300000000002, 0.3])
    write_record(tmp_path / "r" / f"{rec.cell_id}.json", rec)
    text = _out(capsys, ["show", str(tmp_path / "r"), "--output-format", "csv"])
    assert "0000000" not in text and "9999999" not in text and "False" not in text and "True" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    total = next(r for r in rows if r["metric"] == "total_s")
    assert total["median"] == "0.3" and total["min"] == "0.193903" and total["higher_is_better"] == "false"
    assert next(r for r in rows if r["metric"] == "mib_per_s")["higher_is_better"] == "true"
    assert next(r for r in rows if r["metric"] == "host.flushes")["median"] == "18"


def test_one_registry_names_every_export_with_its_two_writers() -> None:
    from harness.report.exports import EXPORTS, REGISTRY, exports_help

    assert EXPORTS == ("csv", "bmf", "github-action-benchmark")
    assert all(e.records and e.comparison and e.help for e in REGISTRY.values())
    assert exports_help().startswith("csv: a row per cell and metric; bmf: ")


def test_the_gate_and_compare_write_junit_through_one_writer(tmp_path: Path) -> None:
    """A gate's inconclusive cell ends its message with the gate's command its summary gives."""
    junitparser = pytest.importorskip("junitparser")
    from test_comment_fixtures import comparison

    from harness.report.exports import write_junit

    doc = comparison("real-gate-pairs.json")
    assert doc.summary.screen is not None and doc.summary.screen.inconclusive is not None
    command = doc.summary.screen.inconclusive.command
    assert command is not None
    write_junit(tmp_path / "junit.xml", doc)
    cases = [case for suite in junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml")) for case in suite]
    (skipped,) = [r for case in cases for r in case.result]
    assert skipped.message.endswith("to decide: " + " ".join(command))
    assert "--max-rounds 23" in skipped.message

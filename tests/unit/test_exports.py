"""Exports, each read back by its consumer's own parser or documented structure: CSV by Python's
csv module, BMF against Bencher's documented JSON schema, github-action-benchmark's
customSmallerIsBetter against the fields its parser reads, JUnit XML by junitparser."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from harness.cli import main
from harness.record import Record, Sample, new_record, write_record
from harness.spec import make_cell

# Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format): benchmarks by
# name, measures by name or slug (at most 64 characters), a metric's value required, its lower and
# upper values optional, all numbers
BMF_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "propertyNames": {"minLength": 1, "maxLength": 1024},
    "additionalProperties": {
        "type": "object",
        "propertyNames": {"minLength": 1, "maxLength": 64},
        "additionalProperties": {
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "lower_value": {"type": "number"},
                "upper_value": {"type": "number"},
            },
            "required": ["value"],
            "additionalProperties": False,
        },
    },
}

# github-action-benchmark's BenchmarkResult (src/extract.ts): what its custom tools read
GAB_FIELDS = {"name": str, "value": (int, float), "unit": str}
GAB_OPTIONAL = {"range": str, "extra": str}


def _record(fmt: str, totals: list[float], *, failed: bool = False) -> Record:
    cell = make_cell(format=fmt, workload="dd", dd_mib=16, size="256M")
    rec = new_record(
        cell=cell.as_dict(), machine={"accel": "tcg"}, subject={}, vm={"accel": "tcg"}, run_id="r1"
    )
    for i, total in enumerate(totals):
        metrics = {"total_s": total, "mib_per_s": 16 / total, "host.flushes": 18, "dev.write_p99_ms": 2.5 + i}
        rec = rec.with_sample(Sample(index=i, status="ok", metrics=metrics))
    if failed:
        rec = rec.with_sample(Sample(index=len(totals), status="error", reason="guest hung <&>"))
    return rec


@pytest.fixture
def sides(tmp_path: Path) -> tuple[Path, Path]:
    """base and head: raw unchanged, qcow2 30% slower, with five samples a side."""
    for side, slow in (("base", 1.0), ("head", 1.3)):
        for fmt, factor in (("raw", 1.0), ("qcow2", slow)):
            rec = _record(fmt, [factor * (2.0 + i / 100) for i in range(5)], failed=fmt == "raw")
            write_record(tmp_path / side / f"{rec.cell_id}.json", rec)
    return tmp_path / "base", tmp_path / "head"


def _out(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 0) -> str:
    assert main(argv) == code
    return capsys.readouterr().out


def test_show_csv_is_a_row_per_cell_and_metric(
    sides: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = list(csv.DictReader(io.StringIO(_out(capsys, ["show", str(sides[0]), "--output-format", "csv"]))))
    assert len(rows) == 2 * 4  # two cells, four metrics each
    assert len({(r["cell_id"], r["metric"]) for r in rows}) == len(rows)
    total = next(r for r in rows if r["cell_id"].startswith("raw") and r["metric"] == "total_s")
    assert float(total["median"]) == 2.02 and total["unit"] == "s" and total["n"] == "5"
    assert total["higher_is_better"] == "false" and float(total["min"]) == 2.0
    globbed = list(
        csv.DictReader(
            io.StringIO(_out(capsys, ["show", str(sides[0]), "--output-format", "csv", "--metric", "dev.*"]))
        )
    )
    assert {r["metric"] for r in globbed} == {"dev.write_p99_ms"}


def test_show_bmf_validates_against_bencher_s_structure(
    sides: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(_out(capsys, ["show", str(sides[0]), "--output-format", "bmf"]))
    jsonschema.validate(doc, BMF_SCHEMA)
    raw = next(v for k, v in doc.items() if k.startswith("raw"))
    assert raw["total_s"] == {"value": 2.02, "lower_value": 2.0, "upper_value": 2.04}
    with pytest.raises(jsonschema.ValidationError):  # the schema is no formality
        jsonschema.validate({"cell": {"total_s": {"lower_value": 1.0}}}, BMF_SCHEMA)


def _check_gab(entries: Any) -> list[dict[str, Any]]:
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert set(GAB_FIELDS) <= set(entry) <= set(GAB_FIELDS) | set(GAB_OPTIONAL), entry
        for key, kind in {**GAB_FIELDS, **GAB_OPTIONAL}.items():
            assert key not in entry or isinstance(entry[key], kind), (key, entry)
    return entries


def test_github_action_benchmark_has_only_costs(
    sides: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    entries = _check_gab(
        json.loads(_out(capsys, ["show", str(sides[0]), "--output-format", "github-action-benchmark"]))
    )
    names = {e["name"].split(" ", 1)[1] for e in entries}
    # customSmallerIsBetter: a throughput goes in as its inverse (seconds per GiB), never upside down
    assert names == {"total_s", "dev.write_p99_ms", "host.flushes", "s_per_gib"} and "mib_per_s" not in names
    compared = _out(capsys, ["compare", *map(str, sides), "--output-format", "github-action-benchmark"], 1)
    slow = next(
        e
        for e in _check_gab(json.loads(compared))
        if e["name"].startswith("qcow2") and e["name"].endswith("total_s")
    )
    assert slow["value"] == pytest.approx(2.626) and slow["extra"].startswith("regression, +30.0%")


def test_compare_csv_and_bmf(sides: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rows = list(
        csv.DictReader(io.StringIO(_out(capsys, ["compare", *map(str, sides), "--output-format", "csv"], 1)))
    )
    slow = next(r for r in rows if r["cell_id"].startswith("qcow2") and r["metric"] == "total_s")
    assert slow["verdict"] == "regression" and float(slow["change_pct"]) == pytest.approx(30.0)
    doc = json.loads(_out(capsys, ["compare", *map(str, sides), "--output-format", "bmf"], 1))
    jsonschema.validate(doc, BMF_SCHEMA)
    measure = next(v for k, v in doc.items() if k.startswith("qcow2"))["total_s"]
    assert measure["lower_value"] <= measure["value"] <= measure["upper_value"]


def test_junit_is_a_testcase_per_cell(
    sides: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junitparser = pytest.importorskip("junitparser")
    path = tmp_path / "out" / "junit.xml"
    _out(capsys, ["compare", *map(str, sides), "--junit", str(path)], 1)
    xml = junitparser.JUnitXml.fromfile(str(path))
    cases = {case.name: case for suite in xml for case in suite}
    assert len(cases) == 2
    slow = next(c for n, c in cases.items() if n.startswith("qcow2"))
    fast = next(c for n, c in cases.items() if n.startswith("raw"))
    assert [type(r).__name__ for r in slow.result] == ["Failure"]
    assert "worse by" in slow.result[0].message and slow.classname == "diskbench.dd-16m-2m-ext4"
    assert fast.is_passed


def test_junit_skips_an_inconclusive_cell_with_the_command_that_decides_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junitparser = pytest.importorskip("junitparser")
    for side in ("base", "head"):
        rec = _record("raw", [2.0, 2.1])
        write_record(tmp_path / side / f"{rec.cell_id}.json", rec)
    text = _out(
        capsys, ["compare", str(tmp_path / "base"), str(tmp_path / "head"), "--output-format", "junit"]
    )
    xml = junitparser.JUnitXml.fromstring(text)
    (case,) = [case for suite in xml for case in suite]
    (skipped,) = case.result
    assert isinstance(skipped, junitparser.Skipped)
    assert "n too small" in skipped.message
    assert "to decide: diskbench run --format raw" in skipped.message and "--repeat 4" in skipped.message

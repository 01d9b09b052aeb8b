"""``diskbench compare`` in a terminal: an aligned table of every cell, no markup; --format, --sort, --only-changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_compare import cell_dict, gauss, record, samples, write_side

from harness.cli import main
from harness.compare import Settings
from harness.compare.comparison import compare_paths, load_comparison
from harness.compare.text_table import effect, ordered, render_text
from harness.record import write_record
from harness.units import Style


def sides(tmp_path: Path) -> tuple[Path, Path]:
    """Three cells: dd-64m 30 % slower, dd-128m 10 % slower, dd-192m the same."""
    base, head = tmp_path / "base", tmp_path / "head"
    for k, slower in enumerate((1.3, 1.1, 1.0)):
        cell = cell_dict(dd_mib=64 * (k + 1))
        write_record(base / f"{cell['id']}.json", record(cell, samples(gauss(1 + k, 8, 10.0, 0.004))))
        values = gauss(50 + k, 8, 10.0 * slower, 0.004)
        write_record(head / f"{cell['id']}.json", record(cell, samples(values)))
    return base, head


def test_text_has_no_markup_and_every_cells_figures(tmp_path: Path) -> None:
    base, head = sides(tmp_path)
    doc = compare_paths(base, head, settings=Settings()).comparison
    text = render_text(doc)
    for markup in ("&lt;", "&gt;", "<code>", "`", "##", "| ---", "**"):
        assert markup not in text, markup
    assert text.startswith("diskbench compare: REGRESSION, under KVM\n")
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("cell "))
    assert header.split() == [
        "cell",
        "metric",
        "base",
        "head",
        "change",
        "interval",
        "p",
        "n",
        "verdict",
    ]
    # short names: the parts every cell shares said once above the table
    common = next(line for line in lines if line.startswith("Every cell is "))
    assert "dd-" in common and "2m-ext4" in common
    rows = {line.split()[0]: line for line in lines if "  total_s  " in line}
    # the unchanged cell has its figures too, in human units
    assert set(rows) == {"64m", "128m", "192m"}
    assert "unchanged" in rows["192m"] and "10.0" in rows["192m"]
    assert "regression" in rows["64m"] and "+30." in rows["64m"]
    # aligned: the verdict column starts at the same place on every row
    starts = {
        line.index(word) for line, word in [(header, "verdict")] + [(r, r.split()[-1]) for r in rows.values()]
    }
    assert len(starts) == 1
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100]


def test_sort_by_effect_and_only_changed(tmp_path: Path) -> None:
    base, head = sides(tmp_path)
    doc = compare_paths(base, head, settings=Settings()).comparison
    by_effect = [c.cell_id.split(".dd-")[1][:4] for c in ordered(doc.cells, sort="effect")]
    assert by_effect == ["64m-", "128m", "192m"]
    assert effect(doc.cells[0]) > 0
    by_id = [c.cell_id for c in ordered(doc.cells)]
    assert by_id == sorted(by_id)
    text = render_text(doc, only_changed=True)
    assert "192m" not in text.split("Why:")[0].split("\n\n", 2)[-1]
    assert "(1 unchanged cell not shown: --only-changed)" in text


def test_colour_only_when_the_style_asks(tmp_path: Path) -> None:
    base, head = sides(tmp_path)
    doc = compare_paths(base, head, settings=Settings()).comparison
    assert "\033[" not in render_text(doc)
    painted = render_text(doc, style=Style(True))
    assert "\033[31;1mREGRESSION\033[0m" in painted


def test_cli_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, head = sides(tmp_path)
    out = tmp_path / "out"
    assert main(["compare", str(base), str(head), "--output-format", "json", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == load_comparison(out / "comparison.json").to_json()
    assert captured.err.strip().endswith(f"comparison: {out / 'comparison.json'}")
    assert main(["compare", str(base), str(head), "--sort", "effect", "--only-changed"]) == 1
    text = capsys.readouterr().out
    assert text.startswith("diskbench compare: REGRESSION") and "&lt;" not in text


def test_cli_markdown_is_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_side(tmp_path / "a", 1.0, seed=1)
    head = write_side(tmp_path / "b", 1.3, seed=50)
    assert main(["compare", str(base), str(head), "--output-format", "markdown"]) == 1
    assert capsys.readouterr().out.startswith("## diskbench: REGRESSION — under KVM")


def test_an_empty_side_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    head = write_side(tmp_path / "b", 1.0, seed=1)
    assert main(["compare", str(tmp_path / "empty"), str(head), "--output-format", "text"]) == 2
    assert "no records found" in capsys.readouterr().err

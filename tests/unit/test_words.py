"""What a reader is told in words: no range of one value, no reason that points to something a
user cannot look up, no word of the project's own making in its pages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from harness.compare.markdown import kind_line
from harness.compare.model import SensitivityRow
from harness.compare.verdict import Verdict

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GATE_SPEC = ROOT / "harness" / "data" / "gate.toml"


def _row(cell: str, seen: float) -> SensitivityRow:
    return SensitivityRow(
        cell_id=cell, name=cell, measure="guest", metric="m", verdict=Verdict.UNCHANGED, could_see_pct=seen
    )


def test_could_see_gives_one_value_where_every_cell_could_see_the_same() -> None:
    rows = [_row(name, 5.0) for name in "abcde"]
    assert kind_line(rows) == "Could see: 5 guest cells ≥ 5.0%"
    # the same to the digit shown is one value too
    assert kind_line([_row("a", 5.01), _row("b", 4.98)]) == "Could see: 2 guest cells ≥ 5.0%"
    assert kind_line([_row("a", 5.0), _row("b", 5.2)]) == "Could see: 2 guest cells ≥ 5.0–5.2%"


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_every_reason_a_figure_is_not_gated_points_to_a_section_of_the_docs_never_an_issue() -> None:
    reasons = tomllib.loads(GATE_SPEC.read_text())["information"]
    assert reasons
    pointed = 0
    for metric, reason in reasons.items():
        assert not re.search(r"\bissue\s*#?\d", reason, re.I), f"{metric}: {reason}"
        for page, anchor in re.findall(r"(docs/[\w-]+\.md)#([\w-]+)", reason):
            assert anchor in _headings(ROOT / page), f"{metric}: {page}#{anchor} is no heading"
            pointed += 1
    assert pointed >= 3  # fio's three QD1 latencies say where their spreads are given


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_speak_of_the_project_in_its_own_words(page: Path) -> None:
    text = page.read_text()
    for word in (r"\bissue\s*#?\d+", r"\bthis stop\b", r"\bstop's\b"):
        found = re.search(word, text, re.I)
        assert found is None, f"{page.name}: {text[max(0, found.start() - 40) : found.end() + 40]!r}"


def test_the_axis_sentence_of_a_qemu_upgrade_names_the_guest_cells_not_a_preallocation() -> None:
    """The default gate's eight cells, QEMU 7.2 against 10.0: the five guest cells regressed, the
    replay cells did not; five of the six preallocation=off cells are the guest cells."""
    from harness.compare.axis import axis_sentence
    from harness.compare.model import ComparedCell, FlatCell
    from harness.compare.verdict import Kind

    def cell(axes: str, measure: str | None, verdict: Verdict) -> ComparedCell:
        fmt, prealloc, cache, bus, workload = axes.split()
        flat = FlatCell(
            format=fmt, preallocation=prealloc, cache=cache, interface=bus, workload=workload, measure=measure
        )
        return ComparedCell(cell_id=axes, cell=flat, verdict=verdict, kind=Kind.METRIC, reason="")

    slower = Verdict.REGRESSION
    cells = [
        cell("qcow2 off none virtio-blk fio", None, slower),
        cell("raw off writeback ide fio", None, slower),
        cell("qcow2 off writeback ide dd", None, slower),
        cell("raw off none virtio-blk dd", None, slower),
        cell("qcow2 off none ide dd", None, slower),
        cell("qcow2 off none virtio-blk fio", "replay", Verdict.UNCHANGED),
        cell("raw falloc writeback virtio-blk fio", "replay", Verdict.IMPROVEMENT),
        cell("qcow2 metadata writethrough virtio-blk fio", "replay", Verdict.UNCHANGED),
    ]
    assert axis_sentence(cells) == (
        "Every regressed cell has measure=guest (5 of 5 such cells regressed, 0 of 3 others)."
    )
    # a gate of guest cells only: the measure tells nothing apart
    assert axis_sentence(cells[:5]) is None

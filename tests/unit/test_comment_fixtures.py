"""The gate-comment action's fixtures are documents this diskbench writes.

``real-*.json`` are real comparisons (docs/comparison.md says how they were made;
``real-gate-pairs.json`` a gate of the default spec, guest pairs and replay cells, with the kind of
each cell, the shrink of a pair and the figures not gated); each carries ``summary.screen`` as :mod:`harness.compare.screen`
decides it now.  When they were made no real gate had ended inconclusive or with a head that timed
out, so two more are derived from real ones, and say so:

* ``derived-inconclusive.json``: the four inconclusive cells of ``real-regression.json``, with
  their figures as that comparison reached them (in its family of 32 tests) and the summary of
  those four cells;
* ``derived-timed-out.json``: ``real-gate.json`` with its second cell as the gate writes a head
  whose guest ran past its deadline in the last round (``harness.gate.rounds._timed_out_result``,
  the deadline from base's median ``total_s``), and the budget stopped there;
* ``derived-qemu-upgrade.json``: ``real-gate-pairs.json`` (the default spec's eight cells) as a
  QEMU 7.2 → 10.0 gate read it: head's QEMU 10.0.2, its five guest cells slower crossed
  (``host.workload_s`` +3 … +19 %, each judged by :func:`harness.compare.metric.compare_metric`
  on twelve pairs at the spec's ``crossed_reads``, Holm over the family of 26: three regressed,
  the two read at +3 and +4 % inconclusive, as they may lie below the minimum alone), the replay
  cells unchanged; the summary, axis sentence and screen as this diskbench writes them.

``python tests/unit/test_comment_fixtures.py`` writes the screens and the derived documents again.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.compare.comparison import load_comparison
from harness.compare.document import compared_cell
from harness.compare.model import Comparison
from harness.compare.screen import with_screen
from harness.compare.verdict import Verdict
from harness.gate.rounds import _timed_out_result, head_deadline
from harness.record.model import CellInfo, MachineInfo, Record, Sample
from harness.spec import make_cell

FIXTURES = (
    Path(__file__).resolve().parents[2] / ".github" / "actions" / "gate-comment" / "__tests__" / "fixtures"
)
# the synthetic fixtures of the action's own tests keep their layout
SYNTHETIC = ("regression.json", "unchanged.json")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def comparison(name: str) -> Comparison:
    return load_comparison(FIXTURES / name)


def dump(name: str, doc: Comparison) -> str:
    if name in SYNTHETIC:
        return json.dumps(doc.to_json(), indent=2, ensure_ascii=False) + "\n"
    return json.dumps(doc.to_json(), indent=1) + "\n"  # as harness.files.write_json_atomic writes it


def derived_inconclusive(real: Comparison) -> Comparison:
    keep = tuple(c for c in real.cells if c.verdict is Verdict.INCONCLUSIVE)
    ids = {c.cell_id for c in keep}
    summary = replace(
        real.summary,
        cells=len(keep),
        counts={v: (len(keep) if v == "inconclusive" else 0) for v in real.summary.counts},
        fails=False,
        changed=tuple(c for c in real.summary.changed if c.cell_id in ids),
        structural_changes=tuple(c for c in real.summary.structural_changes if c.cell_id in ids),
        # the axis sentence names what regressed, changed or improved cells share: none of them here
        axis_sentence=None,
        sensitivity=tuple(r for r in real.summary.sensitivity if r.cell_id in ids),
    )
    return with_screen(replace(real, verdict=Verdict.INCONCLUSIVE, cells=keep, summary=summary))


def derived_timed_out(real: Comparison) -> Comparison:
    late = real.cells[1]
    assert late.cell.gate_name == "raw-writeback-ide-dd"
    cell = make_cell(format="raw", cache="writeback", interface="ide", workload="dd", dd_mib=64, size="2G")
    nested = {**cell.as_dict(), "gate_name": late.cell.gate_name}
    assert nested["id"] == late.cell_id
    total = next(m for m in late.metrics if m.metric == "total_s")
    assert total.median_base is not None
    deadline = head_deadline([total.median_base], limit_s=1800.0)
    rounds = late.rounds
    ok = Sample.from_json({"status": "ok"})
    late_one = Sample.from_json({"status": "error", "error_type": "GuestTimeout"})
    base = Record(cell=CellInfo(nested), machine=MachineInfo(), samples=(ok,) * late.base_ok)
    head = Record(cell=CellInfo(nested), machine=MachineInfo(), samples=(ok,) * (rounds - 1) + (late_one,))
    result = _timed_out_result(CellInfo(nested), base, head, deadline)
    cells = list(real.cells)
    cells[1] = compared_cell(replace(result, rounds=rounds))
    summary = replace(
        real.summary,
        sensitivity=tuple(r for r in real.summary.sensitivity if r.cell_id != late.cell_id),
        structural_changes=tuple(c for c in real.summary.structural_changes if c.cell_id != late.cell_id),
    )
    assert real.budget is not None
    budget = replace(
        real.budget, stopped=f"head timed out on {late.cell.gate_name} (deadline {deadline:.0f} s)"
    )
    return with_screen(replace(real, cells=tuple(cells), summary=summary, budget=budget))


# head/base of each guest cell's host.workload_s in the QEMU 7.2 -> 10.0 gate, by gate name
UPGRADE = {
    "policy-fio": 1.150,
    "raw-writeback-ide-fio": 1.128,
    "qcow2-writeback-ide-dd": 1.041,
    "raw-none-virtio-dd": 1.032,
    "qcow2-none-ide-dd": 1.187,
}
# the pairs' own spread around each ratio (a crossed A/A pair's sd is about 1 %)
WOBBLE = (0.0, 0.011, -0.008, 0.004, -0.012, 0.007, -0.003, 0.009, -0.006, 0.002, -0.01, 0.005)


def derived_qemu_upgrade(real: Comparison) -> Comparison:
    from harness.compare import Settings
    from harness.compare.axis import axis_sentence
    from harness.compare.metric import Alone, compare_metric
    from harness.compare.subject import subject_diff

    settings = Settings(seed=303, comparisons=26, crossed_reads=(0.35, 1.5))
    cells = []
    for cell in real.cells:
        ratio = UPGRADE.get(cell.name)
        if ratio is None:
            cells.append(cell)
            continue
        (lead,) = cell.metrics
        assert lead.metric == "host.workload_s" and lead.median_base is not None
        base = [lead.median_base * (1 + w / 2) for w in WOBBLE]
        head = [b * ratio * (1 + w) for b, w in zip(base, reversed(WOBBLE), strict=True)]
        alone = Alone(reads=settings.crossed_reads)
        first = compare_metric(
            lead.metric, base, head, settings=settings, paired=True, together=True, alone=alone
        )
        p_adjusted = min(1.0, (first.p_value or 1.0) * settings.comparisons)
        result = compare_metric(
            lead.metric,
            base,
            head,
            settings=settings,
            paired=True,
            together=True,
            alone=alone,
            p_adjusted=p_adjusted,
        )
        figures = result
        assert figures.verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE), figures.reason
        cells.append(
            replace(
                cell,
                verdict=figures.verdict,
                time_verdict=figures.verdict,
                reason=f"{lead.metric}: {figures.reason}",
                rounds=len(base),
                base_ok=len(base),
                head_ok=len(head),
                metrics=(figures,),
            )
        )
    machine = real.head.machine.to_json()
    upgraded = replace(
        real.head,
        qemu="/opt/qemu-10.0.2/bin/qemu-system-x86_64",
        machine=MachineInfo(
            {**machine, "qemu": "/opt/qemu-10.0.2/bin/qemu-system-x86_64", "qemu_version": "10.0.2"}
        ),
    )
    counts = {v: sum(1 for c in cells if c.verdict.value == v) for v in real.summary.counts}
    sensitivity = []
    for row in real.summary.sensitivity:
        cell = next(c for c in cells if c.cell_id == row.cell_id)
        figure = cell.figure(row.metric)
        assert figure is not None
        sensitivity.append(
            replace(
                row,
                rounds=cell.rounds,
                verdict=figure.verdict,
                could_see_pct=figure.could_see_pct,
                rounds_to_decide=figure.rounds_to_decide,
            )
        )
    summary = replace(
        real.summary,
        cells=len(cells),
        counts=counts,
        fails=True,
        axis_sentence=axis_sentence(cells),  # type: ignore[arg-type]
        subject_diff=tuple(subject_diff(real.base, upgraded)),
        sensitivity=tuple(sensitivity),
    )
    return with_screen(
        replace(real, verdict=Verdict.REGRESSION, head=upgraded, cells=tuple(cells), summary=summary)
    )


def expected() -> dict[str, str]:
    """Every fixture's text as this diskbench writes it."""
    texts = {
        path.name: dump(path.name, with_screen(comparison(path.name))) for path in FIXTURES.glob("*.json")
    }
    texts["derived-inconclusive.json"] = dump("", derived_inconclusive(comparison("real-regression.json")))
    texts["derived-timed-out.json"] = dump("", derived_timed_out(comparison("real-gate.json")))
    texts["derived-qemu-upgrade.json"] = dump("", derived_qemu_upgrade(comparison("real-gate-pairs.json")))
    return texts


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.json")))
def test_a_comparison_reads_and_writes_back_byte_for_byte(name: str) -> None:
    """Every comparison the action is tested on, loaded as a value and written back, is the very
    same text: no key lost, added or moved, no figure rewritten."""
    assert dump(name, comparison(name)) == (FIXTURES / name).read_text()


@pytest.mark.parametrize("name", sorted(expected()))
def test_a_fixture_is_what_this_diskbench_writes(name: str) -> None:
    assert (FIXTURES / name).read_text() == expected()[name], (
        f"{name}: run `python tests/unit/test_comment_fixtures.py` and look at the diff"
    )


def test_the_derived_fixtures_are_the_comparisons_they_say() -> None:
    late = load("derived-timed-out.json")
    (cell,) = [c for c in late["cells"] if c["kind"] == "head-timed-out"]
    assert cell["title"] == "raw writeback ide · dd 64M" and cell["metrics"] == []
    assert cell["reason"].startswith("head's guest ran past its deadline of 83 s (10 x base's median")
    assert (cell["head_ok"], cell["head_failed"], cell["base_ok"]) == (5, 1, 6)
    assert late["summary"]["screen"]["first"][0] == {
        "cell": 1,
        "metric": None,
        "said": "head's guest ran past its deadline of 83 s",
    }
    open_ = load("derived-inconclusive.json")
    assert open_["verdict"] == "inconclusive" and open_["summary"]["counts"]["inconclusive"] == 4
    assert [c["cell_id"] for c in open_["cells"]] == [
        c["cell_id"] for c in load("real-regression.json")["cells"] if c["verdict"] == "inconclusive"
    ]
    assert open_["summary"]["screen"]["inconclusive"]["rounds"] == 99


if __name__ == "__main__":
    for fixture, text in expected().items():
        (FIXTURES / fixture).write_text(text)
        print(f"wrote {FIXTURES / fixture}", file=sys.stderr)

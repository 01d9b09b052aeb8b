"""A head cannot measure itself, nor stall the gate: attacks on the gate's figures and its time.

A pull request's ``images/init`` reports the head's own ``total_s``: divided by ten, it made the
head "faster".  A ``throttling.bps-total = 1`` head held the runner for hours.  Samples here are
synthetic (no guest runs); the gate's rounds, judge and comparison are the real ones.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tcgopts import tcg_options

from harness.compare import Comparison, Settings, render_markdown
from harness.compare.comparison import verdict_exit_code
from harness.errors import ProtocolError
from harness.gate import GateAsked, GateOptions, GateSide, Subject, parse_gate_spec, run_rounds, settings_for
from harness.gate.judge import decide_judge, guest_word_document, render_guest_word
from harness.gate.rounds import head_deadline
from harness.gate.run import comparison_document
from harness.paths import REPO_ROOT
from harness.record import CellInfo, MachineInfo, Record, Sample
from harness.rounds.cell import clock_disagreement
from harness.rounds.session import MachineOptions, Session
from harness.sample.protocol import parse_report
from harness.spec import Cell
from harness.subject.binaries import Binaries
from harness.subject.policy import parse_policy
from harness.untrusted import inert_markdown

SPEC = """
rounds = 8
max_rounds = 8
budget_min = 20
metrics = ["total_s", "dev.write_p90_ms", "fio.raw-rand-write-qd1.clat_p50_ms"]
[params]
dd_mib = 64
[[cells]]
name = "policy"
workload = "dd"
"""


def report(metrics: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": "report", "workload": "dd", "status": "ok", "phases": {"write": {"s": 1.0, "rc": 0}},
        "total_s": 1.0, "metrics": metrics,
    }  # fmt: skip


@pytest.mark.parametrize(
    "name", ["host.workload_s", "dev.write_p90_ms", "total_s", "fio.x.iops", "phase.write_s", "Bytes"]
)
def test_a_guest_metric_in_a_namespace_of_the_hosts_is_a_protocol_error(name: str) -> None:
    with pytest.raises(ProtocolError, match="is not a name of the guest's own"):
        parse_report(report({name: 0.01}), workload="dd")
    assert parse_report(report({"mib_per_s": 3.0}), workload="dd").metrics == {"mib_per_s": 3.0}


def test_run_and_sweep_say_where_the_guests_time_and_the_hosts_clock_disagree() -> None:
    assert clock_disagreement({"total_s": 4.8, "phase.fsck_s": 0.3, "host.workload_s": 5.4}) is None
    line = clock_disagreement({"total_s": 0.048, "host.workload_s": 0.702})
    assert (
        line is not None
        and "the guest says 0.05 s" in line
        and "the host clocked its workload at 0.70 s" in line
    )
    # under the margin (20 % + 0.5 s): a short workload's boot noise is no disagreement
    assert clock_disagreement({"total_s": 0.3, "host.workload_s": 0.75}) is None


def test_with_another_guest_the_guests_figures_give_way_to_the_hosts() -> None:
    settings = Settings(metrics=("total_s", "dev.write_p90_ms", "fio.raw-rand-write-qd1.clat_p50_ms"))
    same = decide_judge(settings, base_guest="a" * 64, head_guest="a" * 64)
    assert same.settings == settings and same.warnings == []
    other = decide_judge(settings, base_guest="a" * 64, head_guest="b" * 64)
    assert other.settings.metrics == ("host.workload_s", "dev.write_p90_ms")
    assert other.guest_word == ("total_s", "fio.raw-rand-write-qd1.clat_p50_ms")
    assert (
        "the verdict rests on what the host measures (host.workload_s, dev.write_p90_ms)" in other.warnings[0]
    )


@dataclass
class _Side(Session):
    """Synthetic samples: the host's clock and the device's latency the same for both sides; the
    guest's ``total_s`` divided by ``forge`` (its own word); head slower than its deadline if
    ``stall``."""

    label: str = ""
    forge: float = 1.0
    stall: bool = False

    def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, Record]:
        record = kw["existing"] or Record(cell=CellInfo(cell.as_dict()), machine=MachineInfo())
        for index in range(len(record.samples), kw["upto"]):
            rng = random.Random(f"{self.label}{cell.id}{index}")
            host_s = rng.uniform(4.95, 5.05)
            if self.stall:
                record = record.with_sample(
                    Sample.from_json(
                        {
                            "index": index,
                            "status": "error",
                            "error_type": "GuestTimeout",
                            "reason": f"no workload report from the guest within {self.opts.workload_timeout_s:g} s",
                            "deadline": self.opts.workload_timeout_s,
                        }
                    )
                )
                continue
            metrics = {
                "total_s": (host_s - 0.3) / self.forge,
                "host.workload_s": host_s,
                "dev.write_p90_ms": rng.uniform(0.99, 1.01),
            }
            record = record.with_sample(Sample(index=index, status="ok", metrics=metrics))
        return kw["where"].path(cell.id), record


def _gate(
    tmp_path: Path, *, forge: float = 1.0, stall: bool = False, head_guest: str = "b" * 64
) -> Comparison:
    """A gate of synthetic sides, judged as a real one is; returns its comparison."""
    spec = parse_gate_spec(SPEC, source="g.toml")
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    opts = tcg_options(Path("/w"), Path("/r"), run_id="x", accel_reason="t")
    sides = {}
    for label in ("base", "head"):
        session = _Side(
            guest=None,  # type: ignore[arg-type]
            opts=opts,
            machine=MachineInfo(),
            label=label,
            forge=forge if label == "head" else 1.0,
            stall=stall and label == "head",
        )
        subject = Subject(label, label, "0" * 40, Path("/c"), policy, Path("/i"), None, None)
        sides[label] = GateSide(
            subject=subject, session=session, cells={gc.name: gc.resolve(policy) for gc in spec.cells}
        )
    judge = decide_judge(
        settings_for(spec, Settings(), metrics_given=False), base_guest="a" * 64, head_guest=head_guest
    )
    options = GateOptions.decide(
        spec,
        MachineOptions(
            binaries=Binaries.on_path(),
            work_dir=Path("/w"),
            results_dir=Path("/r"),
            workload_timeout_s=1800.0,
        ),
        GateAsked(seed=5),
    )
    played = run_rounds(
        spec,
        sides,
        judge.settings,
        options,
        out_dir=tmp_path,
        started=time.monotonic(),
        progress=lambda _m: None,
    )
    return comparison_document(
        spec,
        sides,
        played,
        judge=judge,
        options=options,
        canary=None,
        elapsed_s=1.0,
    )


def test_a_head_that_divides_its_own_total_s_by_ten_gets_the_verdict_of_one_that_does_not(
    tmp_path: Path,
) -> None:
    honest_value = _gate(tmp_path / "honest")
    forged_value = _gate(tmp_path / "forged", forge=10.0)
    honest, forged = honest_value.to_json(), forged_value.to_json()
    assert honest["verdict"] == forged["verdict"] == "unchanged"
    assert [c["verdict"] for c in honest["cells"]] == [c["verdict"] for c in forged["cells"]]
    assert verdict_exit_code(forged_value) == 0 and verdict_exit_code(honest_value) == 0
    # the forged figure is shown, as the guest's own word, and the summary says what decided
    (row,) = [r for r in forged["guest_word"]["rows"] if r["metric"] == "total_s"]
    assert row["change_pct"] == pytest.approx(-90, abs=3)
    summary = render_markdown(forged_value) + render_guest_word(forged_value.guest_word)
    assert "the verdict rests on what the host measures (host.workload_s, dev.write_p90_ms)" in summary
    assert "### The head's guest's own word (not gated)" in summary
    # with the same guest on both sides (a harness-only change), the guest's figures gate as before
    same = _gate(tmp_path / "same", forge=10.0, head_guest="a" * 64).to_json()
    assert same["verdict"] == "improvement"
    assert "guest_word" not in same


def test_a_head_past_its_deadline_from_base_is_a_regression_of_its_own_kind(tmp_path: Path) -> None:
    value = _gate(tmp_path, stall=True)
    doc = value.to_json()
    (cell,) = doc["cells"]
    assert (cell["verdict"], cell["kind"]) == ("regression", "head-timed-out")
    assert doc["budget"]["stopped"].startswith("head timed out on policy (deadline ")
    assert verdict_exit_code(value) == 1
    # its axes are flat as every cell's: it has its short name, and the summary names it by it
    assert cell["cell"]["workload"] == "dd-64m-2m-ext4" and cell["cell"]["gate_name"] == "policy"
    assert cell["title"] == "qcow2 none virtio-blk · dd 64M"
    lines = render_markdown(value).splitlines()
    assert lines[0].startswith("## diskbench: REGRESSION (head timed out: qcow2 none virtio-blk · dd 64M)")
    assert lines[4] == (
        "- **qcow2 none virtio-blk · dd 64M**: head's guest ran past its deadline of 110 s, "
        "regression (head-timed-out)"
    )
    # one head sample ran, not eight: the rounds stop at the first timeout
    assert cell["head_failed"] == 1


def test_a_head_samples_deadline_follows_from_bases_times() -> None:
    assert head_deadline([5.0, 4.0, 6.0], limit_s=1800.0) == 110.0
    assert head_deadline([500.0], limit_s=1800.0) == 1800.0
    assert head_deadline([], limit_s=300.0) == 300.0


def test_a_hostile_cell_name_is_inert_in_the_guests_own_word_as_in_the_comparison() -> None:
    settings = settings_for(parse_gate_spec(SPEC, source="test.toml"), Settings())
    judge = decide_judge(settings, base_guest="a" * 64, head_guest="b" * 64)
    name = "*b* _u_ ~s~ # x|y <img src=a>"
    ok = [Sample(status="ok", metrics={"total_s": 2.0})]
    doc = guest_word_document(judge, [(name, ok, ok)])
    assert doc is not None
    (row,) = [line for line in render_guest_word(doc).splitlines() if "img" in line]
    inert = "\\*b\\* \\_u\\_ \\~s\\~ \\# x\\|y &lt;img src=a&gt;"
    # the one escaper of every Markdown writer: a table row of five columns, the name inert
    assert inert_markdown(name) == inert
    assert row == f"| {inert} | total_s | 2.00 s | 2.00 s | +0.0% |"

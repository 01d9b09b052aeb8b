"""Guest cells taken in pairs: pinned together, tested on the pairs' ratios scaled to the size
alone, gated on what can decide, with the rest shown as information."""

from __future__ import annotations

import functools
import math
import random
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from gatekit import fake_sides
from tcgopts import tcg_options

from harness.compare import Settings, Verdict, compare_family, compare_metric
from harness.compare.document import compared_cell
from harness.compare.markdown import kind_line
from harness.compare.metric import Alone
from harness.compare.model import SensitivityRow
from harness.compare.rules import shrink_of, taken_together
from harness.errors import SpecError
from harness.gate import SIDES, GateAsked, GateOptions, GateSide, Subject, parse_gate_spec, run_rounds
from harness.gate.judge import decide_judge
from harness.gate.run import guest_pairs
from harness.paths import REPO_ROOT
from harness.record import CellInfo, MachineInfo, Record, Sample
from harness.rounds.session import MachineOptions, Session
from harness.sample.guest_sampler import sample_metrics
from harness.sample.protocol import GuestReport
from harness.sample.vm.cpu import alone_s, cpu_times
from harness.sample.vm.machine import _before_exec
from harness.spec import Cell, Measure, make_cell
from harness.subject.binaries import Binaries
from harness.subject.policy import parse_policy

MACHINE = MachineOptions(binaries=Binaries.on_path(), work_dir=Path("/w"), results_dir=Path("/r"))
OPTS = tcg_options(Path("/w"), Path("/r"), run_id="x")
SPEC = """
rounds = 3
max_rounds = 3
guest_together = true
metrics = ["host.workload_s", "replay.wall_s"]
[information]
"total_s" = "the guest's own clock"
[params]
dd_mib = 64
[[cells]]
name = "dd"
workload = "dd"
[[cells]]
name = "apart"
workload = "dd"
cache = "writeback"
together = false
metrics = ["total_s"]
[[cells]]
name = "replayed"
workload = "dd"
measure = "replay"
"""


def test_the_spec_says_which_guest_cells_run_together_and_what_each_gates() -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    assert spec.guest_pairs == ["dd"]  # "apart" says no, a replay cell is no guest pair
    assert spec.cell_metrics == {"apart": ("total_s",)}
    assert spec.information == {"total_s": "the guest's own clock"}
    assert "metrics" not in spec.cells[1].values and "together" not in spec.cells[1].values
    with pytest.raises(SpecError, match=r"cells\[1\] \(dd\): together = 'yes': use true or false"):
        parse_gate_spec(
            SPEC.replace(
                'workload = "dd"\n[[cells]]\nname = "apart"',
                'workload = "dd"\ntogether = "yes"\n[[cells]]\nname = "apart"',
            ),
            source="g.toml",
        )
    with pytest.raises(SpecError, match=r"cells\[2\] \(apart\): metrics"):
        parse_gate_spec(
            SPEC.replace('metrics = ["total_s"]', 'metrics = ["no.such_metric"]'), source="g.toml"
        )
    with pytest.raises(SpecError, match="information must be a table"):
        parse_gate_spec(
            SPEC.replace('"total_s" = "the guest\'s own clock"', '"total_s" = 3'), source="g.toml"
        )


@dataclass
class _Session(Session):
    label: str = ""
    seen: Any = None
    # the workload deadline each sample was given, and a head that runs past it from this round on
    deadlines: Any = None
    late_from: int = 0

    def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, Record]:
        record = kw["existing"] or Record(cell=CellInfo(cell.as_dict()), machine=MachineInfo())
        for index in range(len(record.samples), kw["upto"]):
            self.seen(self.label, cell, kw.get("sampler"))
            if self.deadlines is not None:
                self.deadlines.append((self.label, self.opts.workload_timeout_s))
            if self.late_from and index + 1 >= self.late_from and cell.measure is not Measure.REPLAY:
                late = Sample(index=index, status="error", error_type="GuestTimeout", reason="late")
                record = record.with_sample(late)
                continue
            value = random.Random(f"{self.label}{cell.id}{index}").uniform(0.5, 1.5)
            metric = "replay.wall_s" if cell.measure is Measure.REPLAY else "host.workload_s"
            record = record.with_sample(Sample(index=index, status="ok", metrics={metric: value}))
        return kw["where"].path(cell.id), record


def _fake_sides(spec: Any, seen: Any) -> dict[str, GateSide]:
    """Both sides of a gate of ``spec`` on fake sessions that call ``seen`` at every sample."""
    return fake_sides(
        spec,
        lambda label: _Session(guest=None, opts=OPTS, machine=MachineInfo(), label=label, seen=seen),  # type: ignore[arg-type]
    )


def test_a_guest_pairs_head_past_its_deadline_ends_the_rounds_as_a_regression(tmp_path: Path) -> None:
    spec = parse_gate_spec(
        SPEC.replace("rounds = 3\nmax_rounds = 3", "rounds = 4\nmax_rounds = 4"), source="g.toml"
    )
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    deadlines: list[tuple[str, float]] = []
    sides = {}
    for label in SIDES:
        subject = Subject(label, label, "0" * 40, Path("/c"), policy, Path("/i"), None, None)
        session = _Session(
            guest=None, opts=OPTS, machine=MachineInfo(), label=label, seen=lambda *_a: None,  # type: ignore[arg-type]
            deadlines=deadlines, late_from=3 if label == "head" else 0,
        )  # fmt: skip
        sides[label] = GateSide(
            subject=subject, session=session, cells={gc.name: gc.resolve(policy) for gc in spec.cells}
        )
    guest_pairs(spec, sides)
    only = replace(spec, cells=tuple(c for c in spec.cells if c.name == "dd"))
    options = GateOptions.decide(only, MACHINE, GateAsked(seed=5))
    done = run_rounds(
        only, sides, Settings(metrics=spec.metrics), options, out_dir=tmp_path, started=time.monotonic(),
        progress=lambda _m: None,
    )  # fmt: skip
    (result,) = done.results
    assert result.verdict is Verdict.REGRESSION and result.kind.value == "head-timed-out"
    assert done.stopped.startswith("head timed out on dd")
    # head's deadline follows base's times once base has some (10 x its median + 60 s, here about
    # 70 s), base's is what is left of the run's own
    head = [d for label, d in deadlines if label == "head"]
    assert len(head) == 3 and max(head[1:]) < 80.0
    assert min(d for label, d in deadlines if label == "base") > 80.0


def test_a_guest_pair_runs_both_sides_at_the_same_moment_with_a_shared_pairing(tmp_path: Path) -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    lock = threading.Lock()
    inside: dict[str, int] = {}
    most: dict[str, int] = {}
    samplers: dict[tuple[str, str], Any] = {}

    def seen(label: str, cell: Cell, sampler: Any) -> None:
        samplers[(label, cell.id)] = sampler
        with lock:
            inside[cell.id] = inside.get(cell.id, 0) + 1
            most[cell.id] = max(most.get(cell.id, 0), inside[cell.id])
        time.sleep(0.05)
        with lock:
            inside[cell.id] -= 1

    sides = _fake_sides(spec, seen)
    guest_pairs(spec, sides)
    assert sides["base"].together["dd"] is sides["head"].together["dd"]
    assert "apart" not in sides["base"].together
    options = GateOptions.decide(spec, MACHINE, GateAsked(seed=5))
    done = run_rounds(
        spec, sides, Settings(metrics=spec.metrics), options, out_dir=tmp_path, started=time.monotonic(),
        progress=lambda _m: None,
    )  # fmt: skip
    dd, apart = sides["head"].cells["dd"].id, sides["head"].cells["apart"].id
    # the pair's two samples overlapped; the cell taken apart never did
    assert most[dd] == 2 and most[apart] == 1
    assert samplers[("base", dd)] is not None and samplers[("base", apart)] is None
    assert {r.cell_id: r.rounds for r in done.results}[dd] == 3


def test_qemu_runs_on_the_pairs_cpu_with_every_thread_it_starts() -> None:
    cpu = max(__import__("os").sched_getaffinity(0))
    out = subprocess.run(
        ["grep", "Cpus_allowed_list", "/proc/self/status"],
        preexec_fn=functools.partial(_before_exec, (cpu,)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["Cpus_allowed_list:", str(cpu)]


def test_cpu_times_read_the_process_and_its_vcpu_threads(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    tick = __import__("os").sysconf("SC_CLK_TCK")
    (proc / "42" / "task").mkdir(parents=True)
    # utime 3 s and stime 1 s, in ticks; the command name holds a space and a parenthesis
    fields = ["S", *["0"] * 10, str(3 * tick), str(1 * tick), *["0"] * 30]
    (proc / "42" / "stat").write_text(f"42 (qemu (x) y) {' '.join(fields)}\n")
    for tid, name, run_ns, wait_ns in (("42", "qemu-system-x86", 9, 9), ("43", "CPU 0/TCG", 2e9, 5e8)):
        task = proc / "42" / "task" / tid
        task.mkdir()
        (task / "comm").write_text(name + "\n")
        (task / "schedstat").write_text(f"{int(run_ns)} {int(wait_ns)} 7\n")
    got = cpu_times(42, proc)
    assert got is not None
    assert got.cpu_s == 4.0 and got.vcpu_run_s == 2.0 and got.vcpu_wait_s == 0.5
    assert cpu_times(7, proc) is None


def _alone(workload_s: float, vcpu_wait_s: float) -> float | None:
    report = GuestReport(
        workload="dd", status="ok", phases=(), total_s=1.0, metrics={}, fsck_rc=0, kernel="6.1",
        mem_kib=None, ncpu=1, error=None, clock=None, raw={},
    )  # fmt: skip
    host = {
        "workload_s": workload_s,
        "cpu": {"qemu_cpu_s": 2.5, "vcpu_run_s": 1.5, "vcpu_wait_s": vcpu_wait_s},
    }
    metrics = sample_metrics(report, host)
    assert metrics["host.workload_cpu_s"] == 2.5
    return metrics.get("host.workload_alone_s")


def test_a_workloads_time_alone_is_its_time_less_its_vcpus_waits_within_its_window() -> None:
    assert _alone(2.0, 0.5) == 1.5
    assert _alone(2.0, 0.0) == 2.0 and _alone(2.0, 2.0) == 0.0
    assert alone_s(2.0, 0.5) == 1.5
    # waits that come to more than the workload's time were not all the workload's (the kernel adds a
    # wait when it ends): not a figure that could read below zero
    assert _alone(2.0, 2.19) is None and alone_s(2.0, 2.19) is None
    assert _alone(2.0, -0.01) is None


def _together(host: dict[str, Any] | None = None) -> Sample:
    return Sample(status="ok", host=host if host is not None else {"together": {"cpu": 1, "met": True}})


def test_a_guest_sample_is_taken_together_only_when_it_met_its_partner() -> None:
    assert taken_together(_together())
    assert not taken_together(_together({"together": {"cpu": 1, "met": False}}))
    assert not taken_together(Sample(status="ok"))
    settings = Settings()
    assert shrink_of("host.workload_s", [_together()], settings) == 2.0
    # the side's own CPU time and its time less its vCPUs' waits count no partner's share
    assert shrink_of("host.workload_cpu_s", [_together()], settings) == 1.0
    assert shrink_of("host.workload_alone_s", [_together()], settings) == 1.0
    replayed = Sample(status="ok", replay={"passes_together": 1, "pass_wall_s": [1.0]})
    assert taken_together(replayed) and shrink_of("replay.wall_s", [replayed], settings) == 1.0


def _pairs(ratio: float, n: int = 8, sd: float = 0.004, seed: int = 1) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    base = [rng.uniform(5.0, 10.0) for _ in range(n)]  # the host's noise: common to both sides
    return base, [b * ratio * math.exp(rng.gauss(0.0, sd)) for b in base]


def test_a_true_5_percent_shrunk_to_half_by_sharing_is_never_called_unchanged() -> None:
    settings = Settings(metrics=("host.workload_s",))
    base, head = _pairs(1.025)  # +5 % alone, read as +2.5 % on one shared CPU
    kw: dict[str, Any] = {"settings": settings, "paired": True, "together": True}
    plain = compare_metric("host.workload_s", base, head, **kw)
    assert plain.verdict is Verdict.UNCHANGED  # taken at face value: a 5 % change called unchanged
    scaled = compare_metric("host.workload_s", base, head, **kw, alone=Alone(2.0))
    assert scaled.verdict is not Verdict.UNCHANGED, scaled.reason
    assert scaled.ratio is not None and scaled.measured_change_pct is not None
    measured = 1 + scaled.measured_change_pct / 100
    assert math.log(scaled.ratio) == pytest.approx(2 * math.log(measured), abs=1e-5)
    assert scaled.shrink == 2.0
    # a figure that is not scaled writes neither
    assert plain.shrink is None and plain.measured_change_pct is None
    assert "the size alone of a CPU-bound change: +2.5% as measured together" in scaled.reason
    # the same test: sharing changes the size, not the evidence
    assert scaled.p_value == plain.p_value
    # an A/A pair stays unchanged when it is tight enough
    base, head = _pairs(1.0, n=12, sd=0.006)
    assert compare_metric("host.workload_s", base, head, **kw, alone=Alone(2.0)).verdict is Verdict.UNCHANGED


def test_a_cell_gates_its_own_metrics_and_shows_the_others_with_why() -> None:
    settings = Settings(
        metrics=("host.workload_s",),
        cell_metrics={"fio-cell": ("total_s",)},
        information={"dev.write_p90_ms": "too noisy here"},
    )
    rng = random.Random(4)
    base = [
        Sample(index=i, status="ok", metrics={"host.workload_s": 10.0, "total_s": 9.0 + 0.01 * i,
               "dev.write_p90_ms": rng.uniform(1, 9)})
        for i in range(8)
    ]  # fmt: skip
    head = [replace(s, metrics={**s.metrics, "dev.write_p90_ms": rng.uniform(1, 9)}) for s in base]
    cell = make_cell(workload="dd", dd_mib=64).as_dict()
    plain, own = compare_family(
        [
            (CellInfo({**cell, "gate_name": "dd-cell"}), base, head),
            (CellInfo({**cell, "gate_name": "fio-cell"}), base, head),
        ],
        settings=settings,
    )
    assert [m.metric for m in plain.metrics] == ["host.workload_s"]
    assert [m.metric for m in own.metrics] == ["total_s"]
    # the noisy latency decides nothing: the cell is unchanged
    assert plain.verdict is Verdict.UNCHANGED and own.verdict is Verdict.UNCHANGED
    shown = {m.metric: m.information for m in plain.information}
    assert shown == {
        "dev.write_p90_ms": "too noisy here",
        "total_s": "not gated in this cell, which gates host.workload_s",
    }
    assert {m.metric for m in own.information} == {"host.workload_s", "dev.write_p90_ms"}
    assert compared_cell(plain).to_json()["information"][0]["information"] == "too noisy here"


def test_a_guest_that_differs_gives_way_to_the_host_clock_in_every_cell() -> None:
    settings = Settings(
        metrics=("total_s",), cell_metrics={"fio": ("fio.raw-rand-write-qd1.clat_p50_ms", "dev.write_p90_ms")}
    )
    judge = decide_judge(settings, base_guest="a", head_guest="b")
    assert judge.settings.metrics == ("host.workload_s",)
    assert judge.settings.cell_metrics == {"fio": ("host.workload_s", "dev.write_p90_ms")}
    assert set(judge.guest_word) == {"total_s", "fio.raw-rand-write-qd1.clat_p50_ms"}


def test_the_headline_line_says_what_each_kind_of_cell_could_see() -> None:
    def row(cell: str, measure: str, seen: float | None) -> SensitivityRow:
        return SensitivityRow(
            cell_id=cell,
            name=cell,
            measure=measure,
            metric="m",
            verdict=Verdict.UNCHANGED,
            could_see_pct=seen,
        )

    rows = [
        row("a", "guest", 6.04),
        row("a", "guest", 30.0),  # its less sensitive metric
        row("b", "guest", 9.5),
        row("r", "replay", 2.25),
        row("s", "replay", None),
    ]
    assert kind_line(rows) == "Could see: 2 guest cells ≥ 6.0–9.5%; 1 replay cell ≥ 2.2%"
    assert kind_line([]) == ""


SLOTS_SPEC = """
rounds = 3
max_rounds = 3
guest_together = true
metrics = ["host.workload_s", "replay.wall_s"]
[params]
dd_mib = 64
[[cells]]
name = "a"
workload = "dd"
[[cells]]
name = "b"
workload = "dd"
cache = "writeback"
[[cells]]
name = "c"
workload = "dd"
cache = "writethrough"
[[cells]]
name = "replayed"
workload = "dd"
measure = "replay"
"""


def _slots_run(
    tmp_path: Path, spec_text: str, slots: list[tuple[int, int]]
) -> tuple[dict[str, int], int, Any]:
    """Run ``spec_text``'s rounds on fake sessions with crossed pairs on ``slots``: the most samples
    of each cell at one moment, the most cells at one moment, the sides."""
    spec = parse_gate_spec(spec_text, source="g.toml")
    lock = threading.Lock()
    inside: dict[str, int] = {}
    most: dict[str, int] = {}
    cells_most = [0]

    def seen(_label: str, cell: Cell, _sampler: Any) -> None:
        with lock:
            inside[cell.id] = inside.get(cell.id, 0) + 1
            most[cell.id] = max(most.get(cell.id, 0), inside[cell.id])
            cells_most[0] = max(cells_most[0], sum(1 for v in inside.values() if v))
        time.sleep(0.05)
        with lock:
            inside[cell.id] -= 1

    sides = _fake_sides(spec, seen)
    guest_pairs(spec, sides, slots=slots)
    options = GateOptions.decide(spec, MACHINE, GateAsked(seed=5))
    done = run_rounds(
        spec, sides, Settings(metrics=spec.metrics), options, out_dir=tmp_path, started=time.monotonic(),
        progress=lambda _m: None,
    )  # fmt: skip
    assert {r.rounds for r in done.results} == {3}
    return most, cells_most[0], sides


def test_a_runner_with_cpus_for_several_crossed_pairs_runs_them_at_once(tmp_path: Path) -> None:
    slots = [(6, 7), (4, 5), (2, 3)]
    most, cells_most, sides = _slots_run(tmp_path / "three", SLOTS_SPEC, slots)
    # each cell's two sides together, the three guest cells at once, each on a CPU pair of its own
    assert max(most.values()) == 2 and cells_most == 3
    cpus = {name: sides["base"].together[name].cross for name in ("a", "b", "c")}
    assert sorted(cpus.values()) == sorted(slots)
    for name in ("a", "b", "c"):
        records = sides["base"].records[name].samples
        assert [s.index for s in records] == [0, 1, 2]
    # the spec may hold it to fewer: two pairs at once, the third cell shares a CPU pair with the first
    _most, cells_most, sides = _slots_run(tmp_path / "two", "guest_pairs_at_once = 2\n" + SLOTS_SPEC, slots)
    assert cells_most == 2
    assert sides["base"].together["a"].cross == sides["base"].together["c"].cross == (6, 7)
    # a runner with one CPU pair plays them one after the other, as ever
    _most, cells_most, _sides = _slots_run(tmp_path / "one", SLOTS_SPEC, [(0, 1)])
    assert cells_most == 1


def test_the_cpu_pairs_of_a_runner() -> None:
    from harness.sample.pairing import crossed_slots

    assert crossed_slots([0, 1]) == [(0, 1)]
    assert crossed_slots([0]) == []
    assert crossed_slots([0, 1, 2, 3]) == [(2, 3)]  # CPU 0 left to the host
    assert crossed_slots(list(range(8))) == [(6, 7), (4, 5), (2, 3)]
    assert len(crossed_slots(list(range(16)))) == 7
    with pytest.raises(SpecError, match=r'guest_pairs_at_once = 0: use "auto" or a number of pairs from 1'):
        parse_gate_spec("guest_pairs_at_once = 0\n" + SLOTS_SPEC, source="g.toml")

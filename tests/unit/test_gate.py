"""The gate's pure parts: its spec, per-side cells, settings, the canary's judgement."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.compare import ComparedCell, Figures, Kind, Settings, Verdict
from harness.compare.model import FlatCell
from harness.errors import SpecError
from harness.gate import (
    GATE_SPEC,
    SIDES,
    GateAsked,
    GateOptions,
    GateSide,
    GateSpec,
    Stop,
    Subject,
    judge_canary,
    load_gate_spec,
    parse_gate_spec,
    run_rounds,
    settings_for,
    stop_before,
)
from harness.paths import REPO_ROOT
from harness.record import CellInfo, MachineInfo, Record, Sample
from harness.rounds.session import MachineOptions, Session
from harness.sample.guest_sampler import RunOptions
from harness.spec import Cell, Format, Measure
from harness.subject.binaries import Binaries
from harness.subject.policy import parse_policy
from harness.sweep.rounds import rounds

MACHINE = MachineOptions(binaries=Binaries.on_path(), work_dir=Path("/w"), results_dir=Path("/r"))

SPEC = """
rounds = 3
max_rounds = 6
budget_min = 20
metrics = ["total_s", "mib_per_s"]
min_effect = "7%"
[rules]
"host.flushes" = "1%"
[params]
dd_mib = 64
[[cells]]
name = "policy"
workload = "dd"
[[cells]]
name = "raw-ide"
format = "raw"
interface = "ide"
workload = "dd"
"""


def test_the_default_gate_spec_covers_every_value_of_each_axis_without_two_axes_going_together() -> None:
    spec = load_gate_spec(GATE_SPEC)
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    every = [gc.resolve(policy) for gc in spec.cells]
    assert len({c.id for c in every}) == len(every)
    # the guest cells (the replay cells beside them cover the block layer's axes)
    cells = [c for c in every if c.measure is not Measure.REPLAY]
    columns = {
        "format": [c.image.format.value for c in cells],
        "cache": [c.drive.cache.value for c in cells],
        "interface": [c.drive.interface.value for c in cells],
        "workload": [c.workload.name.value for c in cells],
    }
    for axis, values in columns.items():
        assert len(set(values)) == 2, (axis, values)
    patterns = {axis: tuple(v == values[0] for v in values) for axis, values in columns.items()}
    seen: dict[tuple[bool, ...], str] = {}
    for axis, pattern in patterns.items():
        for key in (pattern, tuple(not p for p in pattern)):
            assert key not in seen, f"{axis} goes together with {seen[key]}"
        seen[pattern] = axis
    assert len({c.id for c in cells}) == len(cells)


def test_spec_values_and_per_side_policies() -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    assert (spec.rounds, spec.max_rounds, spec.budget_min) == (3, 6, 20.0)
    assert spec.metrics == ("total_s", "mib_per_s")
    assert spec.min_effect == pytest.approx(0.07)
    assert spec.rules == {"host.flushes": pytest.approx(0.01)}
    sparse = parse_policy('[image]\nformat = "qcow2"\npreallocation = "off"\n')
    metadata = parse_policy(
        '[image]\nformat = "qcow2"\npreallocation = "metadata"\n[drive]\ncache = "none"\n'
    )
    policy_cell = spec.cells[0]
    # the same named cell is another point of the matrix under another policy: that is the change measured
    assert policy_cell.resolve(sparse).image.preallocation == "off"
    assert policy_cell.resolve(metadata).image.preallocation == "metadata"
    assert policy_cell.resolve(metadata).drive.cache.value == "none"
    raw = spec.cells[1].resolve(metadata)
    assert raw.image.format is Format.RAW and raw.image.preallocation == "off"
    assert raw.workload.dd_mib == 64


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rounds = 2\n", "no [[cells]]"),
        ('[[cells]]\nworkload = "dd"\ndd_mib = 3\n', "cells[1] (cell1): dd size 3 MiB"),
        ('[[cells]]\nname = "a"\nworkload = "dd"\n[[cells]]\nname = "a"\nworkload = "dd"\n', "used twice"),
        ('rounds = 0\n[[cells]]\nworkload = "dd"\n', "rounds = 0"),
        ('rounds = 5\nmax_rounds = 4\n[[cells]]\nworkload = "dd"\n', "max_rounds 4 is below rounds 5"),
        ('min_effect = "lots"\n[[cells]]\nworkload = "dd"\n', "min_effect 'lots'"),
        ('[rules]\n"no.such" = "1%"\n[[cells]]\nworkload = "dd"\n', "no.such"),
        ('colour = 1\n[[cells]]\nworkload = "dd"\n', "unknown key 'colour'"),
        ('[[cells]]\nworkload = "dd"\nspeed = 3\n', "cells[1]"),
        ("rounds = [\n", "not valid TOML"),
        ('counters = ["host.nope"]\n[[cells]]\nworkload = "dd"\n', "counters: unknown metric 'host.nope'"),
        ('counters = "host.flushes"\n[[cells]]\nworkload = "dd"\n', "counters must be a list"),
        ('changed_fails = "yes"\n[[cells]]\nworkload = "dd"\n', "changed_fails = 'yes': use true or false"),
    ],
)
def test_bad_specs_name_the_file_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_gate_spec(text, source="g.toml")
    assert err.value.message.startswith("g.toml")
    assert message in err.value.message


def test_missing_spec_file_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_gate_spec(tmp_path / "nope.toml")
    assert err.value.message.endswith(f"pass a file such as {GATE_SPEC}") and GATE_SPEC.is_file()


def test_command_line_settings_win_over_the_spec_only_when_given() -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    cli = Settings(metrics=("total_s",), min_effect=0.03, min_effect_by_metric={"total_s": 0.02})
    mixed = settings_for(spec, cli)
    assert mixed.metrics == ("total_s", "mib_per_s") and mixed.min_effect == pytest.approx(0.07)
    assert mixed.min_effect_by_metric == {"host.flushes": pytest.approx(0.01), "total_s": 0.02}
    given = settings_for(spec, cli, metrics_given=True, min_effect_given=True)
    assert given.metrics == ("total_s",) and given.min_effect == pytest.approx(0.03)


def _regressed() -> ComparedCell:
    return ComparedCell(
        cell_id="c",
        cell=FlatCell(),
        verdict=Verdict.REGRESSION,
        kind=Kind.METRIC,
        reason="total_s worse by +20%",
        rounds=4,
        base_ok=4,
        base_failed=0,
        head_ok=4,
        head_failed=0,
        metrics=(
            Figures(
                metric="total_s",
                unit="s",
                higher_is_better=False,
                n_base=4,
                n_head=4,
                median_base=10.0,
                median_head=12.0,
                ratio=1.2,
                ci_low=1.15,
                ci_high=1.25,
                p_value=0.001,
                min_effect=0.05,
                verdict=Verdict.REGRESSION,
                reason="worse by +20%",
            ),
        ),
        counters=(),
        counter_verdict=Verdict.UNCHANGED,
        note="",
    )


def test_canary_noise_is_not_a_move_of_the_host() -> None:
    # medians 15% apart, but the repeats overlap: the canary's own noise
    cells, canary = judge_canary([_regressed()], [1000, 1200, 900], [850, 1000, 800], Settings())
    doc = canary.to_json()
    assert cells[0].verdict is Verdict.REGRESSION
    assert doc["moved"] is False and doc["before_runs"] == [1000, 1200, 900]


def test_canary_that_moved_voids_time_verdicts() -> None:
    cells, canary = judge_canary([_regressed()], [1000, 1010, 990], [800, 810, 790], Settings())
    doc = canary.to_json()
    assert cells[0].verdict is Verdict.INCONCLUSIVE
    assert "moved" in cells[0].reason
    assert doc["moved"] is True and doc["change"] == pytest.approx(0.8)
    assert doc["voided"] == ["c"]
    # a move of -10% does not explain +20%: the regression stands
    cells, canary = judge_canary([_regressed()], [1000, 1010, 990], [900, 910, 890], Settings())
    doc = canary.to_json()
    assert cells[0].verdict is Verdict.REGRESSION
    assert doc["moved"] is True and doc["kept"] == ["c"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--base", "no-such-rev", "--head", "HEAD"], "--base 'no-such-rev' is not a commit"),
        (["--base", "HEAD", "--head", "HEAD", "--repo", "/"], "is not a git repository"),
        (["--base", "HEAD", "--head", "HEAD", "--spec", "/nonexistent.toml"], "gate spec /nonexistent.toml"),
        (["--base", "HEAD", "--head", "HEAD", "--rounds", "0"], "--rounds 0"),
        (["--base", "HEAD", "--head", "HEAD", "--head-qemu", "/"], "--head-qemu /: not an executable"),
        (["--base", "HEAD", "--head", "HEAD", "--min-effect", "lots"], "--min-effect 'lots'"),
    ],
)
def test_gate_bad_usage_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from harness.cli import main

    code = main(["gate", *argv, "--accel", "tcg", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert message in err[-1], err
    assert not (tmp_path / "out").exists()


def test_the_default_gate_spec_gates_what_can_decide_and_fails_on_a_change() -> None:
    spec = load_gate_spec(GATE_SPEC)
    # a guest cell gates the host's clock of its workload, a replay cell the IO path
    assert spec.metrics == ("host.workload_s", "replay.wall_s", "replay.write_p50_ms")
    # the guest's noisy figures are shown, each with why it is not gated
    assert "fio.raw-rand-write-qd1.clat_p50_ms" in spec.information
    assert "dev.write_p90_ms" in spec.information and "total_s" in spec.information
    # every guest cell's pair runs together on one CPU
    assert spec.guest_together and len(spec.guest_pairs) == len(spec.cells) - len(spec.replay_cells) == 6
    assert spec.cells[0].name == "policy-fio" and spec.cells[0].values["workload"] == "fio"
    # a gate of the default spec fits its 15-minute budget at its default rounds
    assert spec.budget_min <= 15 and spec.rounds >= 8
    assert "host.flushes" in spec.counters and "host.guest_written_bytes" in spec.counters
    assert spec.changed_fails is True
    settings = settings_for(spec, Settings())
    assert settings.correction == "holm" and settings.changed_fails
    assert settings.counters == spec.counters
    lenient = parse_gate_spec('changed_fails = false\n[[cells]]\nworkload = "dd"\n', source="g.toml")
    assert settings_for(lenient, Settings()).changed_fails is False
    # --changed-passes on the command line lets a change pass whatever the spec says
    assert settings_for(spec, Settings(changed_fails=False)).changed_fails is False


def test_options_take_the_specs_rounds_and_budget_unless_given() -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    options = GateOptions.decide(spec, MACHINE, GateAsked(seed=3))
    assert (options.rounds, options.max_rounds, options.budget_s, options.seed) == (3, 6, 1200.0, 3)
    given = GateOptions.decide(spec, MACHINE, GateAsked(rounds=8, max_rounds=5, budget_min=1.5, seed=0))
    # max_rounds never below rounds; a seed of 0 is a seed
    assert (given.rounds, given.max_rounds, given.budget_s, given.seed) == (8, 8, 90.0, 0)
    drawn = GateOptions.decide(spec, MACHINE)
    assert 0 <= drawn.seed < 2**31


def test_more_rounds_run_while_a_cell_is_unclear_below_max_rounds_and_within_budget() -> None:
    def stop(number: int, pending: list[str], elapsed_s: float, sample_s: list[float]) -> Stop | None:
        return stop_before(
            number, pending, max_rounds=6, budget_s=600.0, elapsed_s=elapsed_s, sample_s=sample_s
        )

    assert stop(4, ["a"], 100.0, [10.0, 20.0]) is None
    assert stop(4, [], 100.0, [10.0]) == Stop("every cell clear")
    assert stop(7, ["a"], 100.0, [10.0]) == Stop("max_rounds 6 reached")
    # two cells on two sides of 15 s on average: 60 s more would end past the 600 s budget
    assert stop(5, ["a", "b"], 541.0, [10.0, 20.0]) == Stop("budget of 10 min reached", over_budget=True)
    assert stop(5, ["a", "b"], 540.0, [10.0, 20.0]) is None
    # before any sample, one is guessed at a minute
    assert stop(5, ["a"], 481.0, []) == Stop("budget of 10 min reached", over_budget=True)


@dataclass
class _FakeSession(Session):
    """Runs no guest: takes samples up to ``upto`` with a noisy ``total_s``, noting each call."""

    calls: list[tuple[str, str, int]] = field(default_factory=list)
    label: str = ""

    def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, Record]:
        record = kw["existing"] or Record(cell=CellInfo(cell.as_dict()), machine=MachineInfo())
        for index in range(len(record.samples), kw["upto"]):
            self.calls.append((self.label, cell.id, index + 1))
            noise = random.Random(f"{self.label}{cell.id}{index}").uniform(0.5, 1.5)
            record = record.with_sample(Sample(index=index, status="ok", metrics={"total_s": noise}))
        return kw["where"].path(cell.id), record


def _sides(spec: GateSpec, calls: list[tuple[str, str, int]]) -> dict[str, GateSide]:
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    opts = RunOptions(
        binaries=Binaries.on_path(),
        accel="tcg",
        accel_reason="test",
        work_dir=Path("/w"),
        results_dir=Path("/r"),
        run_id="x",
    )
    sides = {}
    for label in SIDES:
        subject = Subject(label, label, "0" * 40, Path("/c"), policy, Path("/i"), None, None)
        session = _FakeSession(guest=None, opts=opts, machine=MachineInfo(), calls=calls, label=label)  # type: ignore[arg-type]
        cells = {gc.name: gc.resolve(policy) for gc in spec.cells}
        sides[label] = GateSide(subject=subject, session=session, cells=cells)
    return sides


def test_each_side_runs_its_own_binaries_else_the_runs() -> None:
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    run = Binaries("/usr/bin/qemu-system-x86_64", "/usr/bin/qemu-img")
    base = Subject("base", "base", "0" * 40, Path("/c"), policy, Path("/i"), None, None)
    head = Subject("head", "head", "1" * 40, Path("/c"), policy, Path("/i"), "/b/qemu-system-x86_64", None)
    assert base.binaries(run) == run
    assert head.binaries(run) == Binaries("/b/qemu-system-x86_64", "/usr/bin/qemu-img")
    # the comparison names what the side brought, not the run's default
    assert (head.describe().qemu, head.describe().qemu_img) == ("/b/qemu-system-x86_64", None)


def test_rounds_interleave_both_sides_in_the_seeds_order_until_max_rounds(tmp_path: Path) -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    calls: list[tuple[str, str, int]] = []
    sides = _sides(spec, calls)
    options = GateOptions.decide(spec, MACHINE, GateAsked(rounds=3, max_rounds=5, seed=7))
    settings = settings_for(spec, Settings(), metrics_given=True)
    done = run_rounds(
        spec, sides, settings, options, out_dir=tmp_path, started=time.monotonic(), progress=lambda _m: None
    )
    # base and head noisy alike: no cell gets clear, every one runs to max_rounds
    assert done.stopped == "max_rounds 5 reached"
    assert [r.rounds for r in done.results] == [5, 5]
    ids = {gc.name: sides["head"].cells[gc.name].id for gc in spec.cells}
    expected = [
        (t.side, ids[t.cell], t.round)
        for t in rounds(range(1, 6), lambda _n: ["policy", "raw-ide"], SIDES, random.Random(7))
    ]
    assert calls == expected
    # the first round of seed 7, as gates have always drawn it
    assert calls[:4] == [
        ("head", ids["policy"], 1), ("base", ids["policy"], 1),
        ("base", ids["raw-ide"], 1), ("head", ids["raw-ide"], 1),
    ]  # fmt: skip


def test_the_budget_holds_from_the_first_round(tmp_path: Path) -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    calls: list[tuple[str, str, int]] = []
    options = GateOptions.decide(spec, MACHINE, GateAsked(rounds=3, max_rounds=5, seed=7, budget_min=1))
    notes: list[str] = []
    done = run_rounds(
        spec,
        _sides(spec, calls),
        settings_for(spec, Settings(), metrics_given=True),
        options,
        out_dir=tmp_path,
        started=time.monotonic() - 60,
        progress=notes.append,
    )
    # the budget is spent before the first sample: none runs, and no cell passes for lack of samples
    assert done.stopped == "budget of 1 min reached"
    assert calls == []
    assert notes[-1] == "gate: budget of 1 min reached; 2 cell(s) stay as they are"
    assert [(r.verdict.value, r.kind.value) for r in done.results] == [("error", "missing")] * 2
    assert done.results[0].reason == "no sample of base and head: the gate's budget ran out first"
    # with its axes flat, as every compared cell has them (the document's shape, the short name)
    assert done.results[0].cell.format in ("raw", "qcow2") and "image" not in done.results[0].cell.to_json()

"""Replay cells in a gate: base's stream handed to both sides, paired rounds, what a gate could see."""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from gatekit import fake_sides
from tcgopts import tcg_options

from harness.compare import Kind as CellKind
from harness.compare import Settings, Verdict
from harness.compare.markdown import sensitivity_lines
from harness.compare.model import ComparedCell, Figures, SensitivityRow
from harness.compare.power import could_see, could_see_text, rounds_to_decide
from harness.gate import (
    GateAsked,
    GateOptions,
    GateSide,
    load_gate_spec,
    parse_gate_spec,
    run_rounds,
)
from harness.gate import streams as gate_streams
from harness.gate.spec import GATE_SPEC
from harness.paths import REPO_ROOT
from harness.record import CellInfo, MachineInfo, Record, Sample
from harness.rounds.session import MachineOptions, Session
from harness.sample.replay import sample as replay_sample_module
from harness.sample.replay.replay import Pairing, ReplaySample
from harness.sample.replay.stream import Kind, Request, Stream
from harness.spec import Cell, Measure, make_cell
from harness.subject.binaries import Binaries
from harness.subject.policy import parse_policy

MACHINE = MachineOptions(binaries=Binaries.on_path(), work_dir=Path("/w"), results_dir=Path("/r"))

OPTS = tcg_options(Path("/w"), Path("/r"), run_id="x")


def _stream(writes: int) -> Stream:
    requests = (*(Request(Kind.WRITE, i * 4096, 4096) for i in range(writes)), Request(Kind.FLUSH))
    return Stream(disk_bytes=1 << 30, requests=requests, drive={"format": "qcow2"})


def test_a_given_stream_is_replayed_as_it_is_and_never_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _stream(3)
    seen: list[tuple[Stream, int]] = []

    def no_recording(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a handed stream must not be recorded")

    def fake_replay(got: Stream, cell: Cell, **kw: Any) -> ReplaySample:
        seen.append((got, kw["passes"]))
        return ReplaySample({"replay.wall_s": 0.3}, {}, [], ["qemu-io"], {"wrote": 3}, pass_wall_s=[0.1] * 3)

    monkeypatch.setattr(replay_sample_module, "cached_stream", no_recording)
    monkeypatch.setattr(replay_sample_module, "replay", fake_replay)
    cell = make_cell(workload="dd", dd_mib=64, measure="replay")
    sampler = replay_sample_module.replay_sampler(stream, passes=3, label="base abc")
    sample = sampler(cell, None, OPTS, 0, tmp_path)  # type: ignore[arg-type]
    assert sample.status == "ok", sample
    assert seen == [(stream, 3)]
    assert sample.host["stream"]["given"] == "base abc"
    assert sample.host["stream"]["digest"] == stream.digest
    assert sample.replay is not None and sample.replay["pass_wall_s"] == [0.1, 0.1, 0.1]


SPEC = """
rounds = 2
max_rounds = 2
metrics = ["replay.wall_s", "total_s"]
replay_samples = 3
replay_passes = 2
[params]
dd_mib = 64
[[cells]]
name = "guest"
workload = "dd"
[[cells]]
name = "replayed"
workload = "dd"
measure = "replay"
"""


@dataclass
class _Session(Session):
    calls: list[tuple[str, str, int, bool]] = field(default_factory=list)
    label: str = ""

    def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, Record]:
        record = kw["existing"] or Record(cell=CellInfo(cell.as_dict()), machine=MachineInfo())
        for index in range(len(record.samples), kw["upto"]):
            self.calls.append((self.label, cell.id, index + 1, kw.get("sampler") is not None))
            value = random.Random(f"{self.label}{cell.id}{index}").uniform(0.5, 1.5)
            metric = "replay.wall_s" if cell.measure is Measure.REPLAY else "total_s"
            record = record.with_sample(Sample(index=index, status="ok", metrics={metric: value}))
        return kw["where"].path(cell.id), record


def _sides(spec_text: str, calls: list[tuple[str, str, int, bool]]) -> dict[str, GateSide]:
    return fake_sides(
        parse_gate_spec(spec_text, source="g.toml"),
        lambda label: _Session(guest=None, opts=OPTS, machine=MachineInfo(), calls=calls, label=label),  # type: ignore[arg-type]
    )


def test_base_stream_goes_to_both_sides_and_head_is_recorded_only_where_it_could_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, int, bool]] = []
    sides = _sides(SPEC, calls)
    recorded: list[str] = []
    streams = {"base": _stream(2), "head": _stream(3)}
    material = {"base": {"workload": "dd 64"}, "head": {"workload": "dd 64"}}

    def fake_cached(cell: Cell, guest: Any, opts: Any, log_dir: Path, *, caps: Any) -> tuple[Path, Stream]:
        side = log_dir.parent.name
        recorded.append(side)
        return tmp_path / f"{side}.json", streams[side]

    monkeypatch.setattr(gate_streams, "cached_stream", fake_cached)
    monkeypatch.setattr(gate_streams, "_material", lambda cell, side: material[side.subject.label])
    got = gate_streams.prepare_streams(sides, ["guest", "replayed"], passes=2, log_root=tmp_path)
    # only the replay cell, base's stream only: head's guest is the same
    assert recorded == ["base"]
    assert list(got.samplers) == ["replayed"] and got.streams["replayed"] is streams["base"]
    assert got.notes == {}
    # head's workload differs: its stream is recorded too, and the difference is a structural change
    material["head"] = {"workload": "dd 128"}
    recorded.clear()
    got = gate_streams.prepare_streams(sides, ["replayed"], passes=2, log_root=tmp_path)
    assert recorded == ["base", "head"]
    assert got.streams["replayed"] is streams["base"]
    assert got.notes["replayed"] == (
        "structural change: head's guest issues another request stream (write 2 → 3, "
        "write_bytes 8192 → 12288); both sides replayed base's"
    )


def test_a_head_recording_is_held_to_base_deadline_and_a_cap_from_base_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.errors import GuestTimeout, StreamOverCap
    from harness.gate.rounds import Clock
    from harness.sample.replay.record import LOG_FLOOR_BYTES

    sides = _sides(SPEC, [])
    base_stream = replace(_stream(2), source={"recording_host_s": 3.0})
    seen: dict[str, tuple[float, Any]] = {}
    fail: list[BaseException] = []

    def fake_cached(cell: Cell, guest: Any, opts: Any, log_dir: Path, *, caps: Any) -> tuple[Path, Stream]:
        side = log_dir.parent.name
        seen[side] = (opts.workload_timeout_s, caps)
        if side == "head" and fail:
            raise fail[0]
        return tmp_path / f"{side}.json", base_stream

    monkeypatch.setattr(gate_streams, "cached_stream", fake_cached)
    monkeypatch.setattr(gate_streams, "_material", lambda cell, side: {"recipe": side.subject.label})
    clock = Clock(budget_s=600.0, started=time.monotonic(), workload_timeout_s=1800.0)
    got = gate_streams.prepare_streams(sides, ["replayed"], passes=1, log_root=tmp_path, clock=clock)
    # base within what is left of the budget; head within 10 x base's 3 s + 60 s
    assert 590 < seen["base"][0] <= 600 and seen["head"][0] == pytest.approx(90.0)
    # head's log: at most 4 x base's (two 4 KiB writes, the headers of those and a flush, the
    # superblock) + 64 MiB
    assert seen["head"][1].log_bytes == 4 * (4 * 512 + 8192) + LOG_FLOOR_BYTES
    assert seen["base"][1].log_bytes == sides["base"].cells["replayed"].image.size + LOG_FLOOR_BYTES
    assert got.over_cap == {} and got.timed_out == {}
    fail.append(StreamOverCap("the recording's write log grew to 99 MiB, past its cap of 64 MiB"))
    got = gate_streams.prepare_streams(sides, ["replayed"], passes=1, log_root=tmp_path, clock=clock)
    assert got.over_cap == {
        "replayed": "structural change: head's recording stopped: the recording's write log grew to 99 MiB, "
        "past its cap of 64 MiB"
    }
    fail[0] = GuestTimeout("no workload report from the guest within 90 s")
    got = gate_streams.prepare_streams(sides, ["replayed"], passes=1, log_root=tmp_path, clock=clock)
    assert got.timed_out == {"replayed": pytest.approx(90.0)} and got.over_cap == {}
    # no more recordings and no rounds: the gate ends with the cell head-timed-out
    assert got.stop is not None and got.stop.head_timed_out == (("replayed", pytest.approx(90.0)),)


def test_only_bytes_or_a_kind_count_beyond_recording_noise_is_a_structural_change() -> None:
    def stream(writes: int, flushes: int, size: int = 4096) -> Stream:
        requests = [Request(Kind.WRITE, i * size, size) for i in range(writes)]
        return Stream(disk_bytes=1 << 30, requests=(*requests, *[Request(Kind.FLUSH)] * flushes))

    # the guest merged differently: 12 writes of 20 KiB or 15 of 16 KiB, the same bytes, no note
    assert gate_streams.stream_note(stream(12, 9, 20480), stream(15, 9, 16384)) == ""
    assert "write 12 → 24" in gate_streams.stream_note(stream(12, 9, 20480), stream(24, 9, 10240))
    assert gate_streams.stream_note(stream(10, 9), stream(10, 13)) == ""
    assert "flush 9 → 20" in gate_streams.stream_note(stream(10, 9), stream(10, 20))
    assert "flush 9 → 0" in gate_streams.stream_note(stream(10, 9), stream(10, 0))


def test_a_replay_cell_takes_its_samples_in_pairs_several_a_round(tmp_path: Path) -> None:
    spec = parse_gate_spec(SPEC, source="g.toml")
    calls: list[tuple[str, str, int, bool]] = []
    sides = _sides(SPEC, calls)
    for side in sides.values():
        side.samplers["replayed"] = lambda *_a: {}
        side.per_round["replayed"] = spec.replay_samples
    done = _play(spec, sides, tmp_path)
    replay_id = sides["head"].cells["replayed"].id
    replayed = [c for c in calls if c[1] == replay_id]
    guest = [c for c in calls if c[1] != replay_id]
    # 2 rounds x 3 pairs; each pair is sample i of both sides, next to each other, by the handed sampler
    assert len(replayed) == 12 and all(c[3] for c in replayed)
    for k in range(6):
        pair = replayed[2 * k : 2 * k + 2]
        assert {c[0] for c in pair} == {"base", "head"} and {c[2] for c in pair} == {k + 1}
    assert len(guest) == 4 and not any(c[3] for c in guest)
    rounds = {r.cell_id: r.rounds for r in done.results}
    assert rounds[replay_id] == 6 and rounds[sides["head"].cells["guest"].id] == 2


def test_the_default_gate_has_replay_cells_over_format_preallocation_and_cache() -> None:
    spec = load_gate_spec(GATE_SPEC)
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    cells = [spec.cells[i].resolve(policy) for i, gc in enumerate(spec.cells) if gc.name in spec.replay_cells]
    assert "policy-replay" in spec.replay_cells and spec.replay_samples > 1
    assert len({c.image.format for c in cells}) == 2
    assert len({c.image.preallocation for c in cells}) >= 2
    assert len({c.drive.cache for c in cells}) == 3
    assert "replay.wall_s" in spec.metrics
    # many small requests, a pair's two samples at the same moment on one CPU
    assert {c.workload.name for c in cells} == {"fio"} and spec.replay_together


def _result(ratio: float, lo: float, hi: float, n: int = 8, m: float = 0.05) -> Figures:
    return Figures(
        metric="replay.wall_s",
        unit="s",
        n_base=n,
        n_head=n,
        median_base=1.0,
        median_head=ratio,
        ratio=ratio,
        ci_low=lo,
        ci_high=hi,
        p_value=0.5,
        min_effect=m,
        verdict=Verdict.INCONCLUSIVE,
    )


def test_what_a_gate_could_see_follows_the_width_of_its_interval() -> None:
    settings = Settings(alpha=0.01, comparisons=1, confidence=0.95)
    # se = ln(1.05/0.95) / 2 / 1.96; (z(0.995) + z(0.8)) * se = 3.417 * 0.02553
    assert could_see(_result(1.0, 0.95, 1.05), settings) == pytest.approx(
        math.exp(3.4174 * 0.025530) - 1, rel=1e-3
    )
    assert could_see_text(0.0912) == "could see ≥ 9.1%"
    # a family of 40 tests sees less; a narrower interval more
    assert could_see(_result(1.0, 0.95, 1.05), Settings(comparisons=40)) > 0.12
    assert could_see(_result(1.0, 0.99, 1.01), settings) < 0.02
    assert math.isinf(could_see(_result(1.0, math.nan, math.nan), settings))


def test_rounds_to_decide_an_inconclusive_metric() -> None:
    settings = Settings(alpha=0.01, comparisons=1, confidence=0.95)
    # centred on 1, ±10 % at 8 rounds: the interval must shrink to ±ln(1.05): (0.0512 / 0.0249)^2 x 8
    assert rounds_to_decide(_result(1.0, 0.9, 1.1), settings) == 34
    # on the edge of the band: no number of rounds decides it
    assert rounds_to_decide(_result(1.05, 0.95, 1.15), settings) is None
    # well beyond, not yet significant at z(0.995): se 0.120 must fall to ln(1.3) / 2.576 = 0.102
    assert rounds_to_decide(_result(1.3, 1.0, 1.6), settings) == 12


def test_the_summary_first_lines_say_what_each_cell_could_see_and_what_it_needs() -> None:
    rows = [
        {"cell_id": "a", "name": "policy-replay", "metric": "replay.wall_s", "rounds": 24,
         "verdict": "unchanged", "could_see_pct": 4.04, "rounds_to_decide": None},
        {"cell_id": "a", "name": "policy-replay", "metric": "replay.write_mean_ms", "rounds": 24,
         "verdict": "unchanged", "could_see_pct": 12.0, "rounds_to_decide": None},
        {"cell_id": "b", "name": "policy-fio", "metric": "total_s", "rounds": 8,
         "verdict": "inconclusive", "could_see_pct": 31.5, "rounds_to_decide": 40},
    ]  # fmt: skip
    assert sensitivity_lines([SensitivityRow.from_json(r) for r in rows]) == [
        "Could see (a regression this large fails the gate 4 times in 5): `policy-replay` ≥ 4.0% "
        "(replay.wall_s, 24 rounds); `policy-fio` ≥ 31.5% (total_s, 8 rounds)",
        "Inconclusive: `policy-fio` would need about 40 rounds (has 8)",
        "",
    ]


def test_a_together_replay_cell_runs_each_pair_at_the_same_moment(tmp_path: Path) -> None:
    import threading

    spec = parse_gate_spec("replay_together = true\n" + SPEC, source="g.toml")
    assert spec.replay_together
    calls: list[tuple[str, str, int, bool]] = []
    sides = _sides(SPEC, calls)
    barrier = threading.Barrier(2)
    inside: list[int] = []
    lock = threading.Lock()
    most = [0]

    def sampler(*_a: Any) -> Sample:
        return Sample()

    @dataclass
    class _Overlapping(_Session):
        def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, Record]:
            if cell.measure is Measure.REPLAY:
                with lock:
                    inside.append(1)
                    most[0] = max(most[0], len(inside))
                barrier.wait(5)  # both sides of the pair are in at once, or this breaks
                time.sleep(0.01)
                with lock:
                    inside.pop()
            return super().run_cell(cell, **kw)

    for label, side in sides.items():
        side.session = _Overlapping(guest=None, opts=OPTS, machine=MachineInfo(), calls=calls, label=label)  # type: ignore[arg-type]
        side.samplers["replayed"] = sampler
        side.per_round["replayed"] = spec.replay_samples
        side.together["replayed"] = Pairing()
    done = _play(spec, sides, tmp_path)
    replay_id = sides["head"].cells["replayed"].id
    assert most[0] == 2
    assert sorted(c[2] for c in calls if c[1] == replay_id and c[0] == "base") == [1, 2, 3, 4, 5, 6]
    assert {r.cell_id: r.rounds for r in done.results}[replay_id] == 6


def test_replay_together_is_true_or_false() -> None:
    from harness.errors import SpecError

    with pytest.raises(SpecError, match="replay_together = 'yes': use true or false"):
        parse_gate_spec('replay_together = "yes"\n' + SPEC, source="g.toml")


def test_an_inconclusive_metric_without_rounds_to_decide_says_why() -> None:
    def row(**kw: Any) -> list[str]:
        """The lines of one inconclusive metric with these figures and no rounds to decide it."""
        open_ = Verdict.INCONCLUSIVE
        figures = Figures(metric="total_s", verdict=open_, min_effect=0.05, **kw)
        cell = ComparedCell(cell_id="c", verdict=open_, kind=CellKind.METRIC, metrics=(figures,))
        sensitivity = SensitivityRow(cell_id="c", name="c", metric="total_s", rounds=2, verdict=open_)
        return sensitivity_lines([sensitivity], cells=[cell])

    few = row(change_pct=82.5, ci_low=None, n_base=2, n_head=2)
    assert "has too few samples for an interval (2 + 2): run more rounds" in few[0]
    edge = row(change_pct=5.1, ci_low=0.9, ci_high=9.5, n_base=8, n_head=8)
    assert "its change sits on the minimum effect" in edge[0]
    far = row(change_pct=-40.0, ci_low=-70.0, ci_high=0.2, n_base=8, n_head=8)
    assert "would need more than 1000 rounds at this spread" in far[0]


def test_the_gates_round_lines_say_the_time_so_far_and_what_is_left() -> None:
    from harness.gate.rounds import _eta

    assert (
        _eta(elapsed_s=30, round_s=[], rounds_left=8, budget_s=660)
        == " (0m30s in; 10m30s left of the budget)"
    )
    # 3 rounds left at 70 s each, well within the budget
    assert _eta(elapsed_s=250, round_s=[70, 70], rounds_left=3, budget_s=660) == (
        " (4m10s in; about 3m30s to go, within the budget's 6m50s)"
    )
    # never past the budget
    assert _eta(elapsed_s=600, round_s=[70], rounds_left=6, budget_s=660).endswith(
        "about 1m00s to go, within the budget's 1m00s)"
    )


@dataclass
class _Timed(_Session):
    """A side whose replay samples take ``take_s``; head's run past any deadline under ``needs_s``."""

    take_s: float = 0.0
    needs_s: float = 0.0
    deadlines: list[float] = field(default_factory=list)

    def run_cell(self, cell: Cell, **kw: Any) -> tuple[Path, dict[str, Any]]:
        if cell.measure is not Measure.REPLAY:
            return super().run_cell(cell, **kw)
        self.deadlines.append(self.opts.workload_timeout_s)
        time.sleep(self.take_s)
        record = kw["existing"] or Record(cell=CellInfo(cell.as_dict()), machine=MachineInfo())
        index = len(record.samples)
        self.calls.append((self.label, cell.id, index + 1, True))
        if self.opts.workload_timeout_s < self.needs_s:
            sample = Sample(index=index, status="error", error_type="ReplayTimeout", reason="late")
        else:
            sample = Sample(index=index, status="ok", metrics={"replay.wall_s": 2.0})
        return kw["where"].path(cell.id), record.with_sample(sample)


def _play(spec: Any, sides: dict[str, GateSide], out_dir: Path) -> Any:
    """The rounds of a gate of ``spec`` on ``sides``, seed 3, the spec's own budget."""
    options = GateOptions.decide(spec, MACHINE, GateAsked(seed=3))
    return run_rounds(
        spec,
        sides,
        Settings(metrics=spec.metrics),
        options,
        out_dir=out_dir,
        started=time.monotonic(),
        progress=lambda _m: None,
    )


def _timed_sides(spec_text: str, **head: float) -> dict[str, GateSide]:
    sides = _sides(spec_text, [])
    for label, side in sides.items():
        side.session = _Timed(
            guest=None, opts=OPTS, machine={}, calls=[], label=label, **(head if label == "head" else {})
        )  # type: ignore[arg-type]
        side.samplers["replayed"] = lambda *_a: {}
        side.per_round["replayed"] = 5
    return sides


def test_a_head_replay_that_runs_past_base_deadline_is_head_timed_out() -> None:
    # a replay alone; head's qemu-io needs 100 s where base's takes 2 s
    text = SPEC.split("[[cells]]")[0] + "[[cells]]" + SPEC.split("[[cells]]")[2]
    spec = parse_gate_spec(text, source="g.toml")
    sides = _timed_sides(text, needs_s=100.0)
    options = GateOptions.decide(spec, MACHINE, GateAsked(seed=3))
    done = _play(spec, sides, Path("/nonexistent"))
    (result,) = done.results
    assert (result.verdict, result.kind.value) == (Verdict.REGRESSION, "head-timed-out")
    assert done.stopped.startswith("head timed out on replayed")
    head = sides["head"].session
    assert isinstance(head, _Timed)
    # the first pair's head had what is left of the budget (base had no time yet), the second
    # 10 x base's 2 s + 60 s, which it ran past: no third pair
    assert len(head.deadlines) == 2
    assert 600 < head.deadlines[0] <= options.budget_s
    assert head.deadlines[1] == pytest.approx(10 * 2.0 + 60)
    assert "deadline of 80 s" in result.reason


def test_a_replay_cells_pairs_stop_at_the_budget() -> None:
    text = SPEC.split("[[cells]]")[0] + "[[cells]]" + SPEC.split("[[cells]]")[2]
    spec = parse_gate_spec(text, source="g.toml")
    sides = _timed_sides(text)
    for side in sides.values():
        assert isinstance(side.session, _Timed)
        side.session.take_s = 0.4
    options = GateOptions.decide(spec, MACHINE, GateAsked(seed=3, budget_min=2 / 60))
    t0 = time.monotonic()
    done = run_rounds(
        spec, sides, Settings(metrics=spec.metrics), options, out_dir=Path("/nonexistent"),
        started=t0, progress=lambda _m: None,
    )  # fmt: skip
    took = time.monotonic() - t0
    # a pair takes 0.8 s: five would take 4 s of a 2 s budget; a pair starts only where two fit
    assert took < 2.0, took
    assert done.stopped == "budget of 0 min reached"
    assert 1 <= len(sides["head"].records["replayed"].samples) < 5

"""Change points of the history: the method, the series of asv result files, the causes, the table."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from harness.errors import UsageError
from harness.history.changes import method
from harness.history.changes.attribution import cause, commit_identity, identity_changes
from harness.history.changes.find import Settings, find_changes, history_changes, threshold_for
from harness.history.changes.series import Series, load_series
from harness.history.changes.table import render_json, render_text
from harness.record import Record


def noisy(level: float, n: int, rng: random.Random, spread: float = 0.1) -> list[float]:
    return [level * (1 + spread * rng.uniform(-1, 1)) for _ in range(n)]


# -- the method --------------------------------------------------------------------------------


def test_a_step_is_found_at_its_commit_with_medians_and_confidence() -> None:
    rng = random.Random(7)
    values = noisy(10.0, 4, rng) + noisy(16.0, 4, rng)
    (point,) = method.change_points(values)
    assert point.index == 4
    assert 9.0 < point.before < 11.0 and 14.4 < point.after < 17.6
    # 8 points: every split of 4 | 4 as extreme as this one is 2 of C(8,4) = 70 orders
    assert point.p == pytest.approx(2 / 70, abs=0.012)
    assert point.confidence > 0.95


def test_a_single_spike_is_not_a_change_point() -> None:
    rng = random.Random(3)
    for spike_at in range(12):
        values = noisy(10.0, 12, rng)
        values[spike_at] = 50.0
        assert method.change_points(values) == [], spike_at


def test_a_flat_series_and_a_constant_one_have_none() -> None:
    rng = random.Random(11)
    assert method.change_points(noisy(10.0, 20, rng)) == []
    assert method.change_points([4.0] * 10) == []
    assert method.change_points([4.0] * 9 + [40.0]) == [], "a spike at the end of a tied series"


def test_the_minimum_segment_length_keeps_a_short_tail_from_being_a_step() -> None:
    rng = random.Random(5)
    values = noisy(10.0, 10, rng, 0.02) + noisy(20.0, 3, rng, 0.02)
    assert method.change_points(values, min_segment=4) == []
    (point,) = method.change_points(values, min_segment=3)
    assert point.index == 10 and point.p <= 0.05


def test_the_significance_level_decides_a_small_sample() -> None:
    # 3 | 3 perfectly apart: 2 of C(6,3) = 20 orders are as extreme, p = 0.1
    values = [10.0, 10.2, 9.9, 15.0, 15.3, 14.8]
    assert method.change_points(values, alpha=0.05) == []
    (point,) = method.change_points(values, alpha=0.2)
    assert point.index == 3 and point.p == pytest.approx(0.1, abs=0.03)


def test_two_steps_are_both_found_and_gaps_are_skipped() -> None:
    rng = random.Random(2)
    values = noisy(10.0, 8, rng, 0.05) + noisy(20.0, 8, rng, 0.05) + noisy(12.0, 8, rng, 0.05)
    values[3] = math.nan
    points = method.change_points(values)
    assert [p.index for p in points] == [8, 16]
    assert points[0].p <= 0.05 and points[1].after == pytest.approx(12.0, rel=0.06)


def test_the_minimum_effect_ignores_a_real_but_small_step() -> None:
    values = [10.0, 10.01, 9.99, 10.02, 10.3, 10.31, 10.29, 10.32]
    assert [p.index for p in method.change_points(values)] == [4]
    assert method.change_points(values, min_effect=0.2) == []


def test_the_same_values_give_the_same_answer() -> None:
    rng = random.Random(9)
    values = noisy(10.0, 5, rng, 0.2) + noisy(13.0, 5, rng, 0.2)
    assert method.change_points(values) == method.change_points(values)


@pytest.mark.parametrize(
    ("key", "value", "flag"),
    [("alpha", 0.0, "--alpha"), ("alpha", 1.5, "--alpha"), ("min_segment", 1, "--min-segment")],
)
def test_bad_settings_name_their_flag(key: str, value: float, flag: str) -> None:
    with pytest.raises(UsageError, match=flag):
        method.change_points([1.0] * 8, **{key: value})


# -- asv result files ----------------------------------------------------------------------------


def write_results(
    root: Path,
    machine: str,
    commits: list[str],
    rows: dict[str, tuple[list[list[str]], list[list[float | None]]]],
) -> Path:
    """asv's format 2: one file per commit, ``rows[name] = (params, values per commit)``."""
    results = root / "results" / "asv"
    (results / machine).mkdir(parents=True, exist_ok=True)
    (results / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    benchmarks: dict[str, Any] = {"version": 2}
    for name, (params, _values) in rows.items():
        kind, workload, method_name = name.split(".")
        benchmarks[name] = {
            "name": name,
            "params": [[repr(v) for v in axis] for axis in params],
            "param_names": ["format", "cache"][: len(params)],
            "pretty_name": f"{kind} {workload.lower()}: {method_name.removeprefix('track_')}",
            "unit": "seconds",
            "type": "track",
        }
    (results / "benchmarks.json").write_text(json.dumps(benchmarks))
    for i, commit in enumerate(commits):
        data = {
            "commit_hash": commit,
            "env_name": "virtualenv-py3.11",
            "date": 1_700_000_000_000 + i,
            "params": {"machine": machine},
            "python": "3.11",
            "requirements": {},
            "env_vars": {},
            "result_columns": ["result", "params", "version", "started_at", "duration"],
            "results": {
                name: [values[i], [[repr(v) for v in axis] for axis in params], "v", 0, 0.1]
                for name, (params, values) in rows.items()
            },
            "durations": {},
            "version": 2,
        }
        (results / machine / f"{commit[:8]}-virtualenv-py3.11.json").write_text(json.dumps(data))
    return results


# a record the history suite wrote (the small matrix's dd cell, under TCG)
RECORD = Path(__file__).parent / "data" / "history-record-dd.json"


def write_record(root: Path, machine: str, commit: str, pin: str | None = None, **identity: str) -> None:
    """The real record, as if of ``commit``, with ``identity`` replacing machine keys (and the QEMU
    its policy pins, ``pin``: none, the runner's)."""
    directory = root / "results" / "history" / machine / commit / "sweeps" / "history"
    directory.mkdir(parents=True, exist_ok=True)
    record = json.loads(RECORD.read_text())
    record["machine"].update({"qemu": "/usr/bin/qemu-system-x86_64", **identity})
    if pin not in (None, "runner"):
        record["subject"]["policy"]["qemu"] = pin
    (directory / f"{record['cell']['id']}.json").write_text(json.dumps(record))


COMMITS = [f"{i:02d}" + "c" * 38 for i in range(8)]


def test_series_come_from_asv_results_one_per_parameter_combination(tmp_path: Path) -> None:
    rows = {
        "matrix.Dd.track_total_s": (
            [["raw", "qcow2"]],
            [[1.0 + i, 2.0 + i] for i in range(8)],
        ),
        "policy.Dd.track_total_s": ([], [[5.0] if i != 2 else [None] for i in range(8)]),
    }
    results = write_results(tmp_path, "vm-tcg", COMMITS, rows)
    order = list(reversed(COMMITS))  # the branch's order wins over the files' dates
    series = {(s.benchmark, s.params): s for s in load_series(results, order=order)}
    qcow2 = series[("matrix.Dd.track_total_s", ("qcow2",))]
    assert qcow2.commits == tuple(order) and qcow2.values[0] == 9.0
    assert qcow2.cell == "matrix dd format=qcow2" and qcow2.metric == "total_s" and qcow2.unit == "s"
    policy = series[("policy.Dd.track_total_s", ())]
    assert math.isnan(policy.values[order.index(COMMITS[2])]), "a failed cell is a gap"


def test_no_results_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="run `diskbench history` first"):
        load_series(tmp_path / "none")


# -- causes -----------------------------------------------------------------------------------------


def test_a_commits_identity_and_what_changed() -> None:
    from harness.record import new_record

    def rec(machine: dict[str, str], vm: dict[str, str] | None = None) -> Record:
        return new_record(cell={"id": "c"}, machine=machine, subject={}, vm=vm or {}, run_id="history")

    before = commit_identity([rec({"qemu_version": "7.2.22", "hostname": "r1"}, {"accel": "tcg"})])
    after = commit_identity([rec({"qemu_version": "8.0.0", "hostname": "r1"}, {"accel": "tcg"})])
    assert before == {"QEMU version": "7.2.22", "runner": "r1", "accel": "tcg"}
    changes = identity_changes(before, after)
    assert [str(c) for c in changes] == ["QEMU version 7.2.22 → 8.0.0"]
    assert cause(changes, known=True) == "not the commit: lines up with QEMU version 7.2.22 → 8.0.0"
    assert cause([], known=True) == "the commit (nothing else changed)"
    assert cause([], known=False).startswith("the commit? (no records")
    mixed = commit_identity([rec({"host_kernel": "a"}), rec({"host_kernel": "b"})])
    assert mixed == {"host kernel": "a | b"}


def step_results(tmp_path: Path, *, qemu_from: int | None) -> Path:
    """8 commits: total_s steps at commit 5 (index 4); phase.write_s is flat with one spike."""
    rng = random.Random(1)
    total = noisy(3.6, 4, rng) + noisy(9.0, 4, rng)
    write = noisy(2.5, 8, rng)
    write[2] = 9.0
    rows = {
        "policy.Dd.track_total_s": ([], [[v] for v in total]),
        "policy.Dd.track_phase_write_s": ([], [[v] for v in write]),
    }
    write_results(tmp_path, "vm-tcg", COMMITS, rows)
    for i, commit in enumerate(COMMITS):
        if qemu_from is not None and i >= qemu_from:
            write_record(
                tmp_path, "vm-tcg", commit, qemu_version="7.2.99", qemu="/var/tmp/q/qemu-system-x86_64"
            )
        else:
            write_record(tmp_path, "vm-tcg", commit)
    return tmp_path / "results"


def test_a_step_from_the_commit_is_blamed_on_it_and_the_spike_is_not_a_step(tmp_path: Path) -> None:
    results = step_results(tmp_path, qemu_from=None)
    found = changes_of(results, {".*": 0.2}, COMMITS)
    assert found.series == 2
    (change,) = found.changes
    assert change.series.metric == "total_s" and change.commit == COMMITS[4] and change.previous == COMMITS[3]
    assert change.cause == "the commit (nothing else changed)" and change.changed == ()
    text = render_text(found.changes, Settings(), series_count=found.series)
    assert "machine vm-tcg: 1 change point(s)" in text
    (row,) = [line for line in text.splitlines() if line.startswith("policy dd")]
    assert COMMITS[4][:12] in row and "total_s" in row and "→" in row and "%" in row
    doc = json.loads(render_json(found.changes, Settings(), series_count=found.series))
    assert doc["changes"][0]["commit"] == COMMITS[4] and doc["changes"][0]["confidence"] > 0.95


def test_a_step_that_lines_up_with_a_new_qemu_is_attributed_to_it(tmp_path: Path) -> None:
    results = step_results(tmp_path, qemu_from=4)
    found = changes_of(results, {".*": 0.2}, COMMITS)
    (change,) = found.changes
    assert change.cause.startswith("not the commit: lines up with QEMU version 7.2.22 → 7.2.99")
    assert "QEMU binary /usr/bin/qemu-system-x86_64 → /var/tmp/q/qemu-system-x86_64" in change.changed
    assert "not the commit" in render_text(found.changes, Settings(), series_count=found.series)


def test_the_config_thresholds_are_the_minimum_step() -> None:
    thresholds = {".*": 0.2, ".*track_phase_(mkfs|sync)_s": 1.0}
    assert threshold_for("matrix.Dd.track_total_s", thresholds) == 0.2
    assert threshold_for("matrix.Dd.track_phase_mkfs_s", thresholds) == 1.0, "the largest that matches"
    assert threshold_for("x", {}) == 0.05
    series = Series(
        "m",
        "policy.Dd.track_phase_mkfs_s",
        (),
        (),
        "phase.mkfs_s",
        "s",
        tuple(COMMITS),
        (1.0,) * 4 + (1.5,) * 4,
    )
    assert find_changes([series], Settings(), thresholds=thresholds, identity=lambda m, c: {}) == []
    assert (
        len(find_changes([series], Settings(min_effect=0.1), thresholds=thresholds, identity=lambda m, c: {}))
        == 1
    )


def test_history_changes_command_prints_the_table_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    step_results(tmp_path, qemu_from=4)
    config = tmp_path / "asv.conf.json"
    config.write_text(
        json.dumps({"repo": ".", "results_dir": "results/asv", "regressions_thresholds": {".*": 0.2}})
    )
    assert main(["history", "changes", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "change points in 2 series" in out and "lines up with QEMU version 7.2.22 → 7.2.99" in out
    assert main(["history", "changes", "--config", str(config), "--alpha", "2"]) == 2
    assert "--alpha 2.0" in capsys.readouterr().err
    assert main(["history", "changes", "--config", str(tmp_path / "missing.json")]) == 2


# -- real history runs ------------------------------------------------------------------------------

DATA = Path(__file__).parent / "data"


def real_run(tmp_path: Path, name: str) -> tuple[dict[str, Any], Path]:
    """A real history run (asv's results, the records' identity), written back as asv and the suite
    wrote them: ``history-run-*.json`` keeps only what the change points read."""
    run = json.loads((DATA / name).read_text())
    results = tmp_path / "results" / "asv"
    machine = results / run["machine"]
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text(json.dumps({"machine": run["machine"], "version": 1}))
    (results / "benchmarks.json").write_text(json.dumps({**run["benchmarks"], "version": 2}))
    for i, (commit, rows) in enumerate(run["results"].items()):
        data = {
            "commit_hash": commit,
            "env_name": "virtualenv-py3.11-setuptools-wheel",
            "date": 1_795_482_102_000 + i,
            "params": {"machine": run["machine"]},
            "result_columns": ["result", "params"],
            "results": rows,
            "version": 2,
        }
        (machine / f"{commit[:8]}-virtualenv-py3.11-setuptools-wheel.json").write_text(json.dumps(data))
        write_record(
            tmp_path, run["machine"], commit, run.get("pins", {}).get(commit), **run["identity"][commit]
        )
    return run, tmp_path / "results"


def real_changes(tmp_path: Path, name: str) -> tuple[dict[str, Any], Any]:
    """A real history run (:func:`real_run`) and the change points found in it."""
    run, results = real_run(tmp_path, name)
    return run, changes_of(results, run["regressions_thresholds"], run["order"])


def changes_of(results: Path, thresholds: dict[str, float], order: list[str]) -> Any:
    """The change points in the asv results and the records under ``results`` (as written by
    :func:`step_results` or :func:`real_run`)."""
    return history_changes(
        results_dir=results / "asv",
        records_root=results / "history",
        thresholds=thresholds,
        settings=Settings(),
        order=order,
    )


def test_a_real_history_with_a_policy_step_has_change_points_at_that_commit_only(tmp_path: Path) -> None:
    run, found = real_changes(tmp_path, "history-run-policy-step.json")
    stepped = run["order"][4]
    assert found.series == 58
    assert {c.commit for c in found.changes} == {stepped}
    metrics = {c.series.metric for c in found.changes}
    assert {"total_s", "phase.write_s", "s_per_gib", "dev.write_p99_ms"} <= metrics
    assert all(c.cause == "the commit (nothing else changed)" for c in found.changes)
    total = next(c for c in found.changes if c.series.metric == "total_s")
    assert total.after / total.before > 4


def test_a_real_history_whose_commit_moves_the_qemu_pin_has_its_steps_attributed_to_the_build(
    tmp_path: Path,
) -> None:
    run, found = real_changes(tmp_path, "history-run-qemu-pin.json")
    pinned = run["order"][4]
    assert run["pins"][pinned] == "10.0" and run["identity"][pinned]["qemu_version"] == "10.0.2"
    assert run["identity"][run["order"][3]]["qemu_version"] == "7.2.22"
    assert found.series == 58
    assert found.changes and {c.commit for c in found.changes} == {pinned}
    assert {"total_s", "phase.write_s", "s_per_gib", "host.write_calls"} <= {
        c.series.metric for c in found.changes
    }
    for change in found.changes:
        assert change.cause.startswith(
            "the QEMU build, not the commit's other changes (the commit moves its QEMU pin): "
            "QEMU pin runner → 10.0; QEMU version 7.2.22 → 10.0.2; "
            "QEMU build Debian 1:7.2+dfsg-7+deb12u18+b3 → Debian 1:10.0.2+ds-2+deb13u1~bpo12+1"
        ), change.cause
    write_calls = next(
        c
        for c in found.changes
        if c.series.metric == "host.write_calls" and c.series.cell.startswith("policy")
    )
    assert write_calls.after / write_calls.before < 0.7, "10.0.2 writes the same 32 MiB in fewer calls"


# -- a commit that moves its QEMU pin ---------------------------------------------------------------

V72 = "1:7.2+dfsg-7+deb12u18+b3"
V10 = "1:10.0.2+ds-2+deb13u1~bpo12+1"


def test_a_step_at_a_commit_that_moves_the_qemu_pin_is_the_builds() -> None:
    from harness.record import new_record

    def rec(pin: str | None, version: str, debian: str) -> Record:
        policy = {"drive_options": {}, **({"qemu": pin} if pin else {})}
        machine = {"qemu_version": version, "qemu_debian_version": debian, "qemu": f"/q/{version}"}
        return new_record(
            cell={"id": "c"}, machine=machine, subject={"policy": policy}, vm={}, run_id="history"
        )

    before = commit_identity([rec(None, "7.2.22", V72)])
    after = commit_identity([rec("10.0", "10.0.2", V10)])
    assert before["QEMU pin"] == "runner" and after["QEMU pin"] == "10.0"
    changes = identity_changes(before, after)
    assert [c.key for c in changes] == ["QEMU pin", "QEMU version", "QEMU build", "QEMU binary"]
    text = cause(changes, known=True)
    assert text == (
        "the QEMU build, not the commit's other changes (the commit moves its QEMU pin): QEMU pin runner → 10.0; "
        f"QEMU version 7.2.22 → 10.0.2; QEMU build Debian {V72} → Debian {V10}; QEMU binary /q/7.2.22 → /q/10.0.2"
    )
    # the same new QEMU without a pin that moved: the runner's, not the commit's
    runner = commit_identity([rec(None, "10.0.2", V10)])
    assert cause(identity_changes(before, runner), known=True).startswith(
        "not the commit: lines up with QEMU version"
    )


def test_the_qemu_page_lists_each_points_build_and_marks_where_it_changes() -> None:
    from harness.history.changes.points import add_nav_link, render_points

    builds = {
        c: ("runner", "7.2.22", f"Debian {V72}") if i < 4 else ("10.0", "10.0.2", f"Debian {V10}")
        for i, c in enumerate(COMMITS)
    }

    def identity(machine: str, commit: str) -> dict[str, str] | None:
        if commit == COMMITS[6]:
            return None  # a commit whose cells all failed: no identity
        pin, version, build = builds[commit]
        return {"QEMU pin": pin, "QEMU version": version, "QEMU build": build, "QEMU binary": "<b>"}

    page = render_points([("vm-tcg", c) for c in COMMITS], identity)
    rows = page.split("<tbody>")[1].split("</tbody>")[0].strip().splitlines()
    assert len(rows) == 8
    assert [i for i, r in enumerate(rows) if 'class="new-build"' in r] == [4]
    assert f"<td>10.0.2</td><td>Debian {V10}</td>" in rows[4] and "&lt;b&gt;" in rows[4]
    assert "<td>?</td>" in rows[6] and 'class="point"' in rows[7], (
        "the build after an unknown point is compared with the last known"
    )
    index = '<ul><li id="nav-li-regressions"><a href="regressions.html">Regressions</a></li></ul>'
    linked = add_nav_link(index)
    assert '<li id="nav-li-qemu"><a href="qemu.html">QEMU builds</a></li>' in linked
    assert add_nav_link(linked) == linked

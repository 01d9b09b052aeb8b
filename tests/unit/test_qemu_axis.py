"""QEMU as an axis: a sweep spec's and run's several builds, their records, the report side by side."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from recordkit import tcg_record
from test_sweep import fake_session

from harness.cli.builds import qemu_axis
from harness.errors import SpecError, UsageError
from harness.presets import load_preset
from harness.progress import Progress
from harness.record import Record, Sample, find_records
from harness.report.blocks import Table, build_report
from harness.report.series import build_labels, group_series, load_records
from harness.report.text import to_text
from harness.spec import make_cell
from harness.subject.binaries import Binaries, QemuChoice
from harness.sweep import expand_spec, parse_spec, run_sweep
from harness.workloads import registry

V72 = "1:7.2+dfsg-7+deb12u18+b3"
V10 = "1:10.0.2+ds-2+deb13u1~bpo12+1"


# -- the spec -----------------------------------------------------------------------------------


def test_a_spec_names_its_qemu_builds_apart_from_the_cells_axes() -> None:
    spec = parse_spec(
        '[axes]\nqemu = ["runner", "10.0"]\nformat = ["raw", "qcow2"]\n[params]\nworkload = "dd"\n'
    )
    assert spec.qemu == ("runner", "10.0")
    assert "qemu" not in spec.axes
    assert len(expand_spec(spec).cells) == 2, "the builds do not multiply the cells: the run does"
    assert parse_spec('[params]\nqemu = "/opt/q/usr/bin/qemu-system-x86_64"\n').qemu == (
        "/opt/q/usr/bin/qemu-system-x86_64",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[axes]\nqemu = ["runner", "../q"]\n', r"<spec>:2: qemu '\.\./q': use 'runner'"),
        ("[axes]\nqemu = []\n", r"<spec>:2: qemu = \[\] has no value"),
        ('[axes]\nqemu = ["10.0; rm -rf /"]\n', "<spec>:2: qemu '10.0; rm -rf /'"),
        (
            '[axes]\nqemu = ["runner", "10.0"]\nformat = ["raw"]\n[[exclude]]\nqemu = "10.0"\nreason = "x"\n',
            r"<spec>:5: qemu in \[\[exclude\]\]: every build runs every cell",
        ),
    ],
)
def test_a_bad_qemu_axis_names_the_line(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec(text)


def test_the_seed_004_preset_runs_the_runners_qemu_and_10_0() -> None:
    preset = load_preset("kvm-wiki-install")
    assert preset.spec.qemu == ("runner", "10.0")
    assert preset.at_scale(0.1).qemu == ("runner", "10.0")


# -- the command's values ------------------------------------------------------------------------


def _binary(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_each_axis_value_is_its_own_binaries_and_runner_is_the_runs(tmp_path: Path) -> None:
    runner = Binaries(qemu="/usr/bin/qemu-system-x86_64", qemu_img="/usr/bin/qemu-img")
    other = _binary(tmp_path / "q" / "qemu-system-x86_64")
    choices = qemu_axis(["runner", other], runner)
    assert choices == (QemuChoice("runner", runner), QemuChoice(other, Binaries(other, runner.qemu_img)))
    with pytest.raises(UsageError, match="--qemu runner and /usr/bin/qemu-system-x86_64 are the same QEMU"):
        qemu_axis(["runner", "/usr/bin/qemu-system-x86_64"], runner)
    with pytest.raises(SpecError, match="--qemu 'qemu-system-x86_64'"):
        qemu_axis(["runner", "qemu-system-x86_64"], runner)


def test_run_with_a_bad_qemu_list_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["run", "--workload", "dd", "--qemu", "runner,runner/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("diskbench: error: --qemu 'runner/x': use 'runner'") and err.count("\n") == 1
    assert main(["--qemu", "runner,10.0", "accel"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "diskbench: error: --qemu runner,10.0: several builds side by side are for run and sweep; give accel one\n"
    )


# -- the sweep's rounds --------------------------------------------------------------------------


def _cells() -> list[Any]:
    return [make_cell(format=f, workload="dd", dd_mib=16, size="256M") for f in ("raw", "qcow2")]


def test_each_round_takes_every_cell_under_each_build_and_each_build_keeps_its_records(
    tmp_path: Path,
) -> None:
    cells = _cells()
    old, new = fake_session(tmp_path, qemu_version="7.2.22"), fake_session(tmp_path, qemu_version="10.0.2")
    order: list[tuple[str, str, int]] = []
    for name, session in (("runner", old), ("10.0", new)):
        base = session.run_cell

        def logged(cell: Any, _name: str = name, _base: Any = base, **kw: Any) -> Any:
            order.append((_name, cell.id, kw["upto"]))
            return _base(cell, **kw)

        session.run_cell = logged  # type: ignore[method-assign]
    builds = [(QemuChoice("runner", Binaries.on_path()), old), (QemuChoice("10.0", Binaries.on_path()), new)]
    result = run_sweep(
        "s",
        cells,
        old,
        results_dir=tmp_path,
        repeat=2,
        progress=Progress(io.StringIO(), bar=False),
        builds=builds,
    )
    a, b = cells[0].id, cells[1].id
    assert order == [
        ("runner", a, 1), ("10.0", a, 1), ("runner", b, 1), ("10.0", b, 1),
        ("runner", a, 2), ("10.0", a, 2), ("runner", b, 2), ("10.0", b, 2),
    ]  # fmt: skip
    assert result.ran_samples == 8 and len(result.records) == 4
    sweep = tmp_path / "sweeps" / "s"
    assert sorted(p.name for p in (sweep / "qemu-runner").glob("*.json")) == sorted(
        f"{c.id}.json" for c in cells
    )
    assert {r.machine.qemu_version for r in find_records([sweep / "qemu-10.0"])} == {"10.0.2"}
    # a rerun resumes each build from its own records
    again = [(c, fake_session(tmp_path, qemu_version=s.machine.qemu_version)) for c, s in builds]
    rerun = run_sweep(
        "s", cells, again[0][1], results_dir=tmp_path, repeat=2, progress=Progress(io.StringIO(), bar=False),
        builds=again,
    )  # fmt: skip
    assert rerun.ran_samples == 0 and rerun.skipped_samples == 8
    # the report finds both builds' records in the sweep's directory and makes them one series
    records, _dirs = load_records([sweep])
    (series,) = group_series(records)
    assert series.builds == ["7.2.22", "10.0.2"]


# -- the report ----------------------------------------------------------------------------------


def _record(cell: Any, machine: dict[str, Any], total_s: float, run_id: str) -> Record:
    record = tcg_record(
        cell.as_dict(),
        machine={"hostname": "h", "accel": "tcg", **machine},
        subject={"guest": {"recipe_hash": "abc"}},
        run_id=run_id,
    )
    return record.with_sample(Sample(index=0, status="ok", metrics={"total_s": total_s}))


M72 = {"qemu_version": "7.2.22", "qemu_debian_version": V72, "qemu_sha256": "aa" * 32}
M10 = {"qemu_version": "10.0.2", "qemu_debian_version": V10, "qemu_sha256": "bb" * 32}


def test_two_builds_of_one_version_are_told_apart_by_their_debian_version_then_digest() -> None:
    cell = _cells()[0]
    security = {**M72, "qemu_sha256": "cc" * 32}
    records = [_record(cell, m, 1.0, "r") for m in (M72, M10, {**M72, "qemu_debian_version": "x"})]
    labels = sorted(build_labels(records).values())
    assert labels == ["10.0.2", "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)", "7.2.22 (Debian x)"]
    labels = sorted(build_labels([_record(cell, m, 1.0, "r") for m in (M72, security)]).values())
    assert labels == [
        f"7.2.22 (Debian {V72}, sha256 {'aa' * 6})",
        f"7.2.22 (Debian {V72}, sha256 {'cc' * 6})",
    ]


def test_the_seed_004_report_puts_both_builds_beside_the_seeds_two_versions() -> None:
    spec = load_preset("kvm-wiki-install").at_scale(0.1)
    cells = [
        c
        for c in expand_spec(spec).cells
        if c.workload.name.value == "install" and c.drive.interface.value == "ide"
    ]
    run_id = f"sweep-{spec.name}"
    records = [_record(c, M72, 60.0, run_id) for c in cells] + [_record(c, M10, 50.0, run_id) for c in cells]
    (series,) = group_series(records)
    assert series.builds == ["7.2.22", "10.0.2"]
    blocks = build_report([series])
    text = to_text(blocks)
    assert "QEMU builds side by side: 7.2.22, 10.0.2" in text
    seed = next(b for b in blocks if isinstance(b, Table) and b.header[0] == "figure")
    assert seed.header == (
        "figure", "metric", "seed 004, QEMU 0.10.5", "seed 004, QEMU 0.11.0-rc1",
        "today, QEMU 7.2.22", "today, QEMU 10.0.2",
    )  # fmt: skip
    row = next(r for r in seed.rows if r[0] == "qcow2 IDE none")
    assert row[2:] == ("16:52 min", "5:44 min", "60.00 s (n=1)", "50.00 s (n=1)")
    raw = next(r for r in seed.rows if r[0] == "raw IDE none")
    assert raw[2:4] == ("-", "5:41 min")
    # the cells' table: each cell's two builds one after the other, the build a column
    cells_table = next(b for b in blocks if isinstance(b, Table) and "qemu" in b.header)
    at = cells_table.header.index("qemu")
    assert [r[at] for r in cells_table.rows[:2]] == ["7.2.22", "10.0.2"]
    # the shape claims, once per build
    assert text.count("measured claims of seed 004 hold today under QEMU 7.2.22") == 1
    assert text.count("measured claims of seed 004 hold today under QEMU 10.0.2") == 1


def test_one_build_reads_as_before() -> None:
    cell = _cells()[0]
    (series,) = group_series([_record(cell, M72, 1.0, "r")])
    text = to_text(build_report([series]))
    assert "QEMU 7.2.22, qemu-img ?" in text and "side by side" not in text


# -- bonnie++'s per-character tests --------------------------------------------------------------


def test_bonnie_char_is_told_to_the_guest_and_named_in_the_id_only_when_on() -> None:
    off = make_cell(workload="bonnie", size="2G")
    on = make_cell(workload="bonnie", size="2G", bonnie_char="ON")
    assert off.workload.slug == "bonnie-512m-r256m-n0-ext4", "cells recorded before keep their ids"
    assert on.workload.slug == "bonnie-512m-r256m-n0-chron-ext4"
    assert "diskbench.bonnie_char=on" in on.workload.kernel_args()
    assert registry.params()["bonnie_char"].choices == ("off", "on")
    with pytest.raises(SpecError, match="unknown bonnie_char 'maybe': use one of off, on"):
        make_cell(workload="bonnie", bonnie_char="maybe")

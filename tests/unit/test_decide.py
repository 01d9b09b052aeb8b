"""From one run to a verdict: an inconclusive comparison ends with the commands that decide it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.cli.run import cells_from_args, run_argv
from harness.record import new_record, write_record
from harness.record.model import Sample
from harness.spec import make_cell

DEFAULT_RUN = [
    "run",
    "--format",
    "raw,qcow2",
    "--preallocation",
    "off,falloc,metadata",
    "--cache",
    "writeback",
    "--interface",
    "virtio-blk",
    "--workload",
    "install,dd",
    "--payload",
    "small",
    "--repeat",
    "2",
]


def test_the_run_command_of_some_cells_measures_those_cells_again() -> None:
    cells, _ = cells_from_args(build_parser().parse_args(DEFAULT_RUN))
    argv = run_argv(cells, repeat=4)
    assert argv[:2] == ["diskbench", "run"] and argv[-2:] == ["--repeat", "4"]
    again, _ = cells_from_args(build_parser().parse_args(argv[1:]))
    assert [c.id for c in again] == [c.id for c in cells]
    odd = [
        make_cell(
            format="qcow2", cluster_size="1M", workload="dd", dd_mib=64, size="1G", cache="none", aio="native"
        )
    ]
    argv = run_argv(odd, repeat=5)
    assert [c.id for c in cells_from_args(build_parser().parse_args(argv[1:]))[0]] == [odd[0].id]


def _side(root: Path, totals: list[float]) -> Path:
    cell = make_cell(format="raw", workload="dd", dd_mib=64, size="1G")
    rec = new_record(
        cell=cell.as_dict(), machine={"accel": "tcg"}, subject={}, vm={"accel": "tcg"}, run_id="r"
    )
    for i, total in enumerate(totals):
        rec = rec.with_sample(Sample(index=i, status="ok", metrics={"total_s": total}))
    write_record(root / f"{rec.cell_id}.json", rec)
    return root


def test_too_few_samples_end_with_the_commands_that_decide(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _side(tmp_path / "base", [10.0, 10.2])
    head = _side(tmp_path / "head", [10.1, 10.3])
    assert main(["compare", str(base), str(head)]) == 0
    out = capsys.readouterr().out
    tail = out[out.index("To decide the 1 inconclusive cell:") :].splitlines()
    assert "4 samples a cell on each side" in tail[0]
    command = " ".join(line.strip().rstrip("\\") for line in tail[1:-2])
    assert command.split() == [
        *[
            "diskbench",
            "run",
            "--format",
            "raw",
            "--preallocation",
            "off",
            "--size",
            "1g",
            "--cache",
            "writeback",
        ],
        *["--interface", "virtio-blk", "--workload", "dd", "--dd-mib", "64", "--repeat", "4"],
        *["--accel", "tcg"],
    ]
    assert tail[-1].strip() == "diskbench compare 'latest~1' latest"
    assert all(len(line) <= 100 for line in out.splitlines())


def test_run_dry_run_lists_the_cells_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        *DEFAULT_RUN,
        "--dry-run",
        "--work-dir",
        str(tmp_path / "work"),
        "--results-dir",
        str(tmp_path / "res"),
    ]
    (tmp_path / "work").mkdir()
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "run: 10 cells x 2 samples"
    assert sum(line.startswith("  run   ") for line in lines) == 10
    assert "  left out (2 combinations): preallocation 'metadata' is not allowed for raw" in captured.out
    assert any(line.startswith("estimate: 20 samples, about ") for line in lines)
    assert "skipped" not in captured.err and not (tmp_path / "res").exists()


def test_the_gates_decide_command_keeps_every_flag_that_shaped_it(tmp_path: Path) -> None:
    from harness.cli.gate import reproduce_argv
    from harness.compare.model import Budget
    from harness.compare.screen import decide_command

    spec = tmp_path / "specs" / "gate.toml"
    given = [
        *["--qemu", "/opt/q/qemu", "--qemu-img", "/opt/q/qemu-img", "gate", "--base", "main"],
        *["--head", "topic"],
        *["--spec", str(spec), "--repo", str(tmp_path), "--budget-min", "9", "--rounds", "3"],
        *["--max-rounds", "12", "--seed", "26", "--no-canary", "--policy", str(tmp_path / "p.toml")],
        *["--base-qemu", "/opt/a/qemu", "--head-qemu", "/opt/b/qemu", "--base-qemu-img", "/opt/a/img"],
        *["--head-qemu-img", "/opt/b/img", "--build-command", "make -j4", "--metric", "total_s"],
        *["--min-effect", "3%", "--rule", "total_s:2%", "--alpha", "0.05", "--changed-passes"],
        *["--mix-starts", "--accel", "tcg", "--work-dir", str(tmp_path / "w")],
        *["--results-dir", str(tmp_path / "r"), "--boot-timeout-s", "50", "--workload-timeout-s", "90"],
        *["--max-disk-size", "8G", "--start", "cold"],
        *["--out", str(tmp_path / "o"), "--junit", str(tmp_path / "j.xml"), "--pages-url", "https://x.io/"],
    ]
    args = build_parser().parse_args(given)
    commits = ["a" * 40, "b" * 40]
    # 12 rounds took 6 minutes: 30 rounds get a budget of 15
    argv = decide_command(reproduce_argv(args, commits, tmp_path), 30, Budget(used_min=6.0, rounds=12))
    assert argv is not None and argv[0] == "diskbench"
    again = build_parser().parse_args(argv[1:])  # the printed command, parsed as a dry run would
    wanted = vars(args) | {"base": commits[0], "head": commits[1], "max_rounds": 30, "budget_min": 15.0}
    # where the output goes is the new run's own; the spec is named within the repository
    wanted |= {"out": None, "junit": None, "pages_url": None, "spec": Path("specs/gate.toml")}
    assert vars(again) == wanted


def test_compares_decide_commands_keep_the_accelerator_results_dir_and_options(tmp_path: Path) -> None:
    from harness.cli.compare import decide_argvs
    from harness.record import find_records

    base = _side(tmp_path / "base", [10.0, 10.2])
    given = ["compare", str(base), str(base), "--results-dir", str(tmp_path / "r"), "--metric", "total_s"]
    given += ["--min-effect", "3%", "--seed", "5", "--alpha", "0.05", "--rule", "total_s:2%"]
    args = build_parser().parse_args([*given, "--output-format", "json", "--out", str(tmp_path / "o")])
    run, again = decide_argvs(find_records([base]), 6, args)
    ran = build_parser().parse_args(run[1:])
    assert (ran.accel, ran.results_dir, ran.repeat, ran.workload) == ("tcg", tmp_path / "r", 6, "dd")
    compared = build_parser().parse_args(again[1:])
    assert vars(compared) == vars(args) | {
        "base": "latest~1",
        "head": "latest",
        "output_format": "text",
        "out": None,
    }

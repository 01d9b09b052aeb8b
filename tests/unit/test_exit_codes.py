"""Exit codes of compare and gate: 1 a regression, 3 a cell in error, 0 otherwise; a regression wins."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.cli import main
from harness.compare import Kind, Verdict
from harness.compare.comparison import verdict_exit_code
from harness.compare.model import ComparedCell, Comparison, Summary
from harness.record import Sample, new_record, write_record
from harness.spec import make_cell

MACHINE = {
    "arch": "x86_64",
    "cpu": "AMD EPYC",
    "accel": "kvm",
    "qemu_version": "7.2.0",
    "work_dir_fs": "ext4",
}


def write_cell(directory: Path, dd_mib: int, mean: float, *, seed: int, ok: bool = True) -> None:
    cell = make_cell(workload="dd", dd_mib=dd_mib).as_dict()
    rng = random.Random(seed)
    record = new_record(cell=cell, machine=MACHINE, subject={}, vm={"mem_mib": 256, "smp": 1}, run_id="r")
    for index in range(6):
        if ok:
            sample = Sample(index=index, status="ok", metrics={"total_s": mean * rng.gauss(1.0, 0.01)})
        else:
            sample = Sample(index=index, status="error", reason="QEMU exited with 1")
        record = record.with_sample(sample)
    write_record(directory / f"{cell['id']}.json", record)


@pytest.mark.parametrize(
    ("fails", "cell_verdicts", "code"),
    [
        (True, [Verdict.REGRESSION], 1),
        (True, [Verdict.REGRESSION, Verdict.ERROR], 1),
        (True, [Verdict.CHANGED], 1),
        (False, [Verdict.CHANGED], 0),
        (False, [Verdict.UNCHANGED, Verdict.ERROR], 3),
        (False, [Verdict.INCONCLUSIVE], 0),
        (False, [Verdict.IMPROVEMENT], 0),
        (False, [Verdict.UNCHANGED], 0),
    ],
)
def test_each_outcome_has_one_exit_code(fails: bool, cell_verdicts: list[Verdict], code: int) -> None:
    comparison = Comparison(
        created_at="x",
        verdict=cell_verdicts[0],
        summary=Summary(fails=fails),
        cells=tuple(
            ComparedCell(cell_id=f"c{i}", verdict=v, kind=Kind.METRIC) for i, v in enumerate(cell_verdicts)
        ),
    )
    assert verdict_exit_code(comparison) == code


def test_a_head_that_loses_a_cell_does_not_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    for dd_mib in (64, 128):
        write_cell(base, dd_mib, 10.0, seed=dd_mib)
    write_cell(head, 64, 10.0, seed=99)
    assert main(["compare", str(base), str(head)]) == 3
    assert "error" in capsys.readouterr().out.lower()


def test_a_regression_wins_over_a_cell_in_error(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    write_cell(base, 64, 10.0, seed=1)
    write_cell(head, 64, 13.0, seed=2)
    write_cell(base, 128, 10.0, seed=3, ok=False)
    write_cell(head, 128, 10.0, seed=4, ok=False)
    assert main(["compare", str(base), str(head)]) == 1


def test_one_table_of_exit_codes_in_every_help_and_the_usage_page() -> None:
    from test_help import ALL

    from harness.cli.common import exit_epilog, exit_table_markdown
    from harness.errors import exit_codes
    from harness.paths import REPO_ROOT

    for name, parser in ALL:
        words = name.split()
        command = words[1] if len(words) > 1 else None
        assert parser.epilog == exit_epilog(command), name
        help_text = " ".join(parser.format_help().split())
        for meaning in exit_codes(command):
            assert f"{meaning.code} {meaning.meaning}" in help_text, (name, meaning.code)
    codes = {
        name: {e.code for e in exit_codes(name)} for name in ("compare", "gate", "bisect", "run", "show")
    }
    # 1 is a regression and nothing else: only the commands that compare give it
    assert codes["compare"] == codes["gate"] == {0, 1, 2, 3, 130}
    assert codes["bisect"] == {0, 2, 3, 4, 130} and codes["run"] == codes["show"] == {0, 2, 3, 130}
    assert exit_table_markdown() in (REPO_ROOT / "docs" / "usage.md").read_text()


def test_runs_with_no_cell_in_common_exit_3_as_compare_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    write_cell(base, 64, 10.0, seed=1)
    write_cell(head, 128, 10.0, seed=2)
    assert main(["compare", str(base), str(head)]) == 3
    capsys.readouterr()
    from test_help import ALL

    help_text = " ".join(dict(ALL)["diskbench compare"].format_help().split())
    assert "3 infrastructure failure" in help_text and "no cell in common" in help_text

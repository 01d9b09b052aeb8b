"""Real gates under TCG on a throwaway clone: a throttled head is caught, A/A is not, failures are errors."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from gatekit import tcg_gate
from gitrepo import commit_policy, git

from harness.compare.comparison import load_comparison
from harness.errors import ExitCode
from harness.gate import SubjectSource, parse_gate_spec
from harness.host import accounts, confine

# timed: the verdicts are read from the pairs' times (an A/A gate unchanged); one at a time, never beside another test
pytestmark = [pytest.mark.integration, pytest.mark.guest, pytest.mark.timed]

SPEC = """
name = "test-gate"
# Holm over the gated metric and the structural counters (4 tests): complete separation at 6
# rounds gives p = 2/924, which the family-wise 0.01 accepts; 5 rounds (p = 2/252) cannot
rounds = 6
max_rounds = 6
budget_min = 10
metrics = ["total_s"]
min_effect = "5%"
# base's and head's samples of a round at the same moment, crossed: the host's load (CI runs this
# beside other work) slows both alike; one after the other, 6 rounds under a load of 5 were
# inconclusive on a throttle several times slower
guest_together = true

[params]
dd_mib = 64

[[cells]]
name = "policy-dd"
workload = "dd"
"""
# dd of 64 MiB writes at ~80 MiB/s under TCG here; 24 MiB/s makes the cell several times slower
THROTTLE_BPS = 24 * 1024 * 1024


@pytest.fixture(scope="module")
def repo(project_clone: Callable[[str], Path]) -> Path:
    """A clone of this repository with one more commit: the policy throttles writes."""
    throttle = f'[drive.options]\n"throttling.bps-write" = {THROTTLE_BPS}\n'
    return commit_policy(
        project_clone("gate"),
        lambda text: text.replace("[drive.options]\n", throttle, 1),
        "policy: throttle writes",
        "throttled",
    )


def gate(
    repo: Path, tmp_path: Path, disk_dir: Path, base: str | SubjectSource, head: str | SubjectSource
) -> tuple[int, dict]:
    spec = parse_gate_spec(SPEC, source="test-gate.toml")
    result = tcg_gate(repo, spec, base, head, disk_dir=disk_dir, out_dir=tmp_path / "out", seed=7)
    doc = load_comparison(tmp_path / "out" / "comparison.json").to_json()
    assert doc == json.loads(json.dumps(result.comparison.to_json()))
    assert (tmp_path / "out" / "summary.md").read_text() == result.markdown
    return result.exit_code, doc


def test_throttled_head_is_a_regression_of_the_throttled_cell(
    repo: Path, tmp_path: Path, disk_dir: Path, guest: object
) -> None:
    code, doc = gate(repo, tmp_path, disk_dir, "base", "throttled")
    assert doc["verdict"] == "regression"
    assert code == ExitCode.REGRESSION
    (cell,) = doc["cells"]
    assert cell["verdict"] == "regression", cell
    assert cell["cell_id"].startswith("qcow2-off-") and ".dd-64m-" in cell["cell_id"]
    total = next(m for m in cell["metrics"] if m["metric"] == "total_s")
    assert total["ratio"] > 1.3 and total["ci_low"] > 1.05
    assert cell["rounds"] == 6
    assert doc["head"]["subject"]["policy"]["drive_options"] == {"throttling.bps-write": str(THROTTLE_BPS)}
    assert doc["base"]["subject"]["policy"]["drive_options"] == {}
    # the throttle reached QEMU: head's argv carries it, base's does not
    head_rec = json.loads(next((tmp_path / "out" / "records" / "head").glob("*.json")).read_text())
    base_rec = json.loads(next((tmp_path / "out" / "records" / "base").glob("*.json")).read_text())
    assert f"throttling.bps-write={THROTTLE_BPS}" in " ".join(head_rec["samples"][0]["argv"])
    assert "throttling" not in " ".join(base_rec["samples"][0]["argv"])
    # each side's QEMU ran as an account of its own: base as the QEMU account, head as a uid of its
    # own for this gate alone, gone with it
    base_ran, head_ran = base_rec["vm"]["confinement"], head_rec["vm"]["confinement"]
    assert base_ran["uid"] == confine.account().uid
    if os.geteuid() == 0:
        assert head_ran["uid"] not in (0, base_ran["uid"])
        assert head_ran["user"] == f"uid {head_ran['uid']}"
        assert not accounts.uid_processes(head_ran["uid"])
    else:
        assert head_ran["uid"] == base_ran["uid"] == os.geteuid()
    # worktrees are gone
    assert git(repo, "worktree", "list").count("\n") == 0
    # the JUnit XML `diskbench gate` writes beside it: a testcase per cell, the regression a failure
    junitparser = pytest.importorskip("junitparser")
    from harness.report.exports import write_junit

    comparison = load_comparison(tmp_path / "out" / "comparison.json")
    write_junit(tmp_path / "junit.xml", comparison)
    cases = [case for suite in junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml")) for case in suite]
    assert [case.name for case in cases] == [c["cell_id"] for c in doc["cells"]]
    assert [type(r).__name__ for r in cases[0].result] == ["Failure"]


def test_same_revision_on_both_sides_is_not_a_regression(
    repo: Path, tmp_path: Path, disk_dir: Path, guest: object
) -> None:
    code, doc = gate(repo, tmp_path, disk_dir, "base", "base")
    assert doc["verdict"] != "regression", doc["cells"]
    assert code == ExitCode.OK
    (cell,) = doc["cells"]
    assert cell["verdict"] in ("unchanged", "inconclusive")
    assert cell["rounds"] == 6


def broken_qemu(directory: Path) -> str:
    """A qemu-system-x86_64 that reports a version and then fails to start any guest."""
    script = directory / "broken-qemu"
    script.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "QEMU emulator version 7.2.0"; exit 0; fi\n'
        'echo "qemu: could not load kernel (broken on purpose)" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    return str(script)


def test_both_sides_failing_to_boot_is_an_error_and_exit_3(
    repo: Path, tmp_path: Path, disk_dir: Path, qemu_reachable_dir: Path
) -> None:
    qemu = broken_qemu(qemu_reachable_dir)
    code, doc = gate(
        repo,
        tmp_path,
        disk_dir,
        SubjectSource("base", "base", qemu=qemu),
        SubjectSource("head", "base", qemu=qemu),
    )
    (cell,) = doc["cells"]
    assert cell["verdict"] == "error" and cell["kind"] == "both-failed"
    assert doc["verdict"] == "error"
    assert code == ExitCode.INFRA


def test_head_failing_to_boot_is_a_regression_of_its_own_kind(
    repo: Path, tmp_path: Path, disk_dir: Path, guest: object, qemu_reachable_dir: Path
) -> None:
    qemu = broken_qemu(qemu_reachable_dir)
    code, doc = gate(repo, tmp_path, disk_dir, "base", SubjectSource("head", "base", qemu=qemu))
    (cell,) = doc["cells"]
    assert cell["verdict"] == "regression" and cell["kind"] == "failure"
    assert "broken on purpose" in cell["reason"] or "exited" in cell["reason"]
    assert code == ExitCode.REGRESSION

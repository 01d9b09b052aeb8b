"""Every reader of a policy runs the QEMU it pins (``[qemu] version``): ``sweep --policy`` as the
gate and history do, and each comparison of a bisection at each commit of its range, so the commit
that moves the pin is measured under the new QEMU."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
from gitrepo import git, new_repo

from harness.bisect import commit_range
from harness.bisect.builds import Builds
from harness.cli import main
from harness.gate.subjects import prepared_subjects, side_binaries
from harness.paths import REPO_ROOT, qemu_cache_dir
from harness.subject.binaries import Binaries
from harness.subject.qemu_build import QemuBuild, load_build

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("apt-get") is None, reason="fetches Debian's packages with apt"),
]

PIN = '\n[qemu]\nversion = "10.0"\n'


@pytest.fixture(scope="module")
def build_10() -> QemuBuild:
    """``diskbench qemu get 10.0``: fetched, or found in the cache and checked."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["qemu", "get", "10.0"]) == 0
    return load_build(Path(out.getvalue().strip().splitlines()[-1]))


def test_sweep_policy_runs_the_qemu_it_pins(
    build_10: QemuBuild, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text((REPO_ROOT / "policy.toml").read_text() + PIN)
    spec = tmp_path / "s.toml"
    spec.write_text('name = "pinned"\nrepeat = 1\n[axes]\nworkload = ["dd"]\n[params]\ndd_mib = 16\n')
    (tmp_path / "w").mkdir()
    argv = ["sweep", str(spec), "--policy", str(policy), "--dry-run", "--accel", "tcg"]
    argv += ["--work-dir", str(tmp_path / "w"), "--results-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"pins QEMU 10.0 ([qemu] version): {build_10.binaries().qemu}" in err
    # --qemu given wins over the pin, as a QEMU given for a gate's side does
    assert main(["--qemu", "runner", *argv]) == 0
    assert "pins QEMU" not in capsys.readouterr().err


def test_each_commit_of_a_bisection_runs_the_qemu_its_policy_pins(
    build_10: QemuBuild, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    policy = (REPO_ROOT / "policy.toml").read_text()
    commits = []
    for number in range(4):
        # the third commit moves the pin to 10.0; nothing else changes
        (repo / "policy.toml").write_text(policy + (PIN if number >= 2 else ""))
        (repo / "notes.txt").write_text(f"commit {number}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {number}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    good, _bad, between = commit_range(repo, commits[0], commits[-1])
    runner = Binaries.on_path()
    builds = Builds(repo, build_command=None, default_policy=REPO_ROOT / "policy.toml", log=lambda _m: None)
    qemu = {}
    for commit in (good, *between):
        # each comparison of the bisection takes its sides as run_gate does
        with prepared_subjects(
            repo, [builds.source("head", commit)], default_policy=REPO_ROOT / "policy.toml"
        ) as (subject,):
            qemu[commit] = side_binaries(subject, runner, qemu_cache_dir()).qemu
    assert [qemu[c] for c in commits] == [runner.qemu, runner.qemu, *[build_10.binaries().qemu] * 2]

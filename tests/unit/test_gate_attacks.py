"""Attacks of a pull request on the gate that end before anything runs: a disk to fill the runner,
a second gate on the same work dir."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gitrepo import git, new_repo

from harness.cli import main
from harness.host.workdir import locked

POLICY = """\
[image]
format = "qcow2"
preallocation = "{preallocation}"
size = "{size}"

[drive]
cache = "none"
aio = "threads"
interface = "virtio-blk"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of a policy alone: tag ``base`` (2G, no preallocation) and one head per attack."""
    path = new_repo(tmp_path / "repo")
    (path / "policy.toml").write_text(POLICY.format(preallocation="off", size="2G"))
    git(path, "add", "policy.toml")
    git(path, "commit", "-q", "-m", "base")
    git(path, "tag", "base")
    for tag, preallocation, size in (("huge", "full", "64T"), ("over-cap", "full", "80G")):
        git(path, "checkout", "-q", "-b", tag, "base")
        (path / "policy.toml").write_text(POLICY.format(preallocation=preallocation, size=size))
        git(path, "commit", "-q", "-am", tag)
    return path


def gate(repo: Path, tmp_path: Path, head: str, *more: str) -> list[str]:
    return [
        "gate", "--repo", str(repo), "--base", "base", "--head", head, "--accel", "tcg",
        "--work-dir", str(tmp_path / "work"), "--results-dir", str(tmp_path / "results"),
        "--out", str(tmp_path / "out"), "--no-canary", *more,
    ]  # fmt: skip


@pytest.mark.parametrize(("head", "size"), [("huge", "64t"), ("over-cap", "80g")])
def test_a_head_policy_that_would_fill_the_runners_disk_is_refused_before_anything_runs(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], head: str, size: str
) -> None:
    t0 = time.monotonic()
    code = main(gate(repo, tmp_path, head))
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("diskbench: error:")]
    assert code == 2, err
    assert took < 30, took
    assert len(errors) == 1, err
    assert "under the policy of head" in errors[0]
    assert f"size {size} is over this runner's cap of 64g (--max-disk-size)" in errors[0]
    # the base passed the same checks; nothing of the head was built, booted or created
    assert "gate: base: disk: the largest image" in err
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "work").exists() or not any(
        p.name != ".diskbench.lock" for p in (tmp_path / "work").iterdir()
    )


def test_the_disk_cap_is_the_runners_flag(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a cap below base's 2G disk refuses base too: the same checks hold for both sides
    code = main(gate(repo, tmp_path, "over-cap", "--max-disk-size", "1G"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "under the policy of base" in err and "size 2g is over this runner's cap of 1g" in err


def test_a_gate_takes_the_work_dirs_lock(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with locked(tmp_path / "work", what="work dir", flag="--work-dir"):
        code = main(gate(repo, tmp_path, "base"))
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"work dir {tmp_path / 'work'} is in use by another diskbench run" in err
    assert not (tmp_path / "out").exists()

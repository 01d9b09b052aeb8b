"""What a pull request built or named never runs as root: its build command (as an account of its own),
``--version`` probes of its binaries, ``qemu-img measure``.  Each binary here writes down who ran it."""

from __future__ import annotations

import os
from pathlib import Path

from gitrepo import git, new_repo

from harness.gate.subjects import SubjectSource, prepare_subject, remove_worktree
from harness.host import confine
from harness.host.hostinfo import tool_version
from harness.paths import REPO_ROOT
from harness.spec import make_cell
from harness.sweep import measure_image


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def expected_uid() -> int:
    return confine.account().uid


def test_a_version_probe_runs_as_the_account(shared: Path) -> None:
    fake = script(shared / "qemu-img", 'echo "qemu-img version 9.9 uid=$(id -u)"\n')
    assert tool_version(fake) == f"qemu-img version 9.9 uid={expected_uid()}"


def test_qemu_img_measure_runs_as_the_account(shared: Path) -> None:
    fake = script(shared / "qemu-img", 'echo "{\\"required\\": $(id -u), \\"fully-allocated\\": 1}"\n')
    measured = measure_image(make_cell(format="qcow2", workload="dd", size="1G"), qemu_img=fake)
    assert measured.required == expected_uid()


def test_the_build_command_runs_as_an_account_of_its_own_in_a_checkout_it_owns(shared: Path) -> None:
    repo = new_repo(shared / "repo")
    (repo / "policy.toml").write_text((REPO_ROOT / "policy.toml").read_text())
    git(repo, "add", "policy.toml")
    git(repo, "commit", "-qm", "x")
    build = (
        "sh -c 'id -u > built-by && stat -c %u . > owner && mkdir build && "
        "cp /bin/true build/qemu-system-x86_64 && cp /bin/true build/qemu-img'"
    )
    into = shared / "checkouts" / "head"
    into.parent.mkdir()
    into.parent.chmod(0o755)
    subject = prepare_subject(
        repo,
        SubjectSource("head", "main"),
        into,
        default_policy=REPO_ROOT / "policy.toml",
        build_command=build,
    )
    try:
        assert subject.build is not None
        uid = subject.build.account.uid
        assert (into / "built-by").read_text().strip() == str(uid)
        assert subject.qemu == str(into / "build" / "qemu-system-x86_64")
        assert subject.describe().to_json()["build"]["uid"] == uid
        if os.geteuid() == 0:
            # neither root nor the QEMU account: a uid of its own, which owned the checkout while it built
            assert uid not in (0, expected_uid())
            assert (into / "owner").read_text().strip() == str(uid)
            # and sealed after it: root's, read-only, still runnable by the QEMU account
            built = (into / "build" / "qemu-system-x86_64").stat()
            assert (built.st_uid, built.st_mode & 0o7777) == (0, 0o555)
    finally:
        remove_worktree(repo, into)

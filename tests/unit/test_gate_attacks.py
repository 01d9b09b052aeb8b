"""Attacks of a pull request on the gate that end before anything runs: a disk to fill the runner,
a second gate on the same work dir; a head build that reaches for base's QEMU."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest
from gitrepo import git, new_repo

from harness.cli import main
from harness.gate.subjects import SubjectSource, prepared_subjects
from harness.host import accounts, confine
from harness.host.workdir import locked
from harness.paths import REPO_ROOT

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


BUILD = """\
#!/bin/sh
# a QEMU tree's build, as a gate's --build-command runs it
set -e
mkdir -p build
printf '#!/bin/sh\\necho {side}\\n' > build/qemu-system-x86_64
cp build/qemu-system-x86_64 build/qemu-img
chmod 755 build/qemu-system-x86_64 build/qemu-img
"""

HOSTILE = """\
# head's build rewrites base's QEMU, every way it can, and leaves a process behind
for how in write remove chmod; do
  case $how in
    write) printf '#!/bin/sh\\necho TAMPERED-by-head\\n' > ../base/build/qemu-system-x86_64 ;;
    remove) rm -f ../base/build/qemu-system-x86_64 &&
      printf '#!/bin/sh\\necho TAMPERED-by-head\\n' > ../base/build/qemu-system-x86_64 ;;
    chmod) chmod 777 ../base/build/qemu-system-x86_64 ../base/build ;;
  esac 2>/dev/null || true
done
setsid sleep {marker} </dev/null >/dev/null 2>&1 &
"""


def leftovers(marker: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if f"sleep {marker}" in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="the sides' own accounts need root, as on a CI runner")
def test_a_head_build_cannot_rewrite_base_qemu_nor_leave_a_process_behind(tmp_path: Path) -> None:
    marker = 30_000 + secrets.randbelow(10_000)
    path = tmp_path / "qemu"
    path.mkdir()
    new_repo(path)
    (path / "build.sh").write_text(BUILD.format(side="base-qemu"))
    git(path, "add", "build.sh")
    git(path, "commit", "-q", "-m", "base")
    git(path, "tag", "base")
    (path / "build.sh").write_text(BUILD.format(side="head-qemu") + HOSTILE.format(marker=marker))
    git(path, "commit", "-q", "-am", "head: rewrite base's QEMU, leave a process")
    sources = [SubjectSource("base", "base"), SubjectSource("head", "main")]
    try:
        with prepared_subjects(
            path, sources, default_policy=REPO_ROOT / "policy.toml", build_command="sh build.sh"
        ) as (base, head):
            assert base.qemu is not None and head.qemu is not None
            binary = Path(base.qemu)
            assert binary.read_text() == "#!/bin/sh\necho base-qemu\n"
            assert subprocess.run([binary], capture_output=True, text=True).stdout == "base-qemu\n"
            # base's tree is root's and read-only to everyone; each side was built by a uid of its own
            assert binary.stat().st_uid == 0 and binary.stat().st_mode & 0o222 == 0
            assert binary.parent.stat().st_mode & 0o222 == 0
            assert base.build is not None and head.build is not None
            assert base.build.account.fresh and head.build.account.fresh
            assert len({base.build.account.uid, head.build.account.uid, confine.account().uid, 0}) == 4
            # nothing of either build is alive, the detached sleep included; the record says so
            assert leftovers(marker) == []
            assert accounts.uid_processes(head.build.account.uid) == []
            assert head.describe().to_json()["build"]["leftovers_killed"] >= 1
            assert base.describe().to_json()["build"]["uid"] == base.build.account.uid
    finally:
        for line in leftovers(marker):
            os.kill(int(line.split(":")[0]), 9)


def test_checking_a_head_out_runs_no_filter_nor_hook_the_runner_has_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a filter driver configured for the whole system (git-lfs installs one), and one in the
    # repository's own config: a head whose .gitattributes names them must not make them run as root
    ran = tmp_path / "ran"
    ran.mkdir()
    system = tmp_path / "gitconfig"
    system.write_text(
        f'[filter "sys"]\n\tclean = cat\n\tsmudge = "touch {ran}/sys; cat"\n\trequired = true\n'
    )
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(system))
    path = tmp_path / "repo"
    path.mkdir()
    new_repo(path)
    git(path, "config", "filter.local.smudge", f"touch {ran}/local; cat")
    hooks = path / ".git" / "hooks"
    (hooks / "post-checkout").write_text(f"#!/bin/sh\ntouch {ran}/hook\n")
    (hooks / "post-checkout").chmod(0o755)
    (path / "policy.toml").write_text(POLICY.format(preallocation="off", size="2G"))
    (path / ".gitattributes").write_text("policy.toml filter=sys\n*.txt filter=local\n")
    (path / "a.txt").write_text("a\n")
    git(path, "add", ".")
    git(path, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "head with filters")
    assert not any(ran.iterdir())  # git add ran the clean side only, which none of them has
    with prepared_subjects(
        path, [SubjectSource("head", "main")], default_policy=REPO_ROOT / "policy.toml"
    ) as (head,):
        assert (head.checkout / "a.txt").read_text() == "a\n"
        assert head.policy.image["size"] == "2G"
    assert sorted(p.name for p in ran.iterdir()) == []

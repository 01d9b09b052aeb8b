"""History end to end: asv over a throwaway copy of this project, real guests under TCG.

The copy gets four commits; the third throttles writes in the storage
policy (``throttling.bps-write`` = 8 MiB/s, several times below what dd
writes under TCG), the fourth moves the policy's QEMU pin from the runner's
to 10.0 (Debian's bookworm-backports build, fetched into the QEMU cache once).
``diskbench history`` runs the suite over the four with a trimmed matrix (one
dd cell, which is also the policy's cell, one sample), publishes, and asv's
regressions among the first three commits must name the third and no other;
the fourth's records must name QEMU 10.0.2, its step be the QEMU build's, and
the pages list each point's QEMU.  The pages are opened in headless Chromium,
served from loopback.  A stand-in QEMU repository, whose build makes wrappers around
the system's binaries, checks the QEMU config's build -> env -> suite handoff.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitrepo import copy_worktree, git, new_repo
from served_chromium import CHROMEDRIVER, CHROMIUM, served

from harness.history.asvrun import HistoryOptions, HistoryResult, run_history
from harness.host.hostinfo import filesystem_type
from harness.paths import cache_dir
from harness.record import Record, load_record
from harness.sample.images import MEMORY_FILESYSTEMS
from harness.subject.binaries import Binaries

pytestmark = [pytest.mark.integration, pytest.mark.guest]
# the history over four commits is timed: asv's regressions are read from their times; one at a
# time, never beside another test. The QEMU config's run asserts no time: it runs in the first tier
timed = pytest.mark.timed

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
THROTTLE_BPS = 8 * 1024**2
TRIM_SPEC = """\
name = "history-trim"
repeat = 1

[params]
workload = "dd"
dd_mib = 32
"""
AFFECTED = ("Dd.track_total_s", "Dd.track_phase_write_s", "Dd.track_s_per_gib")


def copy_project(dest: Path) -> Path:
    """The working tree's files (tracked, and new ones git does not ignore) in a new repository."""
    return new_repo(copy_worktree(dest))


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def scratch_dir(base: Path) -> Path:
    """A directory on a disk filesystem for images (never tmpfs)."""
    if filesystem_type(base) not in MEMORY_FILESYSTEMS:
        return base
    return Path(tempfile.mkdtemp(prefix="diskbench-history-", dir="/var/tmp"))


@pytest.fixture(scope="module")
def history_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private HOME (asv keeps its machines in ~/.asv-machine.json) and the trimmed matrix.

    The guest and page caches and pip's cache stay the real ones, so that
    nothing is built or fetched twice.
    """
    base = tmp_path_factory.mktemp("history-env")
    spec = base / "trim.toml"
    spec.write_text(TRIM_SPEC)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DISKBENCH_CACHE", str(cache_dir()))
        mp.setenv("PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"))
        mp.setenv("HOME", str(base / "home"))
        mp.setenv("DISKBENCH_HISTORY_SPEC", str(spec))
        mp.setenv("DISKBENCH_HISTORY_REPEAT", "1")
        (base / "home").mkdir()
        yield base


@pytest.fixture(scope="module")
def four_commits(tmp_path_factory: pytest.TempPathFactory, history_env: Path) -> tuple[Path, list[str]]:
    repo = copy_project(tmp_path_factory.mktemp("project"))
    conf = json.loads(
        "\n".join(
            line
            for line in (repo / "asv.conf.json").read_text().splitlines()
            if not line.strip().startswith("//")
        )
    )
    # One sample per commit on a shared two-core host: figures move by tens of percent
    # and the sub-second phases by up to 3x (mkfs 0.24 s -> 0.75 s seen between two
    # commits that differ in a README line); the throttle moves them by 5-30x.
    # The device's latency percentiles of a 32 MiB dd move by up to 6x between such commits
    # (a few reads at fsck); the throttle moves its write latencies by 100x.
    # Beside a neighbour that takes the CPUs (two guests at nice -19), a words-only commit's dd
    # total read over twice the first's and its device figures over 10x: the throttle's own move
    # (its write phase 10-30x, its write latencies 100x) stays far above these.
    conf["regressions_thresholds"] = {
        ".*": 3.0,
        ".*track_phase_(mkfs|mount|umount|fsck)_s": 5.0,
        ".*track_host_(create|overhead)_s": 10.0,
        ".*track_dev_.*": 30.0,
    }
    (repo / "asv.conf.json").write_text(json.dumps(conf, indent=1) + "\n")
    first = commit_all(repo, "the project")
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\nA line that changes nothing measured.\n")
    second = commit_all(repo, "words only")
    policy = repo / "policy.toml"
    text = policy.read_text()
    assert "[drive.options]" in text
    policy.write_text(text + f'"throttling.bps-write" = {THROTTLE_BPS}\n')
    third = commit_all(repo, "policy: throttle writes to 8 MiB/s")
    policy.write_text(policy.read_text() + '\n[qemu]\nversion = "10.0"\n')
    fourth = commit_all(repo, "policy: pin QEMU 10.0")
    return repo, [first, second, third, fourth]


@pytest.fixture(scope="module")
def published(
    four_commits: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> HistoryResult:
    repo, _ = four_commits
    work = scratch_dir(tmp_path_factory.mktemp("work"))
    notes: list[str] = []
    options = HistoryOptions(
        config=repo / "asv.conf.json", binaries=Binaries.on_path(), commits=4, work_dir=work
    )
    return run_history(options, log=notes.append)


@timed
def test_asv_flags_the_throttled_commit_and_no_other(
    published: HistoryResult, four_commits: tuple[Path, list[str]]
) -> None:
    repo, commits = four_commits
    assert published.machine is not None and published.machine.endswith("-tcg")
    assert list(published.commits) == commits
    html = published.index.parent
    revisions = json.loads((html / "index.json").read_text())["revision_to_hash"]
    regressions = json.loads((html / "regressions.json").read_text())["regressions"]
    flagged: dict[str, set[str]] = {}
    for name, _graph, _params, _idx, _last, _best, jumps in regressions:
        for _before, after, _old, _new in jumps:
            # the fourth commit runs another QEMU: whatever it moves is the build's (tested below)
            if revisions[str(after)] != commits[3]:
                flagged.setdefault(name, set()).add(revisions[str(after)])
    for kind in ("matrix", "policy"):
        for bench in AFFECTED:
            assert flagged.get(f"{kind}.{bench}") == {commits[2]}, (f"{kind}.{bench}", flagged)
    others = {name: hashes for name, hashes in flagged.items() if hashes != {commits[2]}}
    assert not others, f"regressions at commits other than the throttled one: {others}"
    # one result file per commit, on the accel-suffixed machine
    machine_dir = repo / "results" / "asv" / published.machine
    assert len(list(machine_dir.glob("*-virtualenv-*.json"))) == 4
    assert published.log.is_file()


def commit_record(published: HistoryResult, repo: Path, commit: str) -> Record:
    """The one record of ``commit``'s run in the published history of ``repo``."""
    assert published.machine is not None
    (path,) = (repo / "results" / "history" / published.machine / commit / "sweeps" / "history").glob(
        "*.json"
    )
    return load_record(path)


@timed
def test_the_suite_measured_each_commits_own_policy(
    published: HistoryResult, four_commits: tuple[Path, list[str]]
) -> None:
    repo, commits = four_commits
    options = {}
    for commit in commits:
        record = commit_record(published, repo, commit).to_json()
        assert record["machine"]["accel"] == "tcg"
        options[commit] = record["subject"]["policy"]["drive_options"]
    assert options[commits[0]] == options[commits[1]] == {}
    assert options[commits[2]] == options[commits[3]] == {"throttling.bps-write": str(THROTTLE_BPS)}


@timed
def test_the_commit_that_moves_the_qemu_pin_runs_that_build_and_its_step_is_the_builds(
    published: HistoryResult, four_commits: tuple[Path, list[str]]
) -> None:
    from harness.history.changes.attribution import cause, identity_changes
    from harness.history.changes.find import records_identity

    repo, hashes = four_commits
    assert published.machine is not None
    machine = {}
    for commit in hashes[2:]:
        record = commit_record(published, repo, commit)
        assert record.ok, f"{commit[:8]}: {[s.reason for s in record.failed]}"
        machine[commit] = record.machine
    third, fourth = machine[hashes[2]], machine[hashes[3]]
    assert third.get("qemu_version") == "7.2.22" and fourth.get("qemu_version") == "10.0.2"
    assert str(fourth.get("qemu_debian_version")).startswith("1:10.0.2+")
    assert "/builds/" in str(fourth.get("qemu")), "the pinned build's own binary, from the QEMU cache"
    identity = records_identity(repo / "results" / "history")
    changes = identity_changes(
        identity(published.machine, hashes[2]) or {}, identity(published.machine, hashes[3]) or {}
    )
    said = cause(changes, known=True)
    assert said.startswith(
        "the QEMU build, not the commit's other changes (the commit moves its QEMU pin): QEMU pin runner → 10.0; "
        "QEMU version 7.2.22 → 10.0.2; QEMU build Debian 1:7.2"
    ), said
    assert (
        identity_changes(
            identity(published.machine, hashes[1]) or {}, identity(published.machine, hashes[2]) or {}
        )
        == []
    )


@timed
def test_pages_load_in_headless_chromium_with_four_points_and_the_qemu_of_each(
    published: HistoryResult,
) -> None:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is absent: scripts/setup.sh installs them")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    html = published.index.parent
    assert "https://" not in "".join(
        line for line in published.index.read_text().splitlines() if "<script" in line or "<link" in line
    ), "the pages must load nothing from the network"
    with served(html, window="1280,900") as (driver, base):
        driver.get(base + "index.html")
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script(
                "return typeof $ !== 'undefined' && $('#summarygrid-display a').length > 0"
            )
        )
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
        driver.get(base + "index.html#matrix.Dd.track_total_s")
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script(
                "var p = $('#main-graph').data('plot'); return !!p && p.getData().length > 0"
            )
        )
        points = driver.execute_script(
            "return $('#main-graph').data('plot').getData()"
            ".map(function (s) { return s.data.filter(function (p) { return p[1] !== null; }).length; });"
        )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "history-graph.png"))
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
        assert points == [4], points
        # the QEMU of each point, reached from the navigation
        driver.get(base + "index.html")
        WebDriverWait(driver, 60).until(lambda d: d.execute_script("return typeof $ !== 'undefined'"))
        driver.find_element(By.CSS_SELECTOR, "#nav-li-qemu a").click()
        WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("qemu.html"))
        rows = driver.find_elements(By.CSS_SELECTOR, "table.points tbody tr")
        assert len(rows) == 4, [r.text for r in rows]
        assert [r.get_attribute("class") for r in rows] == ["point", "point", "point", "new-build"]
        cells = [td.text for td in rows[3].find_elements(By.TAG_NAME, "td")]
        assert cells[1:3] == ["10.0", "10.0.2"] and cells[3].startswith("Debian 1:10.0.2+"), cells
        assert [td.text for td in rows[0].find_elements(By.TAG_NAME, "td")][1:3] == ["runner", "7.2.22"]
        driver.save_screenshot(str(ARTIFACTS / "history-qemu-builds.png"))


# -- the QEMU config, with a stand-in QEMU repository -------------------------------------

STANDIN_CONFIGURE = """\
#!/bin/sh
# Stand-in for QEMU's configure: refuses what the real one would not build for
# the harness, then writes a Makefile whose targets wrap the system's binaries.
case " $* " in
  *" --target-list=x86_64-softmmu "*) ;;
  *) echo "configure: no --target-list=x86_64-softmmu in: $*" >&2; exit 1 ;;
esac
for opt in "$@"; do
  case "$opt" in --*) ;; *) echo "configure: not an option: $opt" >&2; exit 1 ;; esac
done
echo "$*" > config-args.txt
src=$(cd "$(dirname "$0")" && pwd)
printf 'qemu-system-x86_64 qemu-img:\\n\\tsh %s/wrap.sh $@\\n.PHONY: qemu-system-x86_64 qemu-img\\n' "$src" > Makefile
"""
STANDIN_WRAP = """\
#!/bin/sh
# The 'build' of a binary: a wrapper that logs each call next to itself, then runs the system's.
cat > "$1" <<EOF
#!/bin/sh
echo "\\$*" >> "@CALLS@"
exec /usr/bin/$1 "\\$@"
EOF
chmod +x "$1"
mkdir -p pc-bios && echo firmware > pc-bios/bios-256k.bin
"""


def make_standin_qemu(repo: Path, calls: Path) -> str:
    """A QEMU repository whose build wraps the system's binaries, logging each call to ``calls``.

    ``calls`` is writable by everyone: run as root, the harness runs QEMU as its own
    unprivileged account (harness.host.confine).
    """
    repo.mkdir(parents=True)
    calls.touch()
    calls.chmod(0o666)
    (repo / "configure").write_text(STANDIN_CONFIGURE)
    (repo / "configure").chmod(0o755)
    (repo / "wrap.sh").write_text(STANDIN_WRAP.replace("@CALLS@", str(calls)))
    new_repo(repo, branch="master")
    return commit_all(repo, "stand-in QEMU")


def test_qemu_config_builds_each_commit_and_the_suite_runs_its_binaries(
    history_env: Path, tmp_path: Path, qemu_reachable_dir: Path
) -> None:
    reachable = qemu_reachable_dir
    # the commit's QEMU is built under the project: where the harness's QEMU account can run it
    project = copy_project(reachable / "project")
    calls_log = reachable / "calls.log"
    commit = make_standin_qemu(reachable / "qemu", calls_log)
    config = project / "benchmarks" / "qemu" / "asv.conf.json"
    result = run_history(
        HistoryOptions(
            config=config,
            binaries=Binaries.on_path(),
            repo=reachable / "qemu",
            commits=1,
            work_dir=scratch_dir(tmp_path / "work"),
            html_dir=tmp_path / "html",
        )
    )
    assert result.commits == (commit,)
    assert result.index == tmp_path / "html" / "index.html"
    envs = list((project / ".asv" / "qemu-env").glob("*/diskbench-subject"))
    assert len(envs) == 1, envs
    subject = json.loads((envs[0] / "subject.json").read_text())
    assert subject["commit"] == commit
    assert subject["qemu"] == str(envs[0] / "qemu" / "qemu-system-x86_64")
    assert (envs[0] / "qemu" / "pc-bios" / "bios-256k.bin").is_file(), "firmware kept beside the binary"
    calls = calls_log.read_text()
    assert "-sandbox on" in calls, "the suite booted its guest with the commit's qemu-system-x86_64"
    (path,) = (project / "results" / "history" / str(result.machine) / commit / "sweeps" / "history").glob(
        "*.json"
    )
    record = load_record(path).to_json()
    assert record["machine"]["qemu"] == subject["qemu"]
    assert record["machine"]["qemu_img"] == subject["qemu_img"]
    assert record["samples"][0]["status"] == "ok"
    results = list((project / "results" / "asv-qemu" / str(result.machine)).glob(f"{commit[:8]}-*.json"))
    assert len(results) == 1
    data = json.loads(results[0].read_text())
    assert data["commit_hash"] == commit

"""A head that stalls its disk ends the gate within its budget, as "head timed out" (real guests).

The gates run once for the module (:func:`gates`), and the two whose head stalls run together:
each spends most of its time waiting on its head's deadline, so the waits overlap. The looping
head's gate runs first, alone: its head must write past its cap within the budget, which a
neighbour's CPU would slow. The file took 378 s with one gate after the other. Each test asserts
its own gate, its time counted from its own start to its own exit."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gitrepo import clone_project, git, new_repo

from harness.host.hostinfo import filesystem_type
from harness.sample.images import MEMORY_FILESYSTEMS

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]

SPEC = """\
name = "stall"
rounds = 2
max_rounds = 2
budget_min = 4
metrics = ["total_s"]
[params]
dd_mib = 8
size = "256M"
[[cells]]
name = "policy-dd"
workload = "dd"
"""

LOOP_SPEC = """\
name = "loop"
rounds = 2
max_rounds = 2
budget_min = 4
replay_samples = 2
changed_fails = true
metrics = ["replay.wall_s"]
[params]
size = "256M"
fio_size_mib = 16
fio_ios = 200
fio_fsync_ios = 20
[[cells]]
name = "policy-replay"
workload = "fio"
measure = "replay"
"""

#: head's fio workload: the disk rewritten in a loop, never a report
LOOP = """
fio_raw() {
    while :; do
        "$FIO" --name=rewrite --filename="$DISK" --rw=write --bs=1M --direct=1 --size=100% \\
            --output=/dev/null >/dev/null 2>&1
    done
}
"""


def _bytes(path: Path) -> int:
    total = 0
    for entry in path.rglob("*") if path.exists() else ():
        try:
            if entry.is_file() and not entry.is_symlink():
                total += entry.stat().st_blocks * 512
        except OSError:
            continue
    return total


@dataclass
class Gate:
    """One ``diskbench gate`` run: its exit, its output, how long it took from its own start."""

    out: Path
    work: Path
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    took: float = 0.0
    #: the most the work dir held and the recording's write log reached (the looping head's gate)
    most: dict[str, int] = field(default_factory=lambda: {"work": 0, "log": 0})


def _gate_argv(
    repo: Path, base: str, head: str, out: Path, work: Path, results: Path, *extra: str
) -> list[str]:
    return [
        sys.executable, "-m", "harness", "gate", "--repo", str(repo), "--base", base, "--head", head,
        "--out", str(out), "--accel", "tcg", "--work-dir", str(work), "--results-dir", str(results),
        *extra,
    ]  # fmt: skip


def _disk_dir(base: Path, stack: list[Callable[[], None]]) -> Path:
    """A work dir on a disk filesystem (never tmpfs), as the ``disk_dir`` fixture gives a test."""
    if filesystem_type(base) not in MEMORY_FILESYSTEMS:
        return base / "work"
    tmp = tempfile.TemporaryDirectory(prefix="diskbench-test-", dir="/var/tmp")
    stack.append(tmp.cleanup)
    return Path(tmp.name)


def _stalled_head(base: Path, stack: list[Callable[[], None]]) -> tuple[list[str], float]:
    repo = new_repo(base / "repo")
    policy = (REPO / "policy.toml").read_text()
    (repo / "policy.toml").write_text(policy)
    git(repo, "add", "policy.toml")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    (repo / "policy.toml").write_text(
        policy.replace("[drive.options]\n", '[drive.options]\n"throttling.bps-total" = 1\n', 1)
    )
    git(repo, "commit", "-q", "-am", "policy: one byte a second")
    spec = base / "stall.toml"
    spec.write_text(SPEC)
    argv = _gate_argv(
        repo, "base", "main", base / "out", _disk_dir(base, stack), base / "results",
        "--spec", str(spec), "--no-canary", "--seed", "1",
    )  # fmt: skip
    return argv, 900


def _looping_head(base: Path, stack: list[Callable[[], None]]) -> tuple[list[str], float]:
    repo = base / "repo"
    clone_project(repo)
    git(repo, "tag", "base")
    fio = repo / "images" / "workloads" / "fio.sh"
    fio.write_text(fio.read_text() + LOOP)
    git(repo, "commit", "-q", "-am", "images: fio rewrites the disk, forever")
    spec = base / "loop.toml"
    spec.write_text(LOOP_SPEC)
    argv = _gate_argv(
        repo, "base", "HEAD", base / "out", _disk_dir(base, stack), base / "results",
        "--spec", str(spec), "--no-canary", "--seed", "1",
    )  # fmt: skip
    return argv, 4 * 60 + 60


# the default gate: guest cells and replay cells. Its replay cells' streams are recorded before
# the first round, base's then head's, so head's stalls there whatever order the seed draws for
# the rounds (seeds 1, 2 and 3 each stopped at "head timed out on policy-replay (its recording,
# ...)" with no round run): one seed
DEFAULT_SEED = 1


def _default_gate_stalled_head(base: Path, stack: list[Callable[[], None]]) -> tuple[list[str], float]:
    repo = clone_project(base / "repo")
    git(repo, "tag", "base")
    policy = repo / "policy.toml"
    policy.write_text(
        policy.read_text().replace("[drive.options]\n", '[drive.options]\n"throttling.bps-total" = 1\n', 1)
    )
    git(repo, "commit", "-q", "-am", "policy: one byte a second")
    argv = _gate_argv(
        repo, "base", "HEAD", base / "out", _disk_dir(base, stack), base / "results",
        "--budget-min", "4", "--seed", str(DEFAULT_SEED),
    )  # fmt: skip
    return argv, 8 * 60


#: the gates in waves, each wave's gates together: the looping head alone, then the stalled heads
WAVES = (
    {"looping": _looping_head},
    {"stalled": _stalled_head, "default": _default_gate_stalled_head},
)


def _watch(gate: Gate, done: threading.Event) -> None:
    """The looping head's gate: the most its work dir and its recording's write log held."""
    while not done.is_set():
        gate.most["work"] = max(gate.most["work"], _bytes(gate.work))
        for log in gate.work.glob("*.record.writelog") if gate.work.exists() else ():
            try:
                gate.most["log"] = max(gate.most["log"], log.stat().st_size)
            except OSError:
                pass
        time.sleep(0.2)


def _end(proc: subprocess.Popen[str]) -> None:
    """``proc``'s session ended (the gate, its QEMUs and its qemu-img), and ``proc`` reaped."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def gates(guest: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Gate]]:
    """The gates by name, wave after wave; one past its own timeout is ended with its session."""
    stack: list[Callable[[], None]] = []
    procs: dict[str, tuple[subprocess.Popen[str], float, float]] = {}
    found: dict[str, Gate] = {}
    done = threading.Event()
    watcher: threading.Thread | None = None
    try:
        for wave in WAVES:
            for name, prepare in wave.items():
                base = tmp_path_factory.mktemp(f"gate-{name}")
                argv, timeout_s = prepare(base, stack)
                gate = found[name] = Gate(
                    out=Path(argv[argv.index("--out") + 1]), work=Path(argv[argv.index("--work-dir") + 1])
                )
                if name == "looping":
                    watcher = threading.Thread(target=_watch, args=(gate, done), daemon=True)
                    watcher.start()
                # output to files: the gates' pipes are not read while they run
                out = (base / "stdout").open("w")
                err = (base / "stderr").open("w")
                stack.extend((out.close, err.close))
                proc = subprocess.Popen(
                    argv, stdout=out, stderr=err, text=True, cwd=REPO, start_new_session=True
                )
                procs[name] = (proc, time.monotonic(), timeout_s)
            while procs:
                for name, (proc, started, timeout_s) in list(procs.items()):
                    now = time.monotonic()
                    running = proc.poll() is None
                    if running and now - started < timeout_s:
                        continue
                    if running:
                        # past its timeout: the gate and every process it started end here
                        _end(proc)
                    found[name].returncode = None if running else proc.returncode
                    found[name].took = now - started
                    del procs[name]
                time.sleep(0.2)
            done.set()
            if watcher is not None:
                watcher.join()
        for gate in found.values():
            gate.stdout = (gate.out.parent / "stdout").read_text()
            gate.stderr = (gate.out.parent / "stderr").read_text()
        yield found
    finally:
        done.set()
        for proc, _started, _timeout_s in procs.values():
            _end(proc)
        for cleanup in reversed(stack):
            cleanup()


def test_a_head_throttled_to_one_byte_a_second_ends_the_gate_within_its_budget_as_head_timed_out(
    gates: dict[str, Gate],
) -> None:
    gate = gates["stalled"]
    took = gate.took
    print(f"gate of a stalled head: exit {gate.returncode} in {took:.0f} s")
    assert gate.returncode == 1, gate.stderr[-3000:]
    assert "Traceback" not in gate.stderr
    first = gate.stdout.splitlines()[0]
    assert first.startswith("## diskbench: REGRESSION (head timed out: "), gate.stdout
    document = json.loads((gate.out / "comparison.json").read_text())
    (cell,) = document["cells"]
    assert (cell["verdict"], cell["kind"]) == ("regression", "head-timed-out")
    assert document["budget"]["stopped"].startswith("head timed out on policy-dd")
    # within the budget of 4 minutes, plus the checkout and the guest's start
    assert took < 4 * 60 + 90, took


def test_a_head_recipe_whose_fio_rewrites_its_disk_in_a_loop_is_stopped_at_its_recording_cap(
    gates: dict[str, Gate],
) -> None:
    gate = gates["looping"]
    took, most = gate.took, gate.most
    print(f"gate of a looping head: exit {gate.returncode} in {took:.0f} s, work dir at most {most}")
    assert gate.returncode == 1, gate.stderr[-3000:]
    assert "Traceback" not in gate.stderr
    document = json.loads((gate.out / "comparison.json").read_text())
    (cell,) = document["cells"]
    assert cell["verdict"] == "changed", cell
    assert "head's recording stopped: the recording's write log grew to" in cell["reason"]
    cap = re.search(r"past its cap of (\d+) MiB \(4 x base's", cell["reason"])
    assert cap is not None, cell["reason"]
    cap_bytes = int(cap.group(1)) * 2**20
    # checked every 20 ms while the guest runs: a few MiB past the cap at most
    assert most["log"] <= cap_bytes + 16 * 2**20, (most, cap_bytes)
    # the work dir: the recording's image (the 256 MiB disk, qcow2), its log and trace
    assert most["work"] <= 256 * 2**20 + cap_bytes + 160 * 2**20, (most, cap_bytes)
    assert took < 4 * 60 + 60, took


def test_the_default_gate_of_a_head_throttled_to_one_byte_a_second_ends_as_head_timed_out(
    gates: dict[str, Gate],
) -> None:
    gate = gates["default"]
    took = gate.took
    first = (gate.stdout.splitlines() or [""])[0]
    print(
        f"default gate, head throttled, seed {DEFAULT_SEED}: exit {gate.returncode} in {took:.0f} s: {first}"
    )
    assert gate.returncode == 1, gate.stderr[-3000:]
    assert "Traceback" not in gate.stderr
    assert first.startswith("## diskbench: REGRESSION (head timed out: "), gate.stdout[:2000]
    document = json.loads((gate.out / "comparison.json").read_text())
    assert any(c["kind"] == "head-timed-out" for c in document["cells"])
    assert document["budget"]["stopped"].startswith("head timed out on ")
    assert took < 6 * 60, took

"""A crossed pair: each side's process on a CPU of its own, the two swapped while they run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.compare import Settings
from harness.compare.rules import shrink_of
from harness.errors import SpecError
from harness.gate import parse_gate_spec
from harness.record import Sample
from harness.sample.pairing import Crossing, Mode, Pairing, crossed_cpus
from harness.sample.swapper import pin_process

TWO = crossed_cpus()
needs_two = pytest.mark.skipif(TWO is None, reason="a crossed pair needs two CPUs")
CAP_SYS_ADMIN = 21
CAP_SYS_NICE = 23


def _has_cap(bit: int) -> bool:
    """Whether this process holds capability ``bit`` (root in a container may not)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


may_raise = pytest.mark.skipif(not _has_cap(CAP_SYS_NICE), reason="raising a priority needs CAP_SYS_NICE")


@pytest.fixture
def spinners() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two processes of two threads each that spin until killed."""
    code = "import threading\ndef spin():\n    while True: pass\nthreading.Thread(target=spin, daemon=True).start()\nspin()\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _cpus_of(pid: int) -> set[frozenset[int]]:
    """The affinity of each thread of ``pid``."""
    got = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            got.add(frozenset(os.sched_getaffinity(int(task.name))))
        except ProcessLookupError:
            continue
    return got


@needs_two
def test_a_crossed_pair_swaps_its_two_processes_between_two_cpus(spinners: list[Any]) -> None:
    assert TWO is not None
    crossing = Crossing(TWO, swap_s=0.02)
    a, b = (p.pid for p in spinners)
    crossing.join(a)
    crossing.join(b)
    crossing.start()
    seen_a: list[int] = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        got_a, got_b = _cpus_of(a), _cpus_of(b)
        # every thread of a side is on one CPU of the pair; the two sides never on the same one
        # (read between two moves, a side may be caught on its way: skip those readings)
        if len(got_a) == 1 and len(got_b) == 1 and all(len(s) == 1 for s in got_a | got_b):
            (cpu_a,), (cpu_b,) = next(iter(got_a)), next(iter(got_b))
            assert {cpu_a, cpu_b} <= set(TWO)
            if cpu_a != cpu_b:
                seen_a.append(cpu_a)
        time.sleep(0.003)
    left_a = crossing.leave(a)
    time.sleep(0.1)  # b goes on alone, still swapped
    left_b = crossing.leave(b)
    assert set(seen_a) == set(TWO), "a side stayed on one CPU"
    assert left_a is not None and left_b is not None
    for left in (left_a, left_b):
        assert left.ok and left.cpus == TWO
        # about half of its time on each CPU, 20 ms at a time over a second or more
        assert left.swaps >= 10
        total = sum(left.on_cpu_s)
        assert total > 0.8 and min(left.on_cpu_s) > 0.3 * total
    assert sum(left_b.on_cpu_s) > sum(left_a.on_cpu_s)
    crossing.reset()  # the swapper is gone and the next pair starts clean
    assert crossing.leave(a) is None


@needs_two
def test_a_pairing_starts_crossing_when_both_sides_meet(spinners: list[Any]) -> None:
    pairing = Pairing(mode=Mode.CROSSED)
    assert pairing.how is Mode.CROSSED and pairing.cpus == TWO

    def side(pid: int) -> Any:
        pairing.join(pid)
        assert pairing.meet(timeout_s=10)
        time.sleep(1.0)
        return pairing.leave(pid)

    results = _both_sides(spinners, side)
    assert all(r is not None and r.ok and r.swaps >= 3 for r in results.values())
    pairing.reset()


def _both_sides(spinners: list[Any], side: Any) -> dict[int, Any]:
    """``side(pid)`` of each spinner in a thread of its own, at once: what each returned, by pid."""
    results: dict[int, Any] = {}
    threads = [
        threading.Thread(target=lambda pid=p.pid: results.__setitem__(pid, side(pid))) for p in spinners
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == len(spinners), "a side failed in its thread"
    return results


@needs_two
def test_processes_started_after_the_pair_met_are_crossed_and_their_swapper_ends(
    spinners: list[Any],
) -> None:
    # a replay pass: both sides meet, then each starts its qemu-io; the swapping begins once both
    # have started and ends once both are over, so that the next pass starts a swapper of its own
    pairing = Pairing(mode=Mode.CROSSED)
    crossing = pairing.crossing
    assert crossing is not None

    def side(pid: int) -> Any:
        assert pairing.meet(timeout_s=10)
        pairing.started(pid)
        time.sleep(0.6)
        return pairing.finished(pid)

    for _pass in range(2):
        results = _both_sides(spinners, side)
        assert all(r is not None and r.ok and r.cpus == TWO and r.swaps >= 3 for r in results.values())
        assert crossing._swapper is None and crossing._pids == []


def test_a_side_that_leaves_before_the_swapping_began_is_not_left_behind() -> None:
    crossing = Crossing((0, 1))
    crossing.join(11)
    assert crossing.leave(11) is None
    crossing.join(12)
    crossing.start()  # one process only: nothing to swap
    assert crossing._swapper is None


def test_a_command_tells_its_pid_once_started_and_is_killed_at_its_timeout() -> None:
    from harness.errors import CommandError
    from harness.host import proc

    seen: list[int] = []
    got = proc.run(["sh", "-c", "echo $$"], confined={"on_start": seen.append})
    assert seen == [int(got.stdout.strip())]
    with pytest.raises(CommandError) as raised:
        proc.run(["sleep", "30"], timeout_s=0.3, confined={"on_start": seen.append})
    assert raised.value.timed_out
    assert (
        not Path(f"/proc/{seen[-1]}").exists() or "Z" in Path(f"/proc/{seen[-1]}/stat").read_text().split()[2]
    )


def test_the_spec_says_how_a_replay_pair_shares_the_host() -> None:
    cells = '[[cells]]\nname = "dd"\nworkload = "dd"\n'
    assert parse_gate_spec(cells, source="g.toml").replay_pairing is Mode.SHARED
    crossed = parse_gate_spec('replay_pairing = "crossed"\n' + cells, source="g.toml")
    assert crossed.replay_pairing is Mode.CROSSED
    with pytest.raises(SpecError, match=r"g.toml: replay_pairing = 'apart': use 'shared' or 'crossed'"):
        parse_gate_spec('replay_pairing = "apart"\n' + cells, source="g.toml")


def test_a_pair_with_one_cpu_or_asked_to_share_runs_on_one_cpu() -> None:
    lonely = Pairing(mode=Mode.CROSSED, cpu=3, cross=None)
    assert lonely.how is Mode.SHARED and lonely.cpus == (3,) and lonely.leave(1) is None
    shared = Pairing(mode=Mode.SHARED, cpu=3, cross=(0, 1))
    assert shared.how is Mode.SHARED and shared.cpus == (3,) and shared.prefix()[-1] == "3"


def test_the_swapper_refuses_bad_arguments_and_ends_with_its_input() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "harness.sample.swapper", "0", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "usage:" in bad.stderr
    # its input closed (the harness gone): it exits, though nobody left
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        ended = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.sample.swapper",
                "0",
                "0",
                "0.01",
                str(sleeper.pid),
                str(sleeper.pid),
            ],
            input="",
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        sleeper.kill()
        sleeper.wait()
    assert ended.returncode == 0 and ended.stdout == ""


def test_moving_a_process_that_is_gone_says_so(tmp_path: Path) -> None:
    assert not pin_process(2**22 + 7, 0)
    # a thread that ended between the listing and the move is no failure
    (tmp_path / "5" / "task" / str(2**22 + 9)).mkdir(parents=True)
    assert pin_process(5, 0, proc=tmp_path)


def _sample(together: dict[str, Any]) -> Sample:
    return Sample(status="ok", host={"together": together})


def test_nothing_shrinks_a_crossed_pairs_change() -> None:
    settings = Settings()
    crossed = _sample({"cpu": 1, "met": True, "mode": "crossed"})
    shared = _sample({"cpu": 1, "met": True, "mode": "shared"})
    older = _sample({"cpu": 1, "met": True})  # a record from before crossed pairs: one CPU
    assert shrink_of("host.workload_s", [crossed], settings) == 1.0
    assert shrink_of("host.workload_s", [shared], settings) == settings.together_shrink
    assert shrink_of("host.workload_s", [older], settings) == settings.together_shrink


def test_the_spec_says_how_a_guest_pair_shares_the_host() -> None:
    cells = '[[cells]]\nname = "dd"\nworkload = "dd"\n'
    assert parse_gate_spec(cells, source="g.toml").guest_pairing is Mode.CROSSED
    shared = parse_gate_spec('guest_pairing = "shared"\n' + cells, source="g.toml")
    assert shared.guest_pairing is Mode.SHARED
    with pytest.raises(SpecError, match=r"g.toml: guest_pairing = 'apart': use 'shared' or 'crossed'"):
        parse_gate_spec('guest_pairing = "apart"\n' + cells, source="g.toml")


@may_raise
def test_a_pairs_process_runs_above_the_hosts_other_work(spinners: list[Any]) -> None:
    # the spinners run at the suite's own nice, whatever it is (CI may run the suite under `nice`);
    # the pair's is 7 steps above both it and the host's other work (nice 0)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    above = min(own, 0) - 7
    if above < -20:
        pytest.skip(f"the suite runs at nice {own}: no priority 7 steps above it is left")
    pid = spinners[0].pid
    deadline = time.monotonic() + 30
    while len(list(Path(f"/proc/{pid}/task").iterdir())) < 2:  # its second thread started
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert os.getpriority(os.PRIO_PROCESS, pid) == own
    pairing = Pairing(mode=Mode.SHARED, cpu=0, nice=above)
    raised = pairing.join(pid)
    tids = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    assert len(tids) == 2 and all(os.getpriority(os.PRIO_PROCESS, t) == above for t in tids)
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():
        if not raised:
            _skip_where_the_host_refuses_an_autogroups_nice(autogroup, above)
        assert autogroup.read_text().split()[-1] == str(above)
    assert raised
    # the partner, not joined, runs as it was started: at the suite's own nice
    assert os.getpriority(os.PRIO_PROCESS, spinners[1].pid) == own
    assert not pairing.join(2**22 + 7)  # gone: said, not raised


def _skip_where_the_host_refuses_an_autogroups_nice(autogroup: Path, nice: int) -> None:
    """Skip, naming the error, where this host refuses to set an autogroup's nice other than by
    the kernel's one change per 100 ms (a read-only /proc in a container): there the pair's
    priority cannot be raised, and saying so (False) is right.  A write the host takes returns."""
    deadline = time.monotonic() + 5
    while True:
        try:
            autogroup.write_text(str(nice))
        except BlockingIOError:
            assert time.monotonic() < deadline, "the kernel's one change per 100 ms never came"
            time.sleep(0.02)
            continue
        except OSError as exc:
            pytest.skip(f"this host refuses an autogroup's nice: {exc}")
        return


RAISE_TWO = """
import subprocess, sys
from harness.sample.pairing import raise_priority
# two sessions, so two autogroups, set one right after the other as a pair's two sides are; the
# session made before exec (Popen returns after it), as QEMU's is: `setsid sleep` made it after,
# and a busy host let its autogroup be raised before it existed (the parent's raised instead)
procs = [subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(2)]
try:
    print(all(raise_priority(p.pid, -5) for p in procs))
    print(*(open(f"/proc/{p.pid}/autogroup").read().split()[-1] for p in procs))
finally:
    for p in procs:
        p.kill()
"""


@may_raise
@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="a kernel without autogroups")
@pytest.mark.skipif(
    _has_cap(CAP_SYS_ADMIN) and shutil.which("setpriv") is None, reason="needs setpriv to drop a capability"
)
def test_both_sides_are_raised_where_the_kernel_takes_one_autogroup_per_100ms() -> None:
    # root without CAP_SYS_ADMIN (a container): the kernel refuses a second autogroup's nice
    # within 100 ms of the first with EAGAIN; the second side waits its turn, it is not left low
    drop = (
        ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin"] if _has_cap(CAP_SYS_ADMIN) else []
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    got = subprocess.run(
        [*drop, sys.executable, "-c", RAISE_TWO], capture_output=True, text=True, env=env, timeout=60
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["True", "-5", "-5"]

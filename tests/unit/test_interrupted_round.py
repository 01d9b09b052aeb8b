"""Ctrl-C in a round whose samples run in threads of their own: what the threads started is ended,
the threads end, and the interrupt reaches the caller (the gate), instead of waiting for them.
Each case runs in a Python of its own: ending children must not reach the test runner's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

ROUND = """
import json, os, signal, subprocess, threading, time
from harness.errors import CommandError
from harness.gate.rounds import _all_at_once

# Ctrl-C's handler, whatever this process inherited (a test runner's worker ignores SIGINT, and
# an ignored SIGINT stays ignored across exec)
signal.signal(signal.SIGINT, signal.default_int_handler)
pids = []

def job(delay):
    time.sleep(delay)  # b starts its child after the interrupt: ended all the same
    child = subprocess.Popen(["sleep", "300"])  # a sample's QEMU stands in
    pids.append(child.pid)
    if child.wait() != 0:
        raise CommandError("sleep ended", argv=["sleep"], returncode=child.returncode)

threading.Timer(1.0, os.kill, args=(os.getpid(), signal.SIGINT)).start()
started = time.monotonic()
try:
    _all_at_once([("a", lambda: job(0)), ("b", lambda: job(3))])
    outcome = "returned"
except KeyboardInterrupt:
    outcome = "interrupted"
left = [t.name for t in threading.enumerate() if t.name in ("a", "b") and t.is_alive()]
alive = [p for p in pids if os.path.exists(f"/proc/{p}")]
print(json.dumps({"outcome": outcome, "s": time.monotonic() - started, "pids": len(pids),
                  "threads_left": left, "children_left": alive}))
"""

KEPT = """
import json, signal, subprocess
from harness.host import proc

kept = subprocess.Popen(["sleep", "300"])
other = subprocess.Popen(["sleep", "300"])
proc.keep_on_interrupt(kept.pid)
ended = proc.end_children()
result = {"other_ended": other.pid in ended, "kept_ended": kept.pid in ended,
          "other_rc": other.wait(timeout=60), "kept_running": kept.poll() is None}
kept.kill(); kept.wait()
print(json.dumps(result))
"""


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=240, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_an_interrupt_ends_the_jobs_children_and_comes_back_at_once() -> None:
    got = _run(ROUND)
    assert got["outcome"] == "interrupted"
    assert float(str(got["s"])) < 120  # not the children's 300 s
    assert got["pids"] == 2
    assert got["threads_left"] == [] and got["children_left"] == []


def test_a_kept_child_is_left_to_its_owner() -> None:
    got = _run(KEPT)
    assert got == {"other_ended": True, "kept_ended": False, "other_rc": -15, "kept_running": True}

"""The workload registry loads its built-ins once, also when two threads ask first at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FIRST_USE_IN_THREADS = """
import threading
from harness.workloads import registry
meet = threading.Barrier(8)
failed = []
def ask():
    meet.wait()
    try:
        registry.kind("fio")
        assert registry.names()[: len(registry.BUILT_IN)] == registry.BUILT_IN
    except Exception as e:
        failed.append(repr(e))
threads = [threading.Thread(target=ask) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(failed), *failed[:1])
"""


def test_the_built_ins_load_once_when_threads_ask_first_at_once() -> None:
    # a fresh interpreter each time: the registry loads on its first use
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for _ in range(5):
        got = subprocess.run(
            [sys.executable, "-c", FIRST_USE_IN_THREADS], capture_output=True, text=True, env=env, timeout=60
        )
        assert got.returncode == 0, got.stderr
        assert got.stdout.split()[0] == "0", got.stdout

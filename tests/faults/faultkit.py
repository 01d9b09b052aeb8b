"""Helpers of the fault suite: the harness as a subprocess, its children, a disk to fill."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from procs import alive

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Finished:
    """A finished ``diskbench`` run: exit code, output and how long it took."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float


def diskbench_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def run_diskbench(*args: str, timeout_s: float = 600.0) -> Finished:
    t0 = time.monotonic()
    done = subprocess.run(
        diskbench_argv(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    return Finished(done.returncode, done.stdout, done.stderr, time.monotonic() - t0)


def write_spec(path: Path, name: str, axes: dict[str, list[str]], *, dd_mib: int = 16) -> Path:
    lines = [f'name = "{name}"', "repeat = 1", "", "[axes]"]
    lines += [f"{key} = {json.dumps(values)}" for key, values in axes.items()]
    lines += ["", "[params]", 'workload = "dd"', f"dd_mib = {dd_mib}", 'size = "256M"']
    path.write_text("\n".join(lines) + "\n")
    return path


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (children, grandchildren...), with its command name."""
    parents: dict[int, tuple[int, str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            text = stat.read_text()
            comm = text[text.index("(") + 1 : text.rindex(")")]
            parents[int(stat.parent.name)] = (int(text[text.rindex(")") + 2 :].split()[1]), comm)
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, comm) in parents.items():
            if ppid == parent and child not in found:
                found[child] = comm
                frontier.append(child)
    return found


def wait_gone(procs: dict[int, str], timeout_s: float = 30.0) -> dict[int, str]:
    """Wait until none of ``procs`` runs; return those still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = {p: c for p, c in procs.items() if alive(p, c)}
        if not left:
            return {}
        time.sleep(0.1)
    return {p: c for p, c in procs.items() if alive(p, c)}


def kill_all(procs: dict[int, str]) -> None:
    """Never leave a process of a test behind, even when the test fails."""
    for pid, comm in procs.items():
        if alive(pid, comm):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def wait_for(what: str, check: object, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    assert callable(check)
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the harness exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:g} s")
        time.sleep(0.05)


def fill(directory: Path) -> Path:
    """Take every free byte of ``directory``'s filesystem with one file."""
    filler = directory / "filler"
    size = 0
    with filler.open("wb") as fh:
        for chunk in (1 << 24, 1 << 20, 1 << 16, 1 << 12):
            while True:
                try:
                    os.posix_fallocate(fh.fileno(), size, chunk)
                except OSError:
                    break
                size += chunk
    return filler


def argv_paths(spec: Path, work: Path, results: Path, *extra: str) -> list[str]:
    return [
        "sweep",
        str(spec),
        "--accel",
        "tcg",
        "--work-dir",
        str(work),
        "--results-dir",
        str(results),
        *extra,
    ]


class Sweep(NamedTuple):
    """A sweep started in the background: its spec, results dir, records' directory and process."""

    spec: Path
    results: Path
    directory: Path
    proc: subprocess.Popen[bytes]


def start_sweep(tmp_path: Path, disk_dir: Path, name: str, axes: dict[str, list[str]], log: str) -> Sweep:
    """The sweep ``name`` of :func:`write_spec`'s dd cells over ``axes``, started in the background
    with the work dir ``disk_dir``, its results under ``tmp_path / "results"``, its output in
    ``tmp_path / log``."""
    spec = write_spec(tmp_path / f"{name}.toml", name, axes)
    results = tmp_path / "results"
    proc = popen(argv_paths(spec, disk_dir, results), tmp_path / log)
    return Sweep(spec, results, results / "sweeps" / name, proc)


def popen(args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        return subprocess.Popen(diskbench_argv(*args), cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)


def guest_on_image(pid: int) -> Path | None:
    """The sample image a QEMU below ``pid`` runs (not a probe's QEMU), or None."""
    for child, comm in descendants(pid).items():
        if not comm.startswith("qemu-system"):
            continue
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        for arg in argv:
            if arg.startswith("if=none,id=disk0,file="):
                name = arg.split("file=", 1)[1].split(",", 1)[0]
                if name.startswith("/proc/self/fd/"):
                    # handed over as a descriptor (harness.host.confine): the file behind QEMU's fd
                    try:
                        name = os.readlink(f"/proc/{child}/fd/{name.rsplit('/', 1)[1]}")
                    except OSError:
                        continue
                return Path(name)
    return None

"""The KVM check (``scripts/kvm-check.sh``, ``diskbench kvmcheck``): what a machine has, whether a
guest boots under KVM, and a gate on it, within one deadline.

In turn: the machine (CPUs, memory, ``/dev/kvm`` and the KVM modules, the QEMU it runs); a guest
booted under TCG and under KVM, each timed, with the exact error where one does not boot; then,
where KVM works, one dd and one install sample under KVM beside the same under TCG, an A/A gate of
the default spec (``guest_pairs_at_once = "auto"``: as many crossed pairs at once as the CPUs
give) and the booth-2010 preset at a small scale; where it does not, the A/A gate under TCG with
as many pairs at once.  Each step is a ``diskbench`` command of its own with a deadline cut from
what is left; a step that fails is recorded with its error and the check goes on.  Everything
goes to ``OUT/kvm-check.json`` and ``OUT/kvm-check.txt``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bundle.report import (
    cpu_flag,
    cpu_model,
    gate_summary,
    kvm_modules,
    meminfo_mib,
    os_name,
    render_text,
)
from harness.errors import HarnessError, InfraError, VMError
from harness.files import write_text_atomic
from harness.host import confine, proc
from harness.paths import REPO_ROOT
from harness.subject.binaries import Binaries

#: the whole check's deadline: with a gate's grace past it and the unpacking before it, within 8 minutes
DEADLINE_S = 420.0
QUICK_DEADLINE_S = 240.0
#: how long a guest may take to its ready line: under KVM it takes a second or two
KVM_BOOT_TIMEOUT_S = 45.0
QUICK_KVM_BOOT_TIMEOUT_S = 20.0
TCG_BOOT_TIMEOUT_S = 120.0
#: kept back from the gate for the preset run after it (KVM only) and for writing the outputs
PRESET_RESERVE_S = 75.0
END_RESERVE_S = 20.0
#: a gate or sweep past its deadline gets SIGTERM (it shuts its guests down), then SIGKILL
TERM_GRACE_S = 30.0
JSON_NAME = "kvm-check.json"
TEXT_NAME = "kvm-check.txt"
BOOTH_SCALE = 0.25

#: the quick check's gate (the test's): two dd cells, five rounds (four samples a side give an
#: interval), crossed pairs, as many at once as the CPUs give
QUICK_SPEC = """\
name = "kvm-check-quick"
description = "the KVM check's quick A/A gate: two small dd cells, crossed pairs"
rounds = 5
max_rounds = 5
budget_min = 2
guest_together = true
guest_pairing = "crossed"
guest_pairs_at_once = "auto"
metrics = ["host.workload_s"]
min_effect = "5%"
counters = ["host.write_amplification", "host.flushes", "host.guest_written_bytes"]

[params]
dd_mib = 16

[[cells]]
name = "raw-writeback-virtio-dd"
format = "raw"
cache = "writeback"
interface = "virtio-blk"
workload = "dd"

[[cells]]
name = "qcow2-writeback-ide-dd"
format = "qcow2"
cache = "writeback"
interface = "ide"
workload = "dd"
"""


@dataclass(frozen=True)
class CheckOptions:
    """What the check is asked: where its outputs and images go, how small it is, its deadline."""

    out_dir: Path
    work_dir: Path
    binaries: Binaries
    quick: bool = False
    deadline_s: float | None = None

    @property
    def total_s(self) -> float:
        if self.deadline_s is not None:
            return self.deadline_s
        return QUICK_DEADLINE_S if self.quick else DEADLINE_S


@dataclass
class Clock:
    """The check's deadline and what is left of it."""

    total_s: float
    started: float = field(default_factory=time.monotonic)

    def left_s(self) -> float:
        return self.total_s - (time.monotonic() - self.started)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


@dataclass(frozen=True)
class Command:
    """One ``diskbench`` command the check ran: its exit code, time, and output's tail."""

    argv: tuple[str, ...]
    returncode: int | None
    seconds: float
    timed_out: bool
    tail: str

    def error(self) -> str | None:
        """The command's own last error line, or why it ended; None when it exited 0."""
        if self.returncode == 0:
            return None
        lines = [line for line in self.tail.splitlines() if line.strip()]
        said = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")
        why = (
            f"ran past its deadline of {self.seconds:.0f} s" if self.timed_out else f"exit {self.returncode}"
        )
        return f"{why}: {said.strip()}" if said else why


def run_diskbench(args: Sequence[str], *, binaries: Binaries, timeout_s: float, log_path: Path) -> Command:
    """``python -m harness --qemu Q --qemu-img I ARGS`` (this harness, this Python, the check's
    binaries), its output to ``log_path``; past ``timeout_s`` it gets SIGTERM (it shuts its guests
    down and writes what it has), then SIGKILL."""
    flags = ["--qemu", _path(binaries.qemu), "--qemu-img", _path(binaries.qemu_img)]
    argv = [sys.executable, "-m", "harness", *flags, *args]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    timed_out = False
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            child.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        except BaseException:
            child.kill()
            child.wait()
            raise
    text = log_path.read_text(errors="replace")
    return Command(
        argv=tuple(argv[1:]),
        returncode=child.returncode,
        seconds=time.monotonic() - started,
        timed_out=timed_out,
        tail="\n".join(text.splitlines()[-15:]),
    )


def _path(binary: str) -> str:
    """A binary as a path: a name is looked up on PATH (the command's flags take files)."""
    return shutil.which(binary) or binary


# -- the machine ---------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def machine_facts(qemu: str, work_dir: Path) -> dict[str, Any]:
    """What this machine has: CPUs, memory, its kernel and OS, /dev/kvm, the QEMU and Python."""
    from harness.sample.pairing import crossed_slots

    try:
        usable = len(os.sched_getaffinity(0))
    except OSError:
        usable = None
    mem = meminfo_mib(_read("/proc/meminfo"))
    kvm: dict[str, Any] = {"path": "/dev/kvm", "exists": os.path.exists("/dev/kvm")}
    if kvm["exists"]:
        st = os.stat("/dev/kvm")
        kvm.update(mode=f"{st.st_mode & 0o777:o}", uid=st.st_uid, gid=st.st_gid)
    kvm["modules"] = kvm_modules(_read("/proc/modules"))
    version = proc.run([qemu, "--version"], timeout_s=60, check=False)
    free = shutil.disk_usage(work_dir) if work_dir.exists() else None
    bundle = os.environ.get("DISKBENCH_BUNDLE")
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": usable,
        "crossed_slots": len(crossed_slots()),
        "cpu_model": cpu_model(_read("/proc/cpuinfo")),
        "virtualized": cpu_flag(_read("/proc/cpuinfo"), "hypervisor"),
        "mem_total_mib": mem.get("MemTotal"),
        "mem_available_mib": mem.get("MemAvailable"),
        "kernel": f"{platform.release()} {platform.version()}",
        "os": os_name(_read("/etc/os-release")),
        "kvm": kvm,
        "qemu": qemu,
        "qemu_version": (version.stdout.splitlines() or [version.stderr.strip()])[0].strip(),
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "root": os.geteuid() == 0,
        "work_dir": str(work_dir),
        "work_dir_free_gib": round(free.free / 2**30, 1) if free else None,
        "bundle": bundle,
    }


def ensure_account() -> str | None:
    """As root, the system account QEMU runs as (:data:`harness.host.confine.ACCOUNT`), created
    with ``useradd`` where it is missing (what ``scripts/setup.sh`` does); what was done, or None."""
    if os.geteuid() != 0:
        return None
    try:
        confine.account()
        return None
    except InfraError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise InfraError(
            f"the check runs as root and the account {confine.ACCOUNT!r} that runs QEMU does not exist, "
            "and there is no useradd to create it: create it (an unprivileged system account), or run "
            "the check as another user"
        )
    argv = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
    argv += ["--shell", "/usr/sbin/nologin"]
    if shutil.which("getent") and proc.run(["getent", "group", "kvm"], timeout_s=30, check=False).ok:
        argv += ["--groups", "kvm"]
    proc.run([*argv, confine.ACCOUNT], timeout_s=60)
    return f"created the system account {confine.ACCOUNT!r} that runs QEMU ({' '.join(argv[1:])})"


def ensure_kvm_access(dev: str = "/dev/kvm") -> str | None:
    """As root, where ``dev`` is root's group only (a host without udev), what ``scripts/setup.sh``
    does: the group ``kvm`` (created where missing) reads and writes it, and QEMU's account is a
    member. What was done, or None (not root, no device, or already given)."""
    if os.geteuid() != 0 or not os.path.exists(dev) or os.stat(dev).st_gid != 0:
        return None
    done = []
    if not proc.run(["getent", "group", "kvm"], timeout_s=30, check=False).ok:
        proc.run(["groupadd", "--system", "kvm"], timeout_s=60)
        done.append("created the group kvm")
    shutil.chown(dev, group="kvm")
    os.chmod(dev, os.stat(dev).st_mode | 0o060)
    done.append(f"gave {dev} to the group kvm (read-write; until the device is made again)")
    try:
        confine.account()
    except InfraError:
        return "; ".join(done)
    proc.run(["usermod", "--append", "--groups", "kvm", confine.ACCOUNT], timeout_s=60)
    done.append(f"added {confine.ACCOUNT!r} to it")
    return "; ".join(done)


# -- boots ---------------------------------------------------------------------------------------


def boot_once(kernel: Path, initrd: Path, *, qemu: str, accel: str, timeout_s: float) -> dict[str, Any]:
    """Boot the guest under ``accel`` once to its ready line: ``boots``, the seconds from QEMU's
    start, or the exact error (QEMU's own last line where it exited)."""
    import tempfile

    from harness.sample.accel import kvm_device_problem, probe_failure
    from harness.sample.vm import Machine, VMConfig

    if accel == "kvm":
        problem = kvm_device_problem()
        if problem:
            return {"accel": accel, "boots": False, "seconds": None, "error": problem}
    config = VMConfig(
        kernel=kernel, initrd=initrd, append=["diskbench.workload=probe"], drives=[], accel=accel, qemu=qemu
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"diskbench-boot-{accel}-") as tmp:
        try:
            with Machine(config, Path(tmp), name=f"boot-{accel}") as vm:
                vm.wait_event("ready", timeout_s=timeout_s, what=f"ready line under {accel.upper()}")
                seconds = time.monotonic() - started
        except VMError as exc:
            error = probe_failure(exc.message, exc.log_tail)
            if accel != "kvm":
                error = error.replace("under KVM", f"under {accel.upper()}")
            return {"accel": accel, "boots": False, "seconds": None, "error": error,
                    "waited_s": round(time.monotonic() - started, 1)}  # fmt: skip
    return {"accel": accel, "boots": True, "seconds": round(seconds, 2), "error": None}


# -- samples, the gate, the preset ---------------------------------------------------------------


def _records(directory: Path) -> list[Any]:
    from harness.record import find_records

    try:
        return find_records([directory], recursive=True)
    except HarnessError:
        return []


def sample_figures(record: Any) -> dict[str, Any]:
    """A record's first sample in brief: its status, times and error."""
    sample = record.samples[0] if record.samples else None
    if sample is None:
        return {"cell": record.cell.data.get("id"), "status": "missing"}
    keep = (
        "total_s",
        "host.workload_s",
        "host.boot_s",
        "mib_per_s",
        "phase.write_s",
        "phase.unpack_s",
        "dev.write_p50_ms",
    )
    metrics = {k: round(v, 3) for k, v in sample.metrics.items() if k in keep}
    return {
        "cell": record.cell.data.get("id"),
        "accel": record.machine.data.get("accel"),
        "status": sample.status,
        "metrics": metrics,
        "error": sample.reason,
    }


def run_sample(
    workload: str, accel: str, *, opts: CheckOptions, clock: Clock, timeout_s: float
) -> dict[str, Any]:
    """One sample of ``workload`` under ``accel`` (``diskbench run --repeat 1``)."""
    results = opts.out_dir / "runs" / f"{accel}-{workload}"
    args = ["run", "--workload", workload, "--accel", accel, "--repeat", "1", "--start", "cold"]
    args += ["--results-dir", str(results), "--work-dir", str(opts.work_dir)]
    if workload == "dd" and opts.quick:
        args += ["--dd-mib", "32"]
    cmd = run_diskbench(
        args, binaries=opts.binaries, timeout_s=min(timeout_s, clock.left_s()), log_path=results / "run.log"
    )
    records = _records(results)
    out: dict[str, Any] = {"workload": workload, "accel": accel, "seconds": round(cmd.seconds, 1)}
    if records:
        out.update(sample_figures(records[0]))
    else:
        out["status"] = "error"
    out["error"] = out.get("error") or cmd.error()
    return out


def aa_repository(work_dir: Path) -> Path:
    """A git repository with one commit of this harness's policy and guest recipe: both sides of
    the A/A gate."""
    repo = work_dir / "aa-repo"
    shutil.rmtree(repo, ignore_errors=True)
    (repo / "images").parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO_ROOT / "images", repo / "images")
    shutil.copyfile(REPO_ROOT / "policy.toml", repo / "policy.toml")
    git = ["git", "-C", str(repo), "-c", "user.name=diskbench", "-c", "user.email=diskbench@localhost"]
    proc.run(["git", "init", "-q", "--template=", str(repo)], timeout_s=60)
    proc.run([*git, "add", "-A"], timeout_s=60)
    proc.run([*git, "commit", "-q", "-m", "the A/A gate's side"], timeout_s=60)
    return repo


def run_aa_gate(accel: str, *, opts: CheckOptions, clock: Clock, reserve_s: float) -> dict[str, Any]:
    """The A/A gate (base and head the same commit): the default spec, or the quick one."""
    from harness.gate import GATE_SPEC, load_gate_spec
    from harness.sample.pairing import crossed_slots

    out = opts.out_dir / "gate"
    shutil.rmtree(out, ignore_errors=True)
    if opts.quick:
        spec_path = opts.work_dir / "kvm-check-quick.toml"
        spec_path.write_text(QUICK_SPEC)
    else:
        spec_path = GATE_SPEC
    spec = load_gate_spec(spec_path)
    slots = crossed_slots()
    at_once = len(slots) if spec.guest_pairs_at_once is None else min(len(slots), spec.guest_pairs_at_once)
    left = clock.left_s() - reserve_s
    budget_min = max(0.5, min(spec.budget_min, (left - 60.0) / 60.0))
    repo = aa_repository(opts.work_dir)
    args = ["gate", "--repo", str(repo), "--base", "HEAD", "--head", "HEAD", "--spec", str(spec_path)]
    args += ["--out", str(out), "--budget-min", f"{budget_min:.2f}", "--accel", accel]
    args += ["--work-dir", str(opts.work_dir), "--results-dir", str(opts.out_dir / "results")]
    if opts.quick:
        args.append("--no-canary")
    cmd = run_diskbench(args, binaries=opts.binaries, timeout_s=left, log_path=opts.out_dir / "gate.log")
    result: dict[str, Any] = {
        "accel": accel,
        "spec": spec.name,
        "spec_cells": len(spec.cells),
        "guest_pairs_at_once": "auto" if spec.guest_pairs_at_once is None else spec.guest_pairs_at_once,
        "crossed_slots": [list(s) for s in slots],
        "pairs_at_once": min(at_once, len(spec.guest_pairs)) if spec.guest_pairs else 0,
        "budget_min": round(budget_min, 2),
        "exit_code": cmd.returncode,
        "seconds": round(cmd.seconds, 1),
        "timed_out": cmd.timed_out,
    }
    try:
        document = json.loads((out / "comparison.json").read_text())
    except (OSError, ValueError):
        result.update(verdict=None, error=cmd.error() or "the gate wrote no comparison.json")
        return result
    result.update(gate_summary(document))
    result["error"] = None if cmd.returncode in (0, 1) else cmd.error()
    return result


def run_preset(accel: str, *, opts: CheckOptions, clock: Clock) -> dict[str, Any]:
    """The booth-2010 preset at :data:`BOOTH_SCALE`, one sample a cell."""
    results = opts.out_dir / "runs" / "booth-2010"
    args = ["sweep", "--preset", "booth-2010", "--scale", str(BOOTH_SCALE), "--repeat", "1", "--accel", accel]
    args += ["--results-dir", str(results), "--work-dir", str(opts.work_dir)]
    cmd = run_diskbench(
        args, binaries=opts.binaries, timeout_s=clock.left_s() - END_RESERVE_S, log_path=results / "sweep.log"
    )
    return {
        "preset": "booth-2010",
        "scale": BOOTH_SCALE,
        "accel": accel,
        "seconds": round(cmd.seconds, 1),
        "cells": [sample_figures(r) for r in _records(results)],
        "error": cmd.error(),
    }


# -- the check -----------------------------------------------------------------------------------


def run_check(opts: CheckOptions, *, progress: Callable[[str], None]) -> dict[str, Any]:
    """The check: its document (also written to ``OUT/kvm-check.json``, and as text to
    ``OUT/kvm-check.txt``)."""
    from harness.guest import build_guest
    from harness.sample.accel import advice

    clock = Clock(opts.total_s)
    qemu = _path(opts.binaries.qemu)
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    opts.work_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "format": 1,
        "quick": opts.quick,
        "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "deadline_s": opts.total_s,
        "prepared": [],
        "steps": [],
    }

    def step(name: str, fn: Callable[[], Any]) -> Any:
        progress(f"kvm-check: {name} ({clock.elapsed_s():.0f} s in, {clock.left_s():.0f} s left)")
        started = time.monotonic()
        try:
            value = fn()
            error = None
        except HarnessError as exc:
            value, error = None, exc.message
        doc["steps"].append({"step": name, "seconds": round(time.monotonic() - started, 1), "error": error})
        if error:
            progress(f"kvm-check: {name}: {error}")
        return value

    doc["machine"] = step("machine", lambda: machine_facts(qemu, opts.work_dir))
    created = step("account", ensure_account)
    if created:
        doc["prepared"].append(created)
    granted = step("kvm-access", ensure_kvm_access)
    if granted:
        doc["prepared"].append(granted)
    guest = step("guest", build_guest)
    if guest is not None:
        doc["guest"] = {"recipe_hash": guest.recipe_hash, "kernel": guest.kernel_version}
        tcg_timeout = min(TCG_BOOT_TIMEOUT_S, clock.left_s() / 3)
        kvm_timeout = QUICK_KVM_BOOT_TIMEOUT_S if opts.quick else KVM_BOOT_TIMEOUT_S
        doc["tcg"] = step(
            "boot-tcg",
            lambda: boot_once(guest.kernel, guest.initrd, qemu=qemu, accel="tcg", timeout_s=tcg_timeout),
        )
        doc["kvm"] = step(
            "boot-kvm",
            lambda: boot_once(guest.kernel, guest.initrd, qemu=qemu, accel="kvm", timeout_s=kvm_timeout),
        )
    kvm_boots = bool((doc.get("kvm") or {}).get("boots"))
    tcg_boots = bool((doc.get("tcg") or {}).get("boots"))
    if doc.get("kvm") and not kvm_boots:
        doc["kvm"]["advice"] = advice(doc["kvm"]["error"] or "")
        if (doc.get("machine") or {}).get("virtualized") and "no ready line" in (doc["kvm"]["error"] or ""):
            doc["kvm"]["advice"] = (
                "this machine is itself a virtual machine (its CPUs say 'hypervisor'): its nested KVM "
                "starts the guest but the guest never reaches ready; run on a host with KVM on bare "
                "metal or with nested virtualization enabled; " + doc["kvm"]["advice"]
            )
    doc["accel"] = "kvm" if kvm_boots else "tcg" if tcg_boots else None
    doc["samples"] = []
    doc["gate"] = None
    doc["preset"] = None
    if kvm_boots:
        # --quick (the tests') keeps to the dd samples and the small gate
        for workload in ("dd",) if opts.quick else ("dd", "install"):
            for accel in ("kvm", "tcg"):
                timeout = 90.0 if accel == "kvm" else 150.0
                doc["samples"].append(
                    step(
                        f"sample-{accel}-{workload}",
                        lambda w=workload, a=accel, t=timeout: run_sample(  # type: ignore[misc]
                            w, a, opts=opts, clock=clock, timeout_s=t
                        ),
                    )
                )
        reserve = END_RESERVE_S if opts.quick else PRESET_RESERVE_S + END_RESERVE_S
        doc["gate"] = step("gate-kvm", lambda: run_aa_gate("kvm", opts=opts, clock=clock, reserve_s=reserve))
        if not opts.quick:
            doc["preset"] = step("preset-kvm", lambda: run_preset("kvm", opts=opts, clock=clock))
    elif tcg_boots:
        doc["gate"] = step(
            "gate-tcg", lambda: run_aa_gate("tcg", opts=opts, clock=clock, reserve_s=END_RESERVE_S)
        )
    doc["elapsed_s"] = round(clock.elapsed_s(), 1)
    gate = doc["gate"] or {}
    doc["ok"] = bool(doc["accel"]) and gate.get("verdict") not in (None, "error") and not gate.get("error")
    write_text_atomic(opts.out_dir / JSON_NAME, json.dumps(doc, indent=1) + "\n")
    write_text_atomic(opts.out_dir / TEXT_NAME, render_text(doc))
    return doc

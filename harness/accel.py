"""Which accelerator a sample runs under, and why.

KVM counts only when a guest really reaches its ready line under it: a
``/dev/kvm`` that opens is not enough (a nested host can expose one on which
a stock kernel hangs).  ``auto`` falls back to TCG with a loud warning;
``kvm`` fails with exit 3 and the reason.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import confine
from harness.binaries import QEMU
from harness.errors import AccelError, UsageError, VMError
from harness.host import boot_id, tool_version
from harness.paths import cache_dir
from harness.vm import Machine, VMConfig

ACCELS = ("auto", "kvm", "tcg")
KVM_PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class AccelChoice:
    accel: str
    reason: str


def kvm_device_problem(dev: str = "/dev/kvm") -> str | None:
    """Why /dev/kvm cannot be used, or None if it opens read-write."""
    if not os.path.exists(dev):
        return f"{dev} does not exist (no KVM in this kernel or no nested virtualization)"
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"{dev} cannot be opened: {exc.strerror} (add this user to the kvm group)"
    os.close(fd)
    return confine.device_problem(dev, confine.account())


def probe_kvm(
    kernel: Path, initrd: Path, *, qemu: str = QEMU, timeout_s: float = KVM_PROBE_TIMEOUT_S
) -> str | None:
    """Boot the guest under KVM with ``qemu``; None if it reached ready, else why not."""
    problem = kvm_device_problem()
    if problem:
        return problem
    config = VMConfig(
        kernel=kernel,
        initrd=initrd,
        append=["diskbench.workload=probe"],
        drives=[],
        accel="kvm",
        qemu=qemu,
    )
    with tempfile.TemporaryDirectory(prefix="diskbench-probe-") as tmp:
        try:
            with Machine(config, Path(tmp), name="kvm-probe") as vm:
                vm.wait_event("ready", timeout_s=timeout_s, what="ready line under KVM")
        except VMError as exc:
            console = exc.log_tail.strip().splitlines()
            last = f" (console: {console[-1][:120]})" if console else ""
            return f"a guest did not boot under KVM: {exc.message}{last}"
    return None


def _cache_key(kernel: Path, qemu: str) -> str:
    return "|".join([boot_id(), qemu, tool_version(qemu), str(kernel), str(kernel.stat().st_size)])


def choose_accel(
    requested: str,
    kernel: Path,
    initrd: Path,
    *,
    warn: Callable[[str], None],
    use_cache: bool = True,
    qemu: str = QEMU,
) -> AccelChoice:
    """Resolve ``auto|kvm|tcg`` into the accelerator that really works here for ``qemu``.

    The probe result is cached per host boot and QEMU binary, so ``auto``
    costs one probe boot per reboot, not one per run.
    """
    if requested not in ACCELS:
        raise UsageError(f"unknown accel {requested!r}: use one of {', '.join(ACCELS)}")
    if requested == "tcg":
        return AccelChoice("tcg", "requested with --accel tcg")
    cache_file = cache_dir() / "accel.json"
    key = _cache_key(kernel, qemu)
    problem: str | None
    cached: dict[str, str | None] = {}
    if use_cache and cache_file.exists():
        try:
            cached = json.loads(cache_file.read_text())
        except (OSError, json.JSONDecodeError):
            cached = {}
    if cached.get("key") == key:
        problem = cached.get("problem")
    else:
        problem = probe_kvm(kernel, initrd, qemu=qemu)
        if use_cache:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"key": key, "problem": problem}))
            tmp.replace(cache_file)
    if problem is None:
        return AccelChoice("kvm", "a guest reached its ready line under KVM")
    if requested == "kvm":
        raise AccelError(f"--accel kvm: KVM does not work here: {problem}")
    warn(
        f"WARNING: KVM does not work here ({problem}); running under TCG. "
        "Numbers under TCG measure emulation, not disks: never compare them with KVM results."
    )
    return AccelChoice("tcg", f"auto: KVM unusable: {problem}")

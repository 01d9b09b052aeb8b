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

from harness.errors import AccelError, UsageError, VMError
from harness.host import confine
from harness.host.hostinfo import boot_id, tool_version
from harness.paths import cache_dir
from harness.sample.vm import Machine, VMConfig

ACCELS = ("auto", "kvm", "tcg")
KVM_PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class AccelChoice:
    accel: str
    reason: str
    problem: str | None = None  # why KVM does not work, where ``auto`` fell back to TCG


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


def probe_kvm(kernel: Path, initrd: Path, *, qemu: str, timeout_s: float = KVM_PROBE_TIMEOUT_S) -> str | None:
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
            return probe_failure(exc.message, exc.log_tail)
    return None


def probe_failure(message: str, log_tail: str) -> str:
    """Why the probe guest did not boot under KVM, said once and whole (pure).

    Where QEMU exited, its own last line is the reason (an assertion of its KVM code, say) and
    what came before it in ``message`` (a QMP connection that failed because QEMU was gone) is
    left out; the last line of the log is added only when the message does not hold it already.
    """
    exited = message.find("QEMU exited with")
    if exited > 0:
        message = message[exited:]
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    if lines and lines[-1] not in message:
        message = f"{message} (its last output: {lines[-1]})"
    return f"a guest did not boot under KVM: {message}"


def advice(problem: str) -> str:
    """What to do about a KVM that does not work, for ``problem`` as :func:`probe_kvm` says it."""
    tcg = "until then samples run under TCG (emulation: slower, never compared with KVM's numbers)"
    if "does not exist" in problem:
        return f"load the kvm_intel or kvm_amd module, or enable nested virtualization for this VM; {tcg}"
    if "cannot be opened" in problem or "cannot use" in problem or "kvm group" in problem:
        return f"give the user that runs QEMU read-write access to /dev/kvm (the kvm group); {tcg}"
    if "QEMU exited" in problem or "QEMU did not start" in problem:
        return (
            "this QEMU stops under this host's KVM (often nested virtualization lacking a CPU feature "
            f"QEMU needs): try another QEMU (--qemu PATH) or a host with KVM on bare metal; {tcg}; "
            "--accel tcg skips the probe"
        )
    return f"check the host's KVM (dmesg), then probe again with `diskbench accel --no-cache`; {tcg}"


# the probe's result as :func:`probe_failure` words it; a cached result of another form is probed again
_CACHE_FORMAT = "2"


def _cache_key(kernel: Path, qemu: str) -> str:
    return "|".join(
        [_CACHE_FORMAT, boot_id(), qemu, tool_version(qemu), str(kernel), str(kernel.stat().st_size)]
    )


def choose_accel(
    requested: str,
    kernel: Path,
    initrd: Path,
    *,
    warn: Callable[[str], None],
    use_cache: bool = True,
    qemu: str,
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
        raise AccelError(f"--accel kvm: KVM does not work here: {problem}; what to do: {advice(problem)}")
    warn(
        f"WARNING: KVM does not work here ({problem}); running under TCG. "
        "Numbers under TCG measure emulation, not disks: never compare them with KVM results."
    )
    return AccelChoice("tcg", f"auto: KVM unusable: {problem}", problem)

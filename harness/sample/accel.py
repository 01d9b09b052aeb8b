"""Which accelerator a sample runs under, and why.

KVM counts only when a guest really reaches its ready line under it: a
``/dev/kvm`` that opens is not enough (a nested host can expose one on which
a stock kernel hangs).  ``auto`` falls back to TCG with a loud warning;
``kvm`` fails with exit 3 and the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import AccelError, UsageError, VMError
from harness.host import confine
from harness.paths import cache_dir
from harness.sample.vm import Machine, VMConfig

ACCELS = ("auto", "kvm", "tcg")
KVM_PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class AccelChoice:
    accel: str
    reason: str
    problem: str | None = None  # why KVM does not work, where ``auto`` fell back to TCG


def kvm_device_problem(dev: str = "/dev/kvm", runs_as: int | None = None) -> str | None:
    """Why /dev/kvm cannot be used, or None if it opens read-write."""
    if not os.path.exists(dev):
        return f"{dev} does not exist (no KVM in this kernel or no nested virtualization)"
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"{dev} cannot be opened: {exc.strerror} (add this user to the kvm group)"
    os.close(fd)
    return confine.device_problem(dev, confine.account(runs_as))


def probe_kvm(
    kernel: Path,
    initrd: Path,
    *,
    qemu: str,
    runs_as: int | None = None,
    timeout_s: float = KVM_PROBE_TIMEOUT_S,
) -> str | None:
    """Boot the guest under KVM with ``qemu`` (as ``runs_as``, its side's account); None if it
    reached ready, else why not."""
    problem = kvm_device_problem(runs_as=runs_as)
    if problem:
        return problem
    config = VMConfig(
        kernel=kernel,
        initrd=initrd,
        append=["diskbench.workload=probe"],
        drives=[],
        accel="kvm",
        qemu=qemu,
        runs_as=runs_as,
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


# the probe's result as :func:`probe_failure` words it; a cache of another form is probed again
_CACHE_FORMAT = 3
# the verdicts kept: a runner that alternates a few QEMU builds keeps each one's
_CACHE_ENTRIES = 32


@dataclass(frozen=True)
class ProbeKey:
    """What a KVM probe's verdict depends on: the host kernel (release and build), the QEMU binary
    (its path and the SHA-256 of its bytes) and the guest kernel it boots.  A changed kernel or
    QEMU probes again; a reboot into the same kernel does not."""

    host_kernel: str
    qemu: str
    qemu_digest: str
    guest_kernel: str

    def text(self) -> str:
        return "|".join((self.host_kernel, self.qemu, self.qemu_digest, self.guest_kernel))


def probe_key(kernel: Path, qemu: str) -> ProbeKey:
    """The :class:`ProbeKey` of booting ``kernel`` with ``qemu`` on this host."""
    uname = os.uname()
    path = shutil.which(qemu) or qemu
    return ProbeKey(
        host_kernel=f"{uname.release} {uname.version}",
        qemu=str(Path(path).resolve()),
        qemu_digest=_digest(str(Path(path).resolve())),
        guest_kernel=f"{kernel}:{kernel.stat().st_size}",
    )


def _digest(path: str) -> str:
    """SHA-256 of a file's bytes (empty when it cannot be read: the probe says why)."""
    sha = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                sha.update(chunk)
    except OSError:
        return ""
    return sha.hexdigest()


def _read_cache(path: Path) -> dict[str, str | None]:
    """The cached verdicts by key text (none when the file is missing, damaged or of another form)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT:
        return {}
    entries = data.get("verdicts")
    if not isinstance(entries, dict):
        return {}
    return {str(k): (v if isinstance(v, str) else None) for k, v in entries.items()}


def _write_cache(path: Path, verdicts: dict[str, str | None]) -> None:
    kept = dict(list(verdicts.items())[-_CACHE_ENTRIES:])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": _CACHE_FORMAT, "verdicts": kept}, indent=1))
    tmp.replace(path)


def cached_probe(
    kernel: Path,
    initrd: Path,
    *,
    qemu: str,
    runs_as: int | None = None,
    use_cache: bool = True,
    probe: Callable[..., str | None] | None = None,
    device: Callable[[], str | None] = kvm_device_problem,
) -> str | None:
    """Why KVM does not work with ``qemu`` here, or None: /dev/kvm checked every time (cheap, and
    a user added to the kvm group sees it at once), the probe boot's verdict cached by
    :class:`ProbeKey` in ``CACHE/accel-verdicts.json``.  ``probe`` and ``device`` stand in for the
    probe boot and the /dev/kvm check in tests."""
    problem = device()
    if problem:
        return problem
    boot = probe or probe_kvm
    if not use_cache:
        return boot(kernel, initrd, qemu=qemu, runs_as=runs_as)
    cache_file = cache_dir() / "accel-verdicts.json"
    key = probe_key(kernel, qemu).text()
    verdicts = _read_cache(cache_file)
    if key in verdicts:
        return verdicts[key]
    problem = boot(kernel, initrd, qemu=qemu, runs_as=runs_as)
    verdicts.pop(key, None)
    verdicts[key] = problem
    _write_cache(cache_file, verdicts)
    return problem


def choose_accel(
    requested: str,
    kernel: Path,
    initrd: Path,
    *,
    warn: Callable[[str], None],
    use_cache: bool = True,
    qemu: str,
    runs_as: int | None = None,
) -> AccelChoice:
    """Resolve ``auto|kvm|tcg`` into the accelerator that really works here for ``qemu``.

    The probe boot's verdict is cached per host kernel and QEMU binary (:func:`cached_probe`), so
    ``auto`` costs one probe boot per kernel and QEMU build, not one per run.
    """
    if requested not in ACCELS:
        raise UsageError(f"unknown accel {requested!r}: use one of {', '.join(ACCELS)}")
    if requested == "tcg":
        return AccelChoice("tcg", "requested with --accel tcg")
    problem = cached_probe(kernel, initrd, qemu=qemu, runs_as=runs_as, use_cache=use_cache)
    if problem is None:
        return AccelChoice("kvm", "a guest reached its ready line under KVM")
    if requested == "kvm":
        raise AccelError(f"--accel kvm: KVM does not work here: {problem}; what to do: {advice(problem)}")
    warn(
        f"WARNING: KVM does not work here ({problem}); running under TCG. "
        "Numbers under TCG measure emulation, not disks: never compare them with KVM results."
    )
    return AccelChoice("tcg", f"auto: KVM unusable: {problem}", problem)

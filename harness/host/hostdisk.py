"""Host disk models: the work dir on a modelled disk (a period spinning disk, a SATA SSD) instead of
the runner's own (``native``).

A model is built from what a Debian runner has::

    WORK/.host-disk/backing.raw   a sparse raw file on the runner's disk, ext4 made on it natively
      -> qemu-storage-daemon      serves it (cache.direct=on) over a FUSE export, WORK/.host-disk/export.img
      -> strace                   attached to the daemon: each fdatasync/fsync it makes waits the
                                  profile's flush cost (less what the path itself costs)
      -> /dev/loopN               the export, loop-attached with --direct-io=off: with O_DIRECT the
                                  loop device lost writes to the FUSE file (the export opens its
                                  files direct_io, so no page cache sits there either way)
      -> throttle                 per request at the loop device: cgroup v1 blkio's bps and iops
                                  limits (every bio, the writeback of the page cache included);
                                  without v1 blkio, the daemon's throttle group, whose FUSE reads
                                  arrive as 128 KiB requests (a sequential read is then capped at
                                  iops x 128 KiB: :attr:`Model.throttle` says which)
      -> ext4                     mounted on WORK/host-disk-NAME: the sessions' work dir

:func:`mounted` builds it and tears it down whatever happens; what it made is written to
``WORK/.host-disk/state.json`` as it goes, and :func:`clean_stale` (called with the work dir's lock
held, before a model is built) clears what a killed harness left: its mount, loop device, throttle
limits, daemon and export, found from the state file and from the system's own tables.
Root only (a loop device and a mount): :func:`check_usable` refuses elsewhere with exit 2.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import CommandError, InfraError, UsageError
from harness.host import diskgroups, diskparts, diskprobe, proc
from harness.host.diskparts import throttle_kind

log = logging.getLogger(__name__)

NATIVE = "native"
STATE_DIR = diskparts.STATE_DIR
STATE_FILE = "state.json"
MOUNT_PREFIX = "host-disk-"
#: what the loop device reads ahead for the page cache: a buffered sequential read arrives at the
#: throttle as requests of this size (at the default 128 KiB it would be iops-bound)
READ_AHEAD_KB = 1024
#: a scratch area after the model's ext4 (on the loop device, no file system on it) where the
#: path's ceiling is measured (:func:`harness.host.diskprobe.ceiling`)
SCRATCH = 64 << 20
START_TIMEOUT_S = 15.0


class HostDiskError(UsageError):
    """A host disk model that cannot be used as asked (unknown name, not root): exit 2."""


class OutOfReach(HostDiskError):
    """A profile this host's model path cannot reach (exit 2): what the path measured is carried."""

    def __init__(self, message: str, *, ceiling: diskprobe.Ceiling | None, flush_path_ms: float) -> None:
        super().__init__(message)
        self.ceiling = ceiling
        self.flush_path_ms = flush_path_ms


@dataclass(frozen=True)
class Profile:
    """A named disk model and the figures fio checks it against (``harness/data/host_disks.toml``)."""

    name: str
    description: str
    seq_mib_s: float
    random_iops: int
    flush_ms: float
    capacity: int

    def identity(self, throttle: str) -> str:
        """What a record's machine info says of the model (``host_disk``, part of the machine's
        identity): its name, figures and how it is throttled, one string."""
        return (
            f"{self.name}: {self.seq_mib_s:g} MiB/s, {self.random_iops} IOPS, "
            f"flush {self.flush_ms:g} ms, throttled by {throttle}"
        )


def _profile(name: str, table: dict[str, Any]) -> Profile:
    from harness.sizes import parse_size

    try:
        found = Profile(
            name=name,
            description=str(table["description"]),
            seq_mib_s=float(table["seq_mib_s"]),
            random_iops=int(table["random_iops"]),
            flush_ms=float(table["flush_ms"]),
            capacity=parse_size(str(table["capacity"]), what=f"host disk {name} capacity"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InfraError(f"host disk profile {name!r} in host_disks.toml is malformed ({exc})") from exc
    if found.seq_mib_s <= 0 or found.random_iops <= 0 or found.flush_ms < 0 or found.capacity <= 0:
        raise InfraError(f"host disk profile {name!r} in host_disks.toml has a figure out of range")
    return found


@lru_cache(maxsize=1)
def profiles() -> dict[str, Profile]:
    """Every named model in package data, by name."""
    from harness.paths import package_data

    with open(package_data("host_disks.toml"), "rb") as fh:
        tables = tomllib.load(fh)
    return {name: _profile(name, table) for name, table in tables.items()}


def names() -> list[str]:
    return [NATIVE, *profiles()]


def profile(name: str, *, what: str = "--host-disk") -> Profile | None:
    """The profile ``name`` names, None for ``native``; a :class:`HostDiskError` for any other."""
    if name == NATIVE:
        return None
    found = profiles().get(name)
    if found is None:
        raise HostDiskError(f"{what} {name!r}: no such host disk model: use one of {', '.join(names())}")
    return found


def check_usable(name: str, *, what: str = "--host-disk", euid: int | None = None) -> Profile | None:
    """:func:`profile`, refused (exit 2) where a model cannot be built: it needs root for its loop
    device and mount."""
    found = profile(name, what=what)
    if found is not None and (os.geteuid() if euid is None else euid) != 0:
        raise HostDiskError(
            f"{what} {name}: a host disk model needs root (a loop device and a mount): run as root, "
            f"or use {what} {NATIVE}"
        )
    return found


def model_dir(work_dir: Path, name: str) -> Path:
    """The work dir of the sessions on model ``name`` (its ext4's mount point); ``work_dir`` for native."""
    return work_dir if name == NATIVE else work_dir / f"{MOUNT_PREFIX}{name}"


@dataclass
class Model:
    """A built model: where it is mounted and what holds it up (written to the state file)."""

    work_dir: Path
    profile: Profile
    throttle: str = ""
    loop: str = ""
    loop_devno: str = ""
    qsd_pid: int = 0
    strace_pid: int = 0
    flush_path_ms: float = 0.0
    #: what the path served before the throttle held it (:func:`harness.host.diskprobe.ceiling`)
    ceiling: diskprobe.Ceiling | None = None
    #: what the daemon runs at (``SCHED_FIFO 10``; ``nice -19`` where real time is refused)
    priority: str = ""
    _children: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def state_dir(self) -> Path:
        return self.work_dir / STATE_DIR

    @property
    def mount(self) -> Path:
        return model_dir(self.work_dir, self.profile.name)

    @property
    def export(self) -> Path:
        return self.state_dir / "export.img"

    @property
    def backing(self) -> Path:
        return self.state_dir / "backing.raw"

    def identity(self) -> str:
        return self.profile.identity(self.throttle)

    def state(self) -> dict[str, Any]:
        return {
            "harness_pid": os.getpid(),
            "profile": self.profile.name,
            "throttle": self.throttle,
            "qsd_pid": self.qsd_pid,
            "strace_pid": self.strace_pid,
            "loop": self.loop,
            "loop_devno": self.loop_devno,
            "mount": str(self.mount),
            "export": str(self.export),
            "priority": self.priority,
            "ceiling": self.ceiling.as_dict() if self.ceiling else None,
        }

    def _save(self) -> None:
        from harness.files import write_text_atomic

        write_text_atomic(self.state_dir / STATE_FILE, json.dumps(self.state(), indent=1) + "\n")


def _which(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise InfraError(f"{name} not found: a host disk model needs it; run scripts/setup.sh")
    return found


def _in_child() -> None:
    proc.die_with_parent()
    diskprobe.raise_in_child()


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """A helper process of the model, tied to the harness (it dies with it, even by SIGKILL), run
    above the host's other work (:func:`harness.host.diskprobe.raise_in_child`)."""
    with log_path.open("ab") as out:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_in_child,
        )
    proc.keep_on_interrupt(child.pid)
    return child


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-2000:]
    return ""


def _wait_for(
    done: Callable[[], bool], *, timeout_s: float, child: subprocess.Popen[bytes], what: str, log_path: Path
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if child.poll() is not None:
            raise CommandError(
                f"{what} exited with code {child.returncode} before it was ready (log: {log_path})",
                argv=[str(a) for a in child.args] if isinstance(child.args, list) else [],
                returncode=child.returncode,
                stderr=_tail(log_path),
            )
        if time.monotonic() > deadline:
            raise CommandError(
                f"{what} was not ready within {timeout_s} s (log: {log_path})", stderr=_tail(log_path)
            )
        time.sleep(0.05)


def identity(name: str) -> str | None:
    """The ``host_disk`` of a record's machine info for model ``name``; None for native (a record
    of the native disk has no such key, as before models existed)."""
    found = profile(name)
    return None if found is None else found.identity(throttle_kind())


def _build(model: Model, progress: Callable[[str], None]) -> None:
    prof = model.profile
    qsd = _which("qemu-storage-daemon")
    strace = _which("strace")
    model.state_dir.mkdir(parents=True, exist_ok=True)
    model.mount.mkdir(parents=True, exist_ok=True)
    model.throttle = throttle_kind()
    model._save()
    # ext4 is made on the raw file natively (fast, no lazy init left to run through the model);
    # after it, a scratch area where the path's ceiling is measured
    with open(model.backing, "wb") as fh:
        fh.truncate(prof.capacity + SCRATCH)
    proc.run(
        [
            "mkfs.ext4",
            "-q",
            "-F",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
            str(model.backing),
            f"{prof.capacity // 1024}k",
        ],
        timeout_s=300,
    )
    model.export.touch()
    bps = int(prof.seq_mib_s * 1024 * 1024)
    node = "disk"
    argv = [
        qsd,
        "--blockdev",
        f"driver=file,node-name=disk,filename={model.backing},cache.direct=on,aio=threads",
    ]
    if model.throttle == "qemu-storage-daemon":
        argv += [
            "--object",
            f"throttle-group,id=model,x-bps-total={bps},x-iops-total={prof.random_iops}",
            "--blockdev",
            "driver=throttle,node-name=throttled,throttle-group=model,file=disk",
        ]
        node = "throttled"
    argv += ["--export", f"type=fuse,id=model,node-name={node},mountpoint={model.export},writable=on"]
    qsd_log = model.state_dir / "qemu-storage-daemon.log"
    daemon = _spawn(argv, qsd_log)
    model._children.append(daemon)
    model.qsd_pid = daemon.pid
    model.priority = diskprobe.priority_of(daemon.pid)
    model._save()
    _wait_for(
        lambda: diskparts.is_mounted(model.export),
        timeout_s=START_TIMEOUT_S,
        child=daemon,
        what="qemu-storage-daemon",
        log_path=qsd_log,
    )
    loop = proc.run(["losetup", "--find", "--show", "--direct-io=off", str(model.export)], timeout_s=60)
    model.loop = loop.stdout.strip()
    name = Path(model.loop).name
    model.loop_devno = Path(f"/sys/block/{name}/dev").read_text().strip()
    model._save()
    with contextlib.suppress(OSError):
        Path(f"/sys/block/{name}/queue/read_ahead_kb").write_text(f"{READ_AHEAD_KB}\n")
    # the path's ceiling and its own flush cost are timed with the tracer attached (it stops each
    # of the daemon's system calls), injecting nothing; then the tracer that injects the rest
    # replaces it
    _trace(model, strace, 0)
    # the host's own dirty pages written first: the ceiling is the path's, not a writeback's backlog
    os.sync()
    ceiling = diskprobe.ceiling(model.loop, prof.capacity, SCRATCH, throttled=model.throttle != "blkio")
    for _ in range(diskprobe.PROBE_TRIES - 1):
        if not diskprobe.out_of_reach(
            seq_mib_s=prof.seq_mib_s, random_iops=prof.random_iops, ceiling_found=ceiling
        ):
            break
        time.sleep(diskprobe.PROBE_S)
        ceiling = ceiling.best(
            diskprobe.ceiling(model.loop, prof.capacity, SCRATCH, throttled=ceiling.throttled)
        )
    model.ceiling = ceiling
    model._save()
    _refuse_out_of_reach(model)
    if model.throttle == "blkio":
        diskparts.set_blkio(model.loop_devno, bps, prof.random_iops)
    proc.run(["mount", "-t", "ext4", model.loop, str(model.mount)], timeout_s=60)
    model._save()
    model.flush_path_ms = diskprobe.flush_p50_ms(model.mount)
    _refuse_out_of_reach(model)
    _untrace(model)
    delay_us = max(0, round((prof.flush_ms - model.flush_path_ms) * 1000))
    _trace(model, strace, delay_us)
    progress(
        f"host disk {prof.name}: {model.mount} on {model.loop} ({prof.seq_mib_s:g} MiB/s, "
        f"{prof.random_iops} IOPS by {model.throttle}, flush {prof.flush_ms:g} ms: "
        f"{model.flush_path_ms:.2f} ms of path + {delay_us / 1000:.2f} ms injected; "
        f"daemon at {model.priority}; the path alone: {ceiling.words()})"
    )


def _refuse_out_of_reach(model: Model) -> None:
    """Exit 2 where the path cannot reach the profile (a slower disk than asked is never given)."""
    prof = model.profile
    short = diskprobe.out_of_reach(
        seq_mib_s=prof.seq_mib_s,
        random_iops=prof.random_iops,
        ceiling_found=model.ceiling,
        flush_ms=prof.flush_ms,
        flush_path_ms=model.flush_path_ms or None,
    )
    if short:
        served = model.ceiling.words() if model.ceiling else ""
        if model.flush_path_ms:
            served += f"; a flush {model.flush_path_ms:.2f} ms"
        raise OutOfReach(
            f"--host-disk {prof.name}: out of reach of this host's model path: the profile asks "
            f"{' and '.join(short)}; the path served {served}: use another model, or a runner whose "
            "path is faster (docs/host-disks.md)",
            ceiling=model.ceiling,
            flush_path_ms=model.flush_path_ms,
        )


def _trace(model: Model, strace: str, delay_us: int) -> None:
    """strace attached to every thread of the daemon (and those it starts), each fdatasync and
    fsync delayed by ``delay_us``."""
    tids = sorted(int(t) for t in os.listdir(f"/proc/{model.qsd_pid}/task"))
    trace_log = model.state_dir / "strace.log"
    tracer = _spawn(
        [
            strace,
            "-qq",
            "-f",
            "-o",
            "/dev/null",
            "-e",
            "trace=fdatasync,fsync",
            "-e",
            f"inject=fdatasync,fsync:delay_enter={delay_us}us",
            *[a for tid in tids for a in ("-p", str(tid))],
        ],
        trace_log,
    )
    model._children.append(tracer)
    model.strace_pid = tracer.pid
    model._save()
    _wait_for(
        lambda: all(_tracer_of(model.qsd_pid, tid) == tracer.pid for tid in tids),
        timeout_s=START_TIMEOUT_S,
        child=tracer,
        what="strace",
        log_path=trace_log,
    )


def _untrace(model: Model) -> None:
    """The tracer stopped (SIGTERM: it detaches from the daemon, which goes on)."""
    tracer = model._children.pop()
    tracer.terminate()
    tracer.wait(timeout=10)
    model.strace_pid = 0
    model._save()


def _tracer_of(pid: int, tid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return -1


@contextlib.contextmanager
def mounted(
    work_dir: Path, prof: Profile, *, progress: Callable[[str], None] = lambda _m: None
) -> Iterator[Model]:
    """Model ``prof`` built under ``work_dir`` (its lock held by the caller) for the block; torn down
    whatever happens. What a dead run left is cleared first (:func:`clean_stale`)."""
    work_dir = work_dir.resolve()
    for note in clean_stale(work_dir):
        progress(note)
    model = Model(work_dir=work_dir, profile=prof)
    try:
        _build(model, progress)
        yield model
    finally:
        teardown(work_dir, model.state(), children=model._children)


def _state(work_dir: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        found = json.loads((work_dir / STATE_DIR / STATE_FILE).read_text())
        if isinstance(found, dict):
            return found
    return {}


def teardown(
    work_dir: Path, state: dict[str, Any], *, children: list[subprocess.Popen[bytes]] | None = None
) -> list[str]:
    """Take down every part of a model under ``work_dir``: the mounts, throttle limits, loop
    devices, the tracer and the daemon, the export; from ``state`` and from the system's tables."""
    notes: list[str] = []
    state_dir = work_dir / STATE_DIR
    export = Path(state.get("export") or state_dir / "export.img")
    mounts = {Path(state["mount"])} if state.get("mount") else set()
    with contextlib.suppress(OSError):
        mounts |= {p for p in work_dir.iterdir() if p.name.startswith(MOUNT_PREFIX)}
    for mount in sorted(mounts):
        diskparts.umount(mount, notes)
    loops = set(diskparts.loops(export))
    if state.get("loop"):
        loops.add(str(state["loop"]))
    for loop in sorted(loops):
        devno = ""
        with contextlib.suppress(OSError):
            devno = Path(f"/sys/block/{Path(loop).name}/dev").read_text().strip()
        if loop in diskparts.loops(export):
            with contextlib.suppress(CommandError):
                proc.run(["losetup", "-d", loop], timeout_s=60)
                notes.append(f"detached {loop}")
        if devno and diskparts.blkio_available():
            diskparts.clear_blkio(devno)
            if diskgroups.remove_all(devno):
                notes.append(f"removed the guests' own disks of {loop}")
    tracer = int(state.get("strace_pid") or 0)
    if tracer and Path(diskparts.cmdline(tracer)[0] if diskparts.cmdline(tracer) else "").name == "strace":
        diskparts.stop(tracer, notes, "strace")
    for daemon in sorted({*diskparts.daemons(export)}):
        diskparts.stop(daemon, notes, "qemu-storage-daemon")
    for child in children or []:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait(timeout=5)
    diskparts.umount(export, notes)
    for mount in sorted(mounts):
        with contextlib.suppress(OSError):
            if not diskparts.is_mounted(mount):
                mount.rmdir()
    for name in ("backing.raw", "export.img", STATE_FILE):
        with contextlib.suppress(OSError):
            if not diskparts.is_mounted(state_dir / name):
                (state_dir / name).unlink(missing_ok=True)
    return notes


def clean_stale(work_dir: Path) -> list[str]:
    """Clear what a dead run's model left under ``work_dir`` (call with the work dir's lock held:
    no live run uses it); the notes say what was cleared."""
    work_dir = work_dir.resolve()
    state = _state(work_dir)
    export = work_dir / STATE_DIR / "export.img"
    leftovers = (
        state
        or diskparts.daemons(export)
        or diskparts.loops(export)
        or diskparts.is_mounted(export)
        or any(diskparts.is_mounted(p) for p in work_dir.glob(f"{MOUNT_PREFIX}*"))
    )
    if not leftovers:
        return []
    notes = teardown(work_dir, state)
    return [f"host disk: a dead run's model cleared: {'; '.join(notes) or 'its state file'}"]


def filesystem_of(path: Path) -> str:
    """The file system ``path`` is on (:func:`harness.host.hostinfo.filesystem_type`)."""
    from harness.host.hostinfo import filesystem_type

    return filesystem_type(path)

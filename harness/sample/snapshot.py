"""Snapshot start: restore a guest saved at its ready line instead of booting it.

A guest is booted once per *key* and stopped at its ready line (where it
waits for its workload on the control port); QEMU's own migration stream of
it is saved under ``cache/snapshots/KEY/state``.  A sample then starts QEMU
with ``-incoming``, feeds it that stream over a UNIX socket, continues the
guest on a fresh image of its own under the same device, and sends the
workload, exactly as after a cold boot.

The key is a hash of everything the guest saw before its ready line: the
guest build, the QEMU binary and version, and QEMU's command line with what is
not guest-visible taken out (image paths and formats, aio, log paths) and
the cache mode reduced to what the guest sees of it (a volatile write cache or
not), plus the disk's size.  A change of any of it gives a new snapshot.

NVMe devices cannot be migrated by QEMU (7.2 marks them unmigratable): their
snapshot has the drive's backend but no device, and the device is hot-added
after the restore (ACPI PCI hotplug; the guest's nvme driver is loaded at
boot and probes it as at boot).

A saved guest has a VM generation ID device (``vmgenid``): every restore
gives it a new ID, and the guest's kernel reseeds its random number generator,
so restored samples do not all draw the random numbers the snapshot held.

The stream is written and read by the harness over UNIX sockets, never with
``exec:`` (a sandboxed QEMU may not spawn processes).  A QEMU that cannot
load its own stream gives a cold boot, with a warning and the reason in the
sample (``host.start_fallback``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, VMError
from harness.files import publish_dir
from harness.host import confine
from harness.host.hostinfo import tool_version
from harness.paths import cache_dir
from harness.sample.vm import Drive, Machine, VMConfig
from harness.sample.vm.channels import connect_unix
from harness.sample.vm.config import DEBUG_THREADS
from harness.spec import Cache, CacheState, Cell, Interface

FORMAT_VERSION = 1
STATE_FILE = "state"
META_FILE = "meta.json"
# the guest sees no volatile write cache under these (QEMU's WCE off)
NO_WRITE_CACHE = (Cache.WRITETHROUGH, Cache.DIRECTSYNC)
# devices QEMU cannot migrate: hot-added after the restore
HOTPLUG = (Interface.NVME,)
DEVICE_MODEL = {Interface.NVME: "nvme"}
POLL_S = 0.01
PRUNE_IDLE_S = 14 * 86400.0
# QEMU's VM generation ID: guid=auto gives every QEMU process a new GUID, and a
# restoring QEMU writes it into the guest and notifies it (ACPI); the guest's
# vmgenid driver then reseeds the kernel's random number generator.
VMGENID_DEVICE = "vmgenid,guid=auto"


class Start(Enum):
    """How a sample's guest starts (``--start``)."""

    COLD = "cold"
    SNAPSHOT = "snapshot"
    AUTO = "auto"


def parse_start(value: str) -> Start:
    try:
        return Start(value)
    except ValueError:
        raise ValueError(f"--start {value}: expected one of cold, snapshot, auto") from None


def not_applicable(cell: Cell) -> str | None:
    """Why snapshot start does not apply to ``cell``, or None where it does.

    A warm or cold sample measures an image a priming run already wrote: a
    guest restored from a snapshot would hold the partition table of a blank
    disk, so those samples boot.
    """
    if cell.cache_state is not CacheState.FRESH:
        return f"cache state {cell.cache_state.value} runs on a primed image"
    return None


def snapshot_root() -> Path:
    return cache_dir() / "snapshots"


@dataclass(frozen=True)
class SnapshotConfig(VMConfig):
    """A guest that is saved and restored: with a VM generation ID device.

    Without it every restored guest continues the kernel random state the
    snapshot holds, and draws the same "random" numbers until its next
    reseed: ext4 starts its inode-table zeroing thread (ext4lazyinit) after
    a random delay of up to 5 s at mount, so every restored dd sample got the
    same delay, while a cold boot's varies.
    """

    def extra_args(self) -> list[str]:
        return ["-device", VMGENID_DEVICE]


def for_snapshot(config: VMConfig) -> SnapshotConfig:
    """The config a snapshot is taken and restored with: unmigratable devices detached."""
    drives = [replace(d, attach=False) if d.interface in HOTPLUG and d.attach else d for d in config.drives]
    values = {f.name: getattr(config, f.name) for f in fields(VMConfig)}
    return SnapshotConfig(**{**values, "drives": drives, "control": True})


def _guest_visible_drive(value: str) -> str:
    kept = []
    for option in value.split(","):
        name, _, setting = option.partition("=")
        if name in ("file", "format", "aio", "encrypt.key-secret"):
            continue
        if name == "cache":
            wce = "off" if setting in {c.value for c in NO_WRITE_CACHE} else "on"
            kept.append(f"write-cache={wce}")
            continue
        kept.append(option)
    return ",".join(kept)


def key_material(config: VMConfig, *, recipe_hash: str, qemu_version: str, disk_bytes: int) -> dict[str, Any]:
    """What a snapshot depends on, as plain data (pure; hashed by :func:`snapshot_key`)."""
    placeholder = Path("@")
    argv = for_snapshot(config).argv(
        qmp_path=placeholder, console=placeholder, report=placeholder, control=placeholder
    )
    canonical: list[str] = []
    skip = False
    for index, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "-name" and argv[index + 1] == DEBUG_THREADS:
            skip = True  # the host's names of QEMU's threads: not guest-visible
            continue
        if arg == "-object" and argv[index + 1].startswith("secret,"):
            skip = True  # the key of a LUKS image: not guest-visible, and a secret
            continue
        previous = argv[index - 1] if index else ""
        canonical.append(_guest_visible_drive(arg) if previous == "-drive" else arg)
    return {
        "format": FORMAT_VERSION,
        "qemu_binary": binary_identity(canonical[0]),
        "recipe_hash": recipe_hash,
        "qemu": canonical[0],
        "qemu_version": qemu_version,
        "argv": canonical[1:],
        "disk_bytes": disk_bytes,
    }


def binary_identity(binary: str) -> str:
    """Path, size and mtime of the QEMU binary: a rebuild at the same path is a new QEMU."""
    path = shutil.which(binary) or binary
    try:
        st = Path(path).resolve().stat()
    except OSError:
        return path
    return f"{Path(path).resolve()}:{st.st_size}:{st.st_mtime_ns}"


def snapshot_key(material: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Snapshot:
    key: str
    state: Path
    ready: dict[str, Any]
    console: Path


def load(key: str, root: Path | None = None) -> Snapshot | None:
    directory = (root or snapshot_root()) / key
    try:
        meta = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    state = directory / STATE_FILE
    if not state.is_file() or meta.get("key") != key:
        return None
    with contextlib.suppress(OSError):
        os.utime(directory)  # in use: pruning spares it
    return Snapshot(
        key=key, state=state, ready=dict(meta.get("ready", {})), console=directory / "console.log"
    )


def save_state(vm: Machine, dest: Path, *, timeout_s: float) -> None:
    """Stop the guest and write QEMU's migration stream to ``dest``."""
    assert vm.incoming_path is None
    # a short private path: AF_UNIX paths are limited to 107 bytes
    sock_dir = Path(tempfile.mkdtemp(prefix="diskbench-save-"))
    sock_path = sock_dir / "out.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    # QEMU runs as its side's account (harness.host.confine): let it reach the socket
    account = confine.account(vm.config.runs_as)
    if account.switches:
        for path in (sock_dir, sock_path):
            os.chown(path, account.uid, account.gid)
    server.listen(1)
    server.settimeout(timeout_s)
    failure: list[BaseException] = []

    def receive() -> None:
        try:
            conn, _ = server.accept()
            conn.settimeout(timeout_s)
            with conn, open(dest, "wb") as out:
                while chunk := conn.recv(1 << 20):
                    out.write(chunk)
        except OSError as exc:
            failure.append(exc)

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    try:
        # stopped first: one pass over memory, the clocks frozen at the ready line
        vm.qmp("stop")
        vm.qmp("migrate-set-parameters", **{"max-bandwidth": 1 << 40})
        vm.qmp("migrate", uri=f"unix:{sock_path}")
        status = _wait_migration(vm, timeout_s=timeout_s)
        reader.join(timeout_s)
        if status.get("status") != "completed":
            raise VMError(f"saving the guest failed: {status.get('error-desc', status.get('status'))}")
        if failure or reader.is_alive():
            raise VMError(f"saving the guest failed: {failure[0] if failure else 'stream not closed'}")
    finally:
        server.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


def _wait_migration(vm: Machine, *, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        status: dict[str, Any] = vm.qmp("query-migrate")
        if status.get("status") in ("completed", "failed", "cancelled"):
            return status
        if vm.returncode is not None or time.monotonic() > deadline:
            raise VMError(f"migration did not finish within {timeout_s:g} s: {status}", argv=vm.argv)
        time.sleep(POLL_S)


def restore_state(vm: Machine, state: Path, *, timeout_s: float) -> None:
    """Feed ``state`` to a QEMU started with ``-incoming`` and continue the guest."""
    assert vm.incoming_path is not None
    deadline = time.monotonic() + timeout_s
    while not vm.incoming_path.exists():
        if vm.returncode is not None or time.monotonic() > deadline:
            raise VMError(
                "QEMU did not listen for the migration stream", argv=vm.argv, log_tail=vm.stderr_tail()
            )
        time.sleep(POLL_S)
    try:
        # QEMU's account owns the directory: the socket there is fed only when QEMU's account serves it
        conn = connect_unix(vm.incoming_path, uid=vm.account.uid, timeout_s=timeout_s)
        with conn, open(state, "rb") as src:
            conn.settimeout(timeout_s)
            conn.sendfile(src)
    except OSError as exc:
        raise VMError(f"feeding the snapshot failed: {exc}", argv=vm.argv, log_tail=vm.stderr_tail()) from exc
    while True:
        if vm.returncode is not None:
            raise VMError(
                f"QEMU could not load the snapshot (exit {vm.returncode})",
                argv=vm.argv,
                log_tail=vm.stderr_tail(),
            )
        status = vm.qmp("query-migrate").get("status")
        if status == "completed":
            break
        if status == "failed" or time.monotonic() > deadline:
            raise VMError(
                f"loading the snapshot: migration {status}", argv=vm.argv, log_tail=vm.stderr_tail()
            )
        time.sleep(POLL_S)
    for drive in vm.config.drives:
        if not drive.attach:
            vm.qmp(
                "device_add",
                driver=DEVICE_MODEL[drive.interface],
                id=f"{drive.node}-dev",
                drive=drive.node,
                serial=drive.serial,
            )
    vm.qmp("cont")


def build(
    config: VMConfig,
    key: str,
    material: dict[str, Any],
    log_dir: Path,
    *,
    boot_timeout_s: float,
    root: Path | None = None,
) -> Snapshot:
    """Boot ``config`` (a scratch image of the sample's size) to ready and save it."""
    root = root or snapshot_root()
    root.mkdir(parents=True, exist_ok=True)
    prune(root)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        with Machine(for_snapshot(config), log_dir, name="snapshot") as vm:
            ready = vm.wait_event("ready", timeout_s=boot_timeout_s, what="ready line")
            save_state(vm, tmp / STATE_FILE, timeout_s=120.0)
        shutil.copyfile(vm.console_log, tmp / "console.log")
        meta = {"key": key, "material": material, "ready": ready, "created": time.time()}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))
        vanished = VMError(f"snapshot {key} vanished after it was written")
        return publish_dir(tmp, root / key, lambda: load(key, root), vanished)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prune(root: Path, *, idle_s: float = PRUNE_IDLE_S) -> list[Path]:
    """Remove snapshots (about 100 MB each) unused for ``idle_s`` seconds."""
    removed = []
    now = time.time()
    for entry in root.iterdir():
        with contextlib.suppress(OSError):
            if entry.is_dir() and now - entry.stat().st_mtime > idle_s:
                shutil.rmtree(entry)
                removed.append(entry)
    return removed


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


@dataclass
class Started:
    """A running guest, ready for its workload, and how it got there."""

    vm: Machine
    ready: dict[str, Any]
    start: str
    fallback: str | None = None
    snapshot_key: str | None = None


@dataclass(frozen=True)
class SnapshotPlan:
    """What a snapshot start needs besides the guest's config: the guest recipe's hash (part of
    the snapshot's key) and the scratch image the snapshot is built on (``make_scratch`` creates
    it at ``scratch_path`` with the side's qemu-img)."""

    recipe_hash: str
    scratch_path: Path
    make_scratch: Callable[[Path], None]


@contextlib.contextmanager
def start_guest(
    config: VMConfig,
    log_dir: Path,
    *,
    name: str,
    start: Start,
    cell: Cell,
    plan: SnapshotPlan,
    boot_timeout_s: float,
    wait_ready: Callable[[Machine, float], dict[str, Any]],
) -> Iterator[Started]:
    """A launched guest at its ready line, restored where ``start`` asks, else booted; within
    ``boot_timeout_s`` in all (a cold boot after a failed restore has what the attempt left, at
    least a tenth of it: ``wait_ready(vm, timeout_s)``)."""
    deadline = time.monotonic() + boot_timeout_s
    fallback = None
    if start is not Start.COLD:
        reason = not_applicable(cell)
        if reason is None:
            snap: Snapshot | None = None
            try:
                material = key_material(
                    config,
                    recipe_hash=plan.recipe_hash,
                    qemu_version=tool_version(config.qemu, runs_as=config.runs_as),
                    disk_bytes=cell.image.size,
                )
                key = snapshot_key(material)
                snap = load(key)
                if snap is None:
                    plan.make_scratch(plan.scratch_path)
                    try:
                        snap = build(
                            replace(config, drives=_on_scratch(config, plan.scratch_path)),
                            key,
                            material,
                            log_dir / "snapshot-build",
                            boot_timeout_s=boot_timeout_s,
                        )
                    finally:
                        plan.scratch_path.unlink(missing_ok=True)
                vm = Machine(replace(for_snapshot(config), incoming=True), log_dir, name=name)
                try:
                    vm.launch()
                    restore_state(vm, snap.state, timeout_s=boot_timeout_s)
                except BaseException:
                    vm.shutdown()
                    raise
            except HarnessError as exc:
                fallback = f"snapshot start failed, cold boot instead: {exc.message}"
                warn(f"{name}: {fallback}")
            else:
                try:
                    yield Started(vm, {**snap.ready, "restored": True}, Start.SNAPSHOT.value, None, snap.key)
                finally:
                    vm.shutdown()
                return
        elif start is Start.SNAPSHOT:
            fallback = f"snapshot start does not apply: {reason}"
    vm = Machine(config, log_dir, name=name)
    with vm:
        left_s = max(deadline - time.monotonic(), boot_timeout_s / 10)
        yield Started(vm, wait_ready(vm, left_s), Start.COLD.value, fallback)


def _on_scratch(config: VMConfig, scratch: Path) -> list[Drive]:
    """The sample's drives with the disk under test on a scratch image (payloads stay)."""
    return [d if d.readonly else replace(d, path=scratch) for d in config.drives]

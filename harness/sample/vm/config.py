"""The QEMU command line of a guest: its drives, its devices and channels, its files handed over.

:class:`VMConfig` is what a guest is (kernel, drives, accelerator, size, the
binary that runs it); :meth:`VMConfig.argv` spells it as QEMU's argv, and
:func:`handed_config` rewrites its paths into the descriptors QEMU gets
(see :mod:`harness.host.confine`).  No process starts here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import VMError
from harness.host import confine
from harness.spec import SECRET_ID, Aio, Cache, Cell, Interface, secret_object
from harness.subject.qemu_build import qemu_args_for

REPORT_PORT = "org.diskbench.report"
CONTROL_PORT = "org.diskbench.control"
DISK_SERIAL = "diskbench-disk"
# the node of the disk a cell measures
DISK_NODE = "disk0"


PAYLOAD_SERIAL = "diskbench-payload"
TOOLS_SERIAL = "diskbench-tools"
# Kernel options that cut a second of a TCG boot without touching the IO path:
# no crypto self-tests (0.5 s), no IO-APIC timer check.
LEAN_BOOT = ("cryptomgr.notests", "no_timer_check")


# each interface's -device arguments: its controller first where it needs one of its own, then the
# disk; {node} is the drive's node, {dev} the disk device's id, {serial} its serial option
DEVICES: dict[Interface, tuple[str, ...]] = {
    Interface.VIRTIO_BLK: ("virtio-blk-pci,id={dev},drive={node},{serial}",),
    Interface.VIRTIO_SCSI: (
        "virtio-scsi-pci,id={node}-hba",
        "scsi-hd,id={dev},drive={node},bus={node}-hba.0,{serial}",
    ),
    Interface.IDE: ("ide-hd,id={dev},drive={node},bus=ide.0,{serial}",),
    Interface.AHCI: ("ahci,id={node}-hba", "ide-hd,id={dev},drive={node},bus={node}-hba.0,{serial}"),
    Interface.NVME: ("nvme,id={dev},drive={node},{serial}",),
}
if set(DEVICES) != set(Interface):
    raise VMError(f"no device model for interface {', '.join(sorted(set(Interface) - set(DEVICES)))}")


def option_value(text: str) -> str:
    """``text`` as a value of a QEMU option list (``-drive``, ``-blockdev``, ``-trace``): a comma
    doubled, or a path with one would end the value there and start an option of its own."""
    return text.replace(",", ",,")


@dataclass(frozen=True)
class Drive:
    """A drive as QEMU attaches it."""

    node: str
    path: Path
    format: str
    interface: Interface = Interface.VIRTIO_BLK
    cache: Cache = Cache.WRITEBACK
    aio: Aio = Aio.THREADS
    readonly: bool = False
    serial: str = DISK_SERIAL
    # extra -drive options of the policy (validated there: no commas), e.g. a throttle
    options: tuple[tuple[str, str], ...] = ()
    # a LUKS-encrypted qcow2: open it with the secret object (see harness.spec.secret_object)
    key_secret: bool = False
    # False: only the -drive backend; the device is added later (hotplug after a restore)
    attach: bool = True
    # an overlay's chain, (path, format) from the layer under it down to the base: each opened by
    # the descriptor given here, never by the name the overlay holds (harness.sample.chain)
    backing: tuple[tuple[Path, str], ...] = ()

    def argv(self) -> list[str]:
        opts = [
            "if=none",
            f"id={self.node}",
            f"file={option_value(str(self.path))}",
            f"format={self.format}",
            f"cache={self.cache.value}",
            f"aio={self.aio.value}",
        ]
        if self.readonly:
            opts.append("readonly=on")
        if self.key_secret:
            opts.append(f"encrypt.key-secret={SECRET_ID}")
        for depth, (layer, layer_format) in enumerate(self.backing, 1):
            node = "backing." * depth
            opts += [f"{node}driver={layer_format}", f"{node}file.filename={option_value(str(layer))}"]
        opts += [f"{name}={value}" for name, value in self.options]
        dev = f"{self.node}-dev"
        args = ["-drive", ",".join(opts)]
        if not self.attach:
            return args
        for device in DEVICES[self.interface]:
            args += ["-device", device.format(node=self.node, dev=dev, serial=f"serial={self.serial}")]
        return args


DEBUG_THREADS = "debug-threads=on"


def cell_drive(
    cell: Cell,
    image: Path,
    *,
    options: tuple[tuple[str, str], ...] = (),
    backing: tuple[tuple[Path, str], ...] = (),
) -> Drive:
    """The drive of ``cell``'s disk (node ``DISK_NODE``): ``image`` in the cell's format, on its
    interface, cache and aio, LUKS-opened where it is encrypted; ``options``: the policy's
    ``-drive`` options it takes, ``backing``: an overlay's chain (see :class:`Drive`)."""
    return Drive(
        node=DISK_NODE,
        path=image,
        format=cell.image.format.value,
        interface=cell.drive.interface,
        cache=cell.drive.cache,
        aio=cell.drive.aio,
        options=options,
        key_secret=cell.image.encrypted,
        backing=backing,
    )


@dataclass(frozen=True)
class VMConfig:
    kernel: Path
    initrd: Path
    append: Sequence[str]
    drives: Sequence[Drive]
    # the binary given (a path, or a name on PATH)
    qemu: str
    # the uid QEMU runs as when the harness is root (the side's Binaries.runs_as); None: the QEMU account
    runs_as: int | None = None
    accel: str = "tcg"
    mem_mib: int = 256
    smp: int = 1
    # a virtio-serial port the host writes the workload to (see Machine.send_control)
    control: bool = False
    # wait for a migration stream on a UNIX socket (see harness.sample.snapshot)
    incoming: bool = False
    # the CPUs QEMU and every thread of it run on (empty: any); not part of its command line, so
    # not of a snapshot's key (see harness.sample.pairing: a gate's pair shares one CPU)
    affinity: tuple[int, ...] = ()

    def argv(
        self,
        *,
        qmp_path: Path,
        console: Path,
        report: Path,
        control: Path | None = None,
        incoming: Path | None = None,
    ) -> list[str]:
        cpu = ["-cpu", "host"] if self.accel == "kvm" else []
        args = [
            self.qemu,
            # a fetched build's own firmware first, never the system's (harness.subject.qemu_build)
            *qemu_args_for(self.qemu),
            "-nodefaults",
            "-nic",
            "none",
            "-display",
            "none",
            "-sandbox",
            confine.SANDBOX,
            # threads named by what they do ("CPU 0/TCG"): the host reads its vCPUs' waits by name
            # (harness.sample.vm.cpu); not guest-visible
            "-name",
            DEBUG_THREADS,
            "-no-reboot",
            # keep QEMU alive after the guest powers off, to read its counters
            "-no-shutdown",
            "-machine",
            "pc",
            "-accel",
            self.accel,
            *cpu,
            "-m",
            str(self.mem_mib),
            "-smp",
            str(self.smp),
            "-kernel",
            str(self.kernel),
            "-initrd",
            str(self.initrd),
            "-append",
            " ".join(["console=ttyS0", "panic=-1", "loglevel=4", *LEAN_BOOT, *self.append]),
            "-qmp",
            f"unix:{qmp_path},server=on,wait=off",
            "-chardev",
            f"file,id=console,path={console}",
            "-serial",
            "chardev:console",
            "-device",
            "virtio-serial-pci,id=vser0",
            "-chardev",
            f"file,id=report,path={report}",
            "-device",
            f"virtserialport,bus=vser0.0,chardev=report,name={REPORT_PORT}",
        ]
        if control is not None:
            # a pipe chardev (CONTROL.in, opened read-write by QEMU) is always
            # connected, so the guest's read blocks until the host writes
            args += [
                "-chardev",
                f"pipe,id=control,path={control}",
                "-device",
                f"virtserialport,bus=vser0.0,chardev=control,name={CONTROL_PORT}",
            ]
        if incoming is not None:
            args += ["-incoming", f"unix:{incoming}"]
        if any(drive.key_secret for drive in self.drives):
            args += ["-object", secret_object()]
        for drive in self.drives:
            args += drive.argv()
        return [*args, *self.extra_args()]

    def extra_args(self) -> list[str]:
        """What a kind of guest adds at the end of :meth:`argv` (a device, a trace); none here."""
        return []


def handed_config(config: VMConfig, handoff: confine.Handoff) -> VMConfig:
    """``config`` with every file QEMU opens handed over through ``handoff``."""
    drives = [
        replace(
            d,
            path=Path(handoff.read(d.path) if d.readonly else handoff.write(d.path)),
            backing=tuple((Path(handoff.read(layer)), fmt) for layer, fmt in d.backing),
        )
        for d in config.drives
    ]
    return replace(
        config,
        kernel=Path(handoff.read(config.kernel)),
        initrd=Path(handoff.read(config.initrd)),
        drives=drives,
    )

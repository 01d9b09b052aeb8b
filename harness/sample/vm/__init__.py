"""A guest under QEMU: its command line (:mod:`.config`) and the process that runs it (:mod:`.machine`).

``with Machine(VMConfig(..., qemu=binaries.qemu), log_dir) as vm: vm.wait_event("ready", ...)``.
"""

from __future__ import annotations

from harness.sample.vm.config import (
    CONTROL_PORT,
    DISK_NODE,
    DISK_SERIAL,
    LEAN_BOOT,
    PAYLOAD_SERIAL,
    REPORT_PORT,
    TOOLS_SERIAL,
    Drive,
    VMConfig,
    cell_drive,
    handed_config,
)
from harness.sample.vm.machine import (
    IO_STATE_POLL_S,
    MAX_EVENTS,
    PANIC_MARKERS,
    POLL_S,
    REPORT_READ_BYTES,
    Machine,
)

__all__ = [
    "CONTROL_PORT",
    "DISK_NODE",
    "DISK_SERIAL",
    "IO_STATE_POLL_S",
    "LEAN_BOOT",
    "MAX_EVENTS",
    "PANIC_MARKERS",
    "PAYLOAD_SERIAL",
    "POLL_S",
    "REPORT_PORT",
    "REPORT_READ_BYTES",
    "TOOLS_SERIAL",
    "Drive",
    "Machine",
    "VMConfig",
    "cell_drive",
    "handed_config",
]

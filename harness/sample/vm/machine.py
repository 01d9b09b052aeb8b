"""The QEMU process: launch a guest, wait on its reports, always clean up, wait on its reports, always clean up.

A :class:`Machine` is a context manager.  Launch happens in named phases
(``_pre_launch``, ``_launch``, ``_post_launch``) and ``shutdown()`` is
idempotent: a polite QMP ``quit``, then SIGTERM, then SIGKILL of QEMU's
process group; ``_post_shutdown`` removes the private temp dir with the QMP
socket.  Console log, QEMU stderr and the guest's report channel are kept in
``log_dir`` for the record.

Every wait has a deadline given in seconds; a kernel panic on the console,
or QEMU exiting, ends a wait at once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.errors import (
    GuestIOError,
    GuestPanic,
    GuestTimeout,
    ProtocolError,
    VMBootError,
    VMError,
    WorkDirFull,
)
from harness.host import confine, diskgroups, proc
from harness.host.workdir import TMP_PREFIX, clean_stale_tmp_dirs
from harness.sample.vm.channels import Monitor, connect_unix, open_fifo
from harness.sample.vm.config import Drive, VMConfig, handed_config
from harness.sample.vm.cpu import CpuTimes, cpu_times
from harness.spec import Interface
from harness.subject.qemu_build import environ_for
from harness.untrusted import LOG_BYTES, cap_log, oversized_log, strict_json

PANIC_MARKERS = ("Kernel panic - not syncing", "---[ end Kernel panic")
POLL_S = 0.02
# how often a guest that reported is asked whether it powered off, for the first STOP_NEAR_S: a
# pair's two samples polled every 100 ms in step read the same time whenever both stopped within
# one poll, hiding a difference of up to a poll (6 % of a dd cell's 1.7 s)
STOP_POLL_S = 0.002
STOP_NEAR_S = 5.0
# the report channel is the guest's: read it in bounded chunks, keep a bounded number of events
REPORT_READ_BYTES = 1024 * 1024
MAX_EVENTS = 1000
# how often a wait asks QEMU whether it paused the guest on an IO error
IO_STATE_POLL_S = 0.25


class Machine:
    """One QEMU process running one guest.

    ``with Machine(config, log_dir) as vm: vm.wait_ready(boot_timeout_s=60)``.
    """

    def __init__(
        self, config: VMConfig, log_dir: Path, *, name: str = "vm", qmp_timeout_s: float = 30.0
    ) -> None:
        self.config = config
        self.qmp_timeout_s = qmp_timeout_s
        self.log_dir = log_dir
        self.name = name
        self.console_log = log_dir / "console.log"
        self.stderr_log = log_dir / "qemu.stderr"
        self.report_log = log_dir / "report.jsonl"
        self.argv: list[str] = []
        self._tmp: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._qmp: Monitor | None = None
        self._qmp_path = Path()
        self._stderr_file: Any = None
        self._report_offset = 0
        self._report_buf = b""
        self._events: list[dict[str, Any]] = []
        self._launched_at = 0.0
        self._shut_down = False
        self._handoff = confine.Handoff(confine.Account("", os.geteuid(), os.getegid()))
        self._own_disk = contextlib.ExitStack()
        self._io_checked_at = 0.0
        self.control_path: Path | None = None
        # the write end of the control FIFO, opened by the harness before QEMU starts and kept
        self._control_fd: int | None = None
        self.incoming_path: Path | None = None

    # -- lifecycle -------------------------------------------------------
    def __enter__(self) -> Machine:
        self.launch()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def launch(self) -> None:
        try:
            self._pre_launch()
            self._launch()
            self._post_launch(qmp_timeout_s=self.qmp_timeout_s)
        except BaseException:
            self.shutdown()
            raise

    def _pre_launch(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # a private dir: the socket path stays short and nobody else can connect
        clean_stale_tmp_dirs()
        self._tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
        qmp_path = self._tmp / "qmp.sock"
        for path in (self.console_log, self.report_log):
            path.write_bytes(b"")
        self._qmp_path = qmp_path
        # QEMU runs unprivileged (harness.host.confine): it gets its files as descriptors
        self._handoff = confine.Handoff(confine.account(self.config.runs_as))
        self._handoff.directory(self._tmp)
        control = None
        if self.config.control:
            control = self._tmp / "control"
            for suffix in (".in", ".out"):
                os.mkfifo(f"{control}{suffix}", 0o600)
                # QEMU opens the pipe chardev's FIFOs by name, as the QEMU account
                self._handoff.directory(Path(f"{control}{suffix}"))
            # opened now, before QEMU's account can put anything else at that name: the workload
            # line goes to this FIFO whatever the directory holds by then
            self._control_fd = open_fifo(Path(f"{control}.in"))
        self.control_path = control
        self.incoming_path = self._tmp / "incoming.sock" if self.config.incoming else None
        argv = handed_config(self.config, self._handoff).argv(
            qmp_path=qmp_path,
            console=Path(self._handoff.output(self.console_log)),
            report=Path(self._handoff.output(self.report_log)),
            control=control,
            incoming=self.incoming_path,
        )
        self.argv = [argv[0], *self._handoff.qemu_args(), *argv[1:]]

    def _launch(self) -> None:
        self._stderr_file = open(self.stderr_log, "wb")  # noqa: SIM115 - closed in shutdown
        self._launched_at = time.monotonic()
        # on a host disk model, a disk of the model's own to this guest (harness.host.diskgroups)
        image = next((d.path for d in self.config.drives if not d.readonly), None)
        group = self._own_disk.enter_context(diskgroups.own_disk(image)) if image is not None else None
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._stderr_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, to reap it whole
                # a fetched build loads its own modules (harness.subject.qemu_build)
                env={**os.environ, **environ_for(self.config.qemu)},
                # QEMU runs in its own session (a Ctrl-C reaches the harness, which shuts it down
                # politely) and dies with the harness, which would otherwise leave it holding the
                # image's lock; its affinity is set before its account's limits hold its CPUs
                **self._handoff.popen_kwargs(functools.partial(_before_exec, self.config.affinity)),
            )
            diskgroups.join(group, self._proc.pid)
        except FileNotFoundError as exc:
            raise VMBootError(
                f"{self.argv[0]}: not found; run scripts/setup.sh or pass --qemu PATH",
                argv=self.argv,
            ) from exc
        except PermissionError as exc:
            raise VMBootError(
                f"{self.argv[0]}: {self._handoff.account.name or 'this user'} cannot run it "
                f"({exc.strerror}): make it and its directories readable and executable by that account",
                argv=self.argv,
            ) from exc

    def _post_launch(self, *, qmp_timeout_s: float = 30.0) -> None:
        # QEMU creates the listening socket before it starts the guest; wait
        # for it while watching the process, so a bad argv fails at once.
        deadline = time.monotonic() + qmp_timeout_s
        while not self._qmp_path.exists():
            if self.returncode is not None or time.monotonic() > deadline:
                raise self._boot_error(f"QEMU did not start: {self._exit_summary()}")
            time.sleep(POLL_S)
        while True:
            try:
                sock = connect_unix(self._qmp_path, uid=self._handoff.account.uid)
                break
            except OSError as exc:
                if self.returncode is not None or time.monotonic() > deadline:
                    raise self._boot_error(f"QMP connection failed: {exc}; {self._exit_summary()}") from exc
                time.sleep(POLL_S)
        qmp = Monitor(sock)
        try:
            # a QEMU that accepts and never greets ends the wait at the deadline, not later
            qmp.connect_within(max(deadline - time.monotonic(), POLL_S))
        except Exception as exc:
            qmp.close()
            sock.close()
            if isinstance(exc, TimeoutError):
                what = f"QMP: no greeting within {qmp_timeout_s:g} s"
            else:
                # the socket closed under the greeting: QEMU is on its way out, and says why
                self._wait_exit(min(2.0, max(deadline - time.monotonic(), 0.0)))
                what = f"QMP connection failed ({type(exc).__name__}: {exc})"
            raise self._boot_error(f"{what}; {self._exit_summary()}") from exc
        qmp.settimeout(30.0)
        self._qmp = qmp

    def shutdown(self, *, timeout_s: float = 10.0) -> None:
        """Stop QEMU however it is; idempotent; always removes the temp dir."""
        if self._shut_down:
            return
        self._shut_down = True
        try:
            if self._proc is not None and self._proc.poll() is None:
                quit_sent = False
                if self._qmp is not None:
                    try:
                        # a QEMU that never answers holds the shutdown no longer than its own wait
                        self._qmp.settimeout(timeout_s)
                        self._qmp.cmd("quit")
                        quit_sent = True
                    except Exception:  # noqa: BLE001 - QEMU may be gone or hung; escalate below
                        pass
                # a quit that could not be sent (QMP broken by an interrupt) is not waited for
                if not (quit_sent and self._wait_exit(timeout_s)):
                    self._signal_group(signal.SIGTERM)
                    if not self._wait_exit(timeout_s):
                        self._signal_group(signal.SIGKILL)
                        self._wait_exit(timeout_s)
        finally:
            self._post_shutdown()

    def _post_shutdown(self) -> None:
        if self._qmp is not None:
            try:
                self._qmp.close()
            except Exception:  # noqa: BLE001 - closing a dead socket
                pass
            self._qmp = None
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        self._handoff.close()
        self._own_disk.close()
        if self._control_fd is not None:
            os.close(self._control_fd)
            self._control_fd = None
        for path in (self.console_log, self.report_log, self.stderr_log):
            cap_log(path)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _wait_exit(self, timeout_s: float) -> bool:
        assert self._proc is not None
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    # -- observation -----------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def account(self) -> confine.Account:
        """Who QEMU runs as."""
        return self._handoff.account

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._launched_at

    def console_tail(self, max_chars: int = 3000) -> str:
        return _tail(self.console_log, max_chars)

    def stderr_tail(self, max_chars: int = 2000) -> str:
        return _tail(self.stderr_log, max_chars)

    def _boot_error(self, message: str, *, console: bool = False) -> VMBootError:
        """A VMBootError of ``message`` with this QEMU's evidence: its argv, exit code and the tail
        of its stderr (after the tail of the console where ``console``)."""
        tail = self.console_tail() + "\n" + self.stderr_tail() if console else self.stderr_tail()
        return VMBootError(message, argv=self.argv, log_tail=tail, returncode=self.returncode)

    def _exit_summary(self) -> str:
        rc = self.returncode
        if rc is None:
            return "QEMU still running"
        lines = self.stderr_tail().strip().splitlines()
        return f"QEMU exited with {rc}" + (f": {lines[-1]}" if lines else "")

    def _read_events(self) -> None:
        try:
            with open(self.report_log, "rb") as fh:
                fh.seek(self._report_offset)
                chunk = fh.read(REPORT_READ_BYTES)
        except FileNotFoundError:
            return
        self._report_offset += len(chunk)
        self._report_buf += chunk
        *lines, self._report_buf = self._report_buf.split(b"\n")
        if len(self._report_buf) > REPORT_READ_BYTES:
            # a line without end from the guest: garbage, never a growing buffer
            lines.append(self._report_buf[:500])
            self._report_buf = b""
        for raw in lines:
            text = raw.decode("utf-8", "replace").strip()
            if not text:
                continue
            try:
                event = strict_json(text)
            except ValueError:
                # not JSON, NaN/Infinity (a record must stay valid JSON), or nested too deep
                event = {"event": "garbage", "line": text[:500]}
            if not isinstance(event, dict):
                event = {"event": "garbage", "line": text[:500]}
            if len(self._events) >= MAX_EVENTS:
                continue  # a flooding guest: what it sent first is evidence enough
            self._events.append(event)

    def _panicked(self) -> bool:
        tail = self.console_tail(20000)
        return any(marker in tail for marker in PANIC_MARKERS)

    def wait_event(
        self, name: str, *, timeout_s: float | None, what: str, limit_s: float | None = None
    ) -> dict[str, Any]:
        """Wait for the guest's report line ``{"event": name}``.

        ``timeout_s=None`` waits without a deadline.  A panic, QEMU exiting,
        or the deadline ends the wait with an error carrying the console tail.
        ``limit_s``: the whole deadline this wait is what is left of, as the error says it.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._read_events()
            for event in self._events:
                if event.get("event") == name:
                    self._events.remove(event)
                    return event
            self.watch(what)
            if self._panicked():
                raise GuestPanic(
                    f"guest kernel panicked while waiting for {what}",
                    argv=self.argv,
                    log_tail=self.console_tail(),
                )
            if self.returncode is not None:
                self._read_events()
                if any(e.get("event") == name for e in self._events):
                    continue
                raise self._boot_error(f"{self._exit_summary()} while waiting for {what}", console=True)
            self.check_io_state(what=what)
            if deadline is not None and time.monotonic() > deadline:
                raise GuestTimeout(
                    f"no {what} from the guest within {timeout_s if limit_s is None else limit_s:g} s",
                    argv=self.argv,
                    log_tail=self.console_tail(),
                )
            time.sleep(POLL_S)

    def watch(self, what: str) -> None:
        """Fail at once when a file QEMU writes grew past its cap (the console, report and stderr
        logs: the guest floods them); checked by every wait, until QEMU has exited."""
        flood = oversized_log((self.console_log, self.report_log, self.stderr_log))
        if flood is not None:
            raise ProtocolError(
                f"{flood[0].name} grew to {flood[1] / 2**20:.0f} MiB, past the cap of "
                f"{LOG_BYTES / 2**20:.0f} MiB, while waiting for {what}: the guest floods it",
                log_tail=self.console_tail(),
            )

    def check_io_state(self, *, what: str, force: bool = False) -> None:
        """Fail at once when QEMU paused the guest on a host IO error.

        QEMU's default for write errors is ``werror=enospc``: on a full disk
        it stops the guest and waits, so a wait would otherwise run into its
        deadline with no word of the cause.  ``query-status`` says
        ``io-error``; the ``BLOCK_IO_ERROR`` event carries the host's reason
        ("No space left on device").  Asked at most every
        ``IO_STATE_POLL_S`` unless ``force``.
        """
        now = time.monotonic()
        if self._qmp is None or (not force and now - self._io_checked_at < IO_STATE_POLL_S):
            return
        self._io_checked_at = now
        try:
            status = self._qmp.cmd("query-status")
            events = self._qmp.get_events(wait=False)
        except Exception:  # noqa: BLE001 - QEMU exiting is noticed by the caller's wait
            return
        errors = [e.get("data", {}) for e in events if e.get("event") == "BLOCK_IO_ERROR"]
        paused_on_error = isinstance(status, dict) and status.get("status") == "io-error"
        if not errors and not paused_on_error:
            return
        data = errors[-1] if errors else {}
        reason = str(data.get("reason") or "an IO error")
        nospace = bool(data.get("nospace")) or "No space left" in reason
        work_dir = self._work_dir()
        free = _free_bytes(work_dir) if work_dir is not None else None
        where = f"; work dir {work_dir} has {free / 1024**2:.1f} MiB free" if free is not None else ""
        op = f" on {data['operation']}" if data.get("operation") else ""
        node = data.get("device") or data.get("node-name") or "a drive"
        cls = WorkDirFull if nospace else GuestIOError
        raise cls(
            f"QEMU paused the guest on a host IO error{op} of {node} while waiting for {what}: {reason}{where}",
            argv=self.argv,
            log_tail=self.console_tail() + "\n" + self.stderr_tail(),
        )

    def _work_dir(self) -> Path | None:
        for drive in self.config.drives:
            if not drive.readonly:
                return drive.path.parent
        return None

    def garbage(self) -> list[str]:
        """Lines on the report channel that were not JSON objects."""
        self._read_events()
        return [str(e.get("line", "")) for e in self._events if e.get("event") == "garbage"]

    def wait_guest_stopped(self, *, timeout_s: float) -> None:
        """Wait until the guest powered off (QEMU kept alive by -no-shutdown), its files watched
        (:meth:`watch`) all the while.

        Raises :class:`GuestTimeout` when it has not within ``timeout_s``, :class:`VMError` when QEMU
        exited or stopped answering: a guest that does not stop never gives a time of its own choosing.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        while True:
            self.watch("the guest to power off")
            if self.returncode is not None:
                raise self._boot_error(
                    f"{self._exit_summary()} while waiting for the guest to power off", console=True
                )
            status = self.qmp("query-status")
            if isinstance(status, dict) and status.get("status") == "shutdown":
                return
            if time.monotonic() > deadline:
                raise GuestTimeout(
                    f"the guest did not power off by the workload's deadline ({max(timeout_s, 0.0):.1f} s "
                    "after its report): a guest that does not stop is never timed",
                    argv=self.argv,
                    log_tail=self.console_tail(),
                )
            # the moment it powers off ends the workload's time (harness.sample.guest_sampler): asked
            # often while it is near, so that the reading is a few ms late at most, not a poll late
            near = time.monotonic() - started < STOP_NEAR_S
            time.sleep(STOP_POLL_S if near else POLL_S * 5)

    def send_control(self, line: str) -> None:
        """Write one line to the guest's control port (its workload's parameters)."""
        if self.control_path is None:
            raise VMError("this guest has no control port", argv=self.argv)
        if self._control_fd is None:
            raise VMError("the control port is closed (QEMU was shut down)", argv=self.argv)
        try:
            os.write(self._control_fd, line.encode() + b"\n")
        except BlockingIOError as exc:
            raise VMError("the guest's control port is full: QEMU does not read it", argv=self.argv) from exc

    def qmp(self, command: str, **args: object) -> Any:
        if self._qmp is None:
            raise VMError(f"QMP {command}: QEMU is not running", argv=self.argv)
        try:
            return self._qmp.cmd(command, **args)
        except Exception as exc:
            raise VMError(f"QMP {command} failed: {exc}", argv=self.argv) from exc

    def blockstats(self, node: str) -> dict[str, Any]:
        """``query-blockstats`` of one drive: the device (guest-visible) IO."""
        for entry in self.qmp("query-blockstats"):
            if entry.get("device") == node:
                stats: dict[str, Any] = entry.get("stats", {})
                return stats
        return {}

    def set_latency_histograms(self, drive: Drive, boundaries_ns: Sequence[int]) -> None:
        """Give ``drive``'s read, write and flush latency histograms these boundaries (ns).

        QMP ``block-latency-histogram-set`` resets the counts, so what
        ``query-blockstats`` reports afterwards is the IO since this call.  It
        names the guest device, not the drive: for virtio-blk-pci the device
        that holds the drive is the proxy's ``virtio-backend`` child.
        """
        device = f"{drive.node}-dev"
        if drive.interface is Interface.VIRTIO_BLK:
            device = f"/machine/peripheral/{device}/virtio-backend"
        self.qmp(
            "block-latency-histogram-set",
            id=device,
            **{
                "boundaries-read": list(boundaries_ns),
                "boundaries-write": list(boundaries_ns),
                "boundaries-flush": list(boundaries_ns),
            },
        )

    def cpus(self) -> list[int] | None:
        """The CPUs QEMU may run on (its affinity); None when it is not running."""
        if self.pid is None:
            return None
        try:
            return sorted(os.sched_getaffinity(self.pid))
        except OSError:
            return None

    def cpu_times(self) -> CpuTimes | None:
        """What QEMU has had of the CPU so far (its own and its vCPUs' waits); None if not told."""
        return None if self.pid is None else cpu_times(self.pid)

    def proc_io(self) -> dict[str, int]:
        """``/proc/PID/io`` of QEMU: what the host process really read and wrote."""
        if self.pid is None:
            return {}
        figures: dict[str, int] = {}
        try:
            with open(f"/proc/{self.pid}/io", encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    figures[key.strip()] = int(value.strip())
        except (OSError, ValueError):
            return {}
        return figures


def _before_exec(affinity: tuple[int, ...]) -> None:
    """In QEMU's process before exec, before its account's limits (harness.host.confine): die with
    the harness; run on ``affinity`` (every thread QEMU starts inherits it) where given."""
    proc.die_with_parent()
    if affinity:
        os.sched_setaffinity(0, affinity)


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _tail(path: Path, max_chars: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_chars))
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""

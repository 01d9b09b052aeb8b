"""Typed errors of the harness, rooted in one :class:`HarnessError`.

The tree::

    HarnessError                 exit 3 unless a subclass says otherwise
    +-- UsageError               exit 2: bad flags, bad spec, bad input file
    |   +-- SpecError            a cell or sweep value that is not allowed
    +-- InfraError               exit 3: the machine cannot do what was asked
    |   +-- AccelError           the asked accelerator does not work here
    |   +-- BuildError           a revision's build command failed or built nothing
    |   +-- CommandError         a host command failed (argv, rc, stderr tail)
    |   |   +-- ImageError       qemu-img failed
    |   |   +-- GuestBuildError  the guest recipe could not be built
    |   +-- VMError              QEMU could not be run
    |       +-- VMBootError      QEMU exited or the guest died before it was ready
    |       +-- GuestTimeout     a deadline passed (boot or workload)
    |       +-- GuestPanic       the kernel panicked
    |       +-- GuestIOError     QEMU stopped the guest on a host IO error
    |           +-- WorkDirFull  ... because the work dir is full (ENOSPC)
    +-- ProtocolError            the guest's report is missing or malformed
    |   +-- ReplayTimeout        a replay's qemu-io ran past its deadline
    |   +-- StreamOverCap        a recording's write log or trace grew past its cap
    +-- RecordError              a stored record cannot be read (old, truncated)

Errors carry their evidence (argv, exit code, log tail) so that a failed
sample can be recorded with it instead of being reduced to a bare message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class ExitCode:
    """Exit codes of the ``diskbench`` command; each means one thing (:data:`EXIT_CODES` says which)."""

    OK = 0
    REGRESSION = 1
    USAGE = 2
    INFRA = 3
    NOT_FOUND = 4
    INTERRUPTED = 130


@dataclass(frozen=True)
class ExitMeaning:
    """What one exit code means, and the commands that give it (empty: every command)."""

    code: int
    meaning: str
    commands: tuple[str, ...] = ()


#: The one table of exit codes: every command's help and docs/usage.md are made from it.
EXIT_CODES: tuple[ExitMeaning, ...] = (
    ExitMeaning(ExitCode.OK, "ok: nothing failed (bisect: the first bad commit found)"),
    ExitMeaning(
        ExitCode.REGRESSION,
        "a regression (or a structural counter that changed, unless changes pass); nothing else",
        ("compare", "gate"),
    ),
    ExitMeaning(ExitCode.USAGE, "bad usage or input: one line names it and the fix"),
    ExitMeaning(
        ExitCode.INFRA,
        "infrastructure failure: no working accelerator, a boot timeout, a full disk, failed "
        "samples, an error the harness did not foresee (its log named); in compare and gate also "
        "a cell in error: both sides failed, a side lacks it, no cell in common",
    ),
    ExitMeaning(
        ExitCode.NOT_FOUND,
        "no first bad commit: no cell separates the ends, or only skipped commits are left",
        ("bisect",),
    ),
    ExitMeaning(
        ExitCode.INTERRUPTED,
        "interrupted (Ctrl-C, SIGTERM): every QEMU shut down, the records written so far kept",
    ),
)


def exit_codes(command: str | None = None) -> tuple[ExitMeaning, ...]:
    """The exit codes ``command`` gives (None: every code of every command)."""
    return tuple(e for e in EXIT_CODES if command is None or not e.commands or command in e.commands)


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""

    exit_code = ExitCode.INFRA

    def __init__(self, message: str, *, log_tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail

    def __str__(self) -> str:
        return self.message


class UsageError(HarnessError):
    """Bad input from the user: printed as one line, exit 2."""

    exit_code = ExitCode.USAGE


class SpecError(UsageError):
    """A value of a cell or sweep spec that is not allowed."""


class InfraError(HarnessError):
    """The machine cannot do what was asked: exit 3."""


class AccelError(InfraError):
    """The requested accelerator does not work on this machine."""


class BuildError(InfraError):
    """A revision's QEMU build command failed, or left no executable (a bisection skips the commit)."""


class CommandError(InfraError):
    """A host command failed; carries argv, exit code and stderr tail."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr: str = "",
        timed_out: bool = False,
    ) -> None:
        super().__init__(message, log_tail=stderr[-2000:])
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        #: the command was killed at its deadline
        self.timed_out = timed_out


class ImageError(CommandError):
    """qemu-img failed or an image is not what it should be."""


class GuestBuildError(CommandError):
    """The guest recipe could not be built (a package cannot be fetched...)."""


class VMError(InfraError):
    """QEMU could not be run as asked."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        log_tail: str = "",
        returncode: int | None = None,
    ) -> None:
        super().__init__(message, log_tail=log_tail)
        self.argv = list(argv)
        self.returncode = returncode


class VMBootError(VMError):
    """QEMU exited, or the guest died, before the guest was ready."""


class GuestTimeout(VMError):
    """A deadline passed while waiting for the guest."""


class GuestPanic(VMError):
    """The guest kernel panicked."""


class GuestIOError(VMError):
    """QEMU paused the guest on a host IO error (``BLOCK_IO_ERROR``, status ``io-error``)."""


class WorkDirFull(GuestIOError):
    """The work dir ran out of space under a running guest: every later sample would fail too."""


class ProtocolError(HarnessError):
    """The guest's report is missing or malformed: a failed sample, never a number."""


class ReplayTimeout(ProtocolError):
    """A replay's qemu-io ran past its deadline (a head's: the gate's ``head-timed-out``)."""


class StreamOverCap(ProtocolError):
    """A recording's write log or trace grew past its cap: the guest writes far more than the cell's
    disk (a head's: a structural change of the cell, never an infrastructure error)."""


class RecordError(HarnessError):
    """A stored record cannot be read; the message says what to do."""

    exit_code = ExitCode.USAGE

"""The QEMU binaries a run uses: a value handed down from the command, never process-wide state.

The CLI resolves them once (its flags, else the environment, else the names on
PATH: :meth:`Binaries.on_path`) and passes :class:`Binaries` to everything that
starts QEMU or qemu-img, as QEMU's own ``QEMUMachine`` takes its binary as an
argument.  A gate's two sides each get their own.  Below the CLI they are a
required argument: nothing falls back to PATH on its own, so no call can run
another side's qemu-img by leaving its binaries out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

QEMU = "qemu-system-x86_64"
QEMU_IMG = "qemu-img"
QEMU_IO = "qemu-io"


@dataclass(frozen=True)
class Binaries:
    """``qemu`` runs guests; ``qemu_img`` creates, measures and checks images.

    Each is a path or a name looked up on PATH, kept as given: records name
    the binaries exactly so.
    """

    qemu: str
    qemu_img: str
    #: the uid all three run as when the harness runs as root: a gate's head gets one of its own
    #: (:func:`harness.host.accounts.fresh_account`), so that it cannot signal, trace or write base's
    #: QEMU or files while both run; None: the QEMU account (:data:`harness.host.confine.ACCOUNT`)
    runs_as: int | None = None

    @classmethod
    def on_path(cls) -> Binaries:
        """The names on PATH: what the CLI runs when no flag or variable names others."""
        return cls(qemu=QEMU, qemu_img=QEMU_IMG)

    @property
    def qemu_io(self) -> str:
        """``qemu-io`` of the same build: beside a qemu-img given as a path, else on PATH."""
        if "/" in self.qemu_img:
            return str(Path(self.qemu_img).with_name(QEMU_IO))
        return QEMU_IO


@dataclass(frozen=True)
class QemuChoice:
    """One value of a run's or sweep's QEMU axis: its name as given (``runner``, ``10.0``) and the
    binaries it resolved to (a fetched build's own qemu-img and qemu-io with its QEMU)."""

    name: str
    binaries: Binaries

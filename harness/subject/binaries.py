"""The QEMU binaries a run uses: a value handed down from the command, never process-wide state.

The CLI resolves them once (its flags, else the environment, else the names on
PATH) and passes :class:`Binaries` to everything that starts QEMU or qemu-img,
as QEMU's own ``QEMUMachine`` takes its binary as an argument.  A gate's two
sides each get their own.  Library callers that pass none get
:data:`ON_PATH`.
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

    qemu: str = QEMU
    qemu_img: str = QEMU_IMG

    @classmethod
    def default(cls) -> Binaries:
        """The names on PATH."""
        return ON_PATH

    @property
    def qemu_io(self) -> str:
        """``qemu-io`` of the same build: beside a qemu-img given as a path, else on PATH."""
        if "/" in self.qemu_img:
            return str(Path(self.qemu_img).with_name(QEMU_IO))
        return QEMU_IO


ON_PATH = Binaries()

"""The channels root opens in a directory of QEMU's account: its QMP socket, its control FIFO.

QEMU's account owns that directory and can put anything at a name in it at any time (a link to a
root-only file, to another daemon's socket).  So the harness opens the control FIFO itself before
QEMU starts and keeps it (:func:`open_fifo`), and takes a socket there only from a listener that runs
as QEMU's account (:func:`connect_unix`); QMP's greeting has a deadline (:class:`Monitor`).
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

from qemu.qmp.legacy import QEMUMonitorProtocol

from harness.errors import VMError


class Monitor(QEMUMonitorProtocol):
    """A QMP client over a socket already connected, whose greeting has a deadline."""

    def connect_within(self, timeout_s: float) -> None:
        """Read QEMU's greeting and negotiate, within ``timeout_s`` (``TimeoutError`` past it)."""
        self._qmp.await_greeting = True
        self._qmp.negotiate = True
        self._sync(self._qmp.connect(self._address), timeout_s)


def open_fifo(path: Path) -> int:
    """The FIFO at ``path`` opened for writing without blocking and without following a link;
    :class:`VMError` when something else is there."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        raise VMError(f"{path} is not a FIFO")
    return fd


def connect_unix(path: Path, *, uid: int, timeout_s: float = 5.0) -> socket.socket:
    """A connection to the UNIX socket at ``path`` whose listener runs as ``uid`` (SO_PEERCRED).

    Nothing is sent before the check: a link put at ``path`` to another process's socket (a
    daemon of root's) ends in ``PermissionError`` without a byte written to it.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, peer_uid, _gid = struct.unpack("3i", creds)
        if peer_uid != uid:
            raise PermissionError(
                f"{path} is served by pid {pid} as uid {peer_uid}, not by QEMU's account (uid {uid})"
            )
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock

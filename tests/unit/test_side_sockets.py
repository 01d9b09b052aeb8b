"""What root opens in a directory of QEMU's account: never through a link, never another's socket."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from harness.errors import VMError
from harness.sample.vm.channels import connect_unix, open_fifo


def test_a_link_to_another_process_socket_is_refused_before_a_byte_is_sent(tmp_path: Path) -> None:
    # a daemon's socket (here: ours), linked where QEMU's QMP socket should be
    daemon = tmp_path / "daemon.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(daemon))
    server.listen(1)
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(2)
            try:
                while chunk := conn.recv(4096):
                    received.append(chunk)
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    link = tmp_path / "qmp.sock"
    link.symlink_to(daemon)
    not_ours = os.geteuid() + 1
    with pytest.raises(PermissionError, match=rf"served by pid {os.getpid()} as uid {os.geteuid()}, not by"):
        connect_unix(link, uid=not_ours)
    thread.join(5)
    server.close()
    assert received == []
    # the listener's own uid is accepted
    server2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server2.bind(str(tmp_path / "ok.sock"))
    server2.listen(1)
    with connect_unix(tmp_path / "ok.sock", uid=os.geteuid()):
        pass
    server2.close()


def test_the_control_fifo_is_opened_without_following_a_link_and_only_as_a_fifo(tmp_path: Path) -> None:
    target = tmp_path / "root-only"
    target.write_text("untouched\n")
    target.chmod(0o600)
    link = tmp_path / "control.in"
    link.symlink_to(target)
    with pytest.raises(OSError):
        open_fifo(link)
    with pytest.raises(VMError, match="is not a FIFO"):
        open_fifo(target)
    assert target.read_text() == "untouched\n"
    fifo = tmp_path / "real.in"
    os.mkfifo(fifo, 0o600)
    fd = open_fifo(fifo)  # no reader yet: neither blocks nor fails
    try:
        os.write(fd, b"line\n")
    finally:
        os.close(fd)

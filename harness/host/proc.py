"""The one subprocess helper: list argv, explicit timeout, a result with evidence."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import CommandError

PR_SET_PDEATHSIG = 1

#: The locale of every command: the harness parses what tools print (``apt-cache policy``'s
#: "Candidate:", qemu-img's and mke2fs's messages), and in another locale they print other words
#: (German apt says "Installationskandidat:").  ``C``, not ``C.UTF-8``: gettext translates under
#: the latter when ``LANGUAGE`` is set.  A caller's ``env`` can still set its own.
TOOL_LOCALE: Mapping[str, str] = {"LC_ALL": "C"}


def die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the harness dies, even by SIGKILL.

    A killed harness must not leave a ``qemu-img create -o preallocation=full``
    writing gigabytes into the work dir, holding the image's lock.
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _preexec(extra: dict[str, Any]) -> Callable[[], None]:
    """What runs in the child before exec: :func:`die_with_parent`, then the caller's own
    ``preexec_fn`` (taken out of ``extra``) where it gave one."""
    own = extra.pop("preexec_fn", None)
    return die_with_parent if own is None else _both(die_with_parent, own)


def _both(first: Callable[[], None], then: Callable[[], None]) -> Callable[[], None]:
    def both() -> None:
        first()
        then()

    return both


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout_s: float | None = 600.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input_text: str | None = None,
    error_cls: type[CommandError] = CommandError,
    confined: Mapping[str, Any] | None = None,
) -> CommandResult:
    """Run ``argv`` (never through a shell), its output captured, and return what it did; the
    child dies with the harness.

    ``timeout_s=None`` waits forever; a timeout raises ``error_cls``.
    With ``check=True`` a non-zero exit raises ``error_cls`` carrying argv,
    exit code and the tail of stderr.  The command runs in the C locale (:data:`TOOL_LOCALE`),
    with ``env`` added to the harness's environment.  ``confined`` holds the extra
    ``subprocess`` arguments of :meth:`harness.host.confine.Handoff.popen_kwargs`
    (the account to run as, the descriptors it inherits); a ``preexec_fn`` there runs after the
    one that ties the child to the harness, an ``on_start`` there is called with the child's pid
    as soon as it was started.
    """
    extra = dict(confined or {})
    preexec = _preexec(extra)
    on_start: Callable[[int], None] | None = extra.pop("on_start", None)

    def child(args: list[str], full_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        if on_start is not None:
            return _started(
                args,
                on_start,
                timeout_s=timeout_s,
                input_text=input_text,
                env=full_env,
                cwd=cwd,
                extra={"preexec_fn": preexec, **extra},
            )
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=full_env,
            cwd=cwd,
            input=input_text,
            check=False,
            preexec_fn=preexec,
            **extra,
        )

    return _run(argv, child, timeout_s=timeout_s, check=check, env=env, error_cls=error_cls)


def _started(
    args: list[str],
    on_start: Callable[[int], None],
    *,
    timeout_s: float | None,
    input_text: str | None,
    env: dict[str, str],
    cwd: str | os.PathLike[str] | None,
    extra: dict[str, Any],
) -> subprocess.CompletedProcess[str]:
    """:func:`subprocess.run` of ``args``, output captured, with ``on_start(pid)`` called once the
    child runs; killed and reaped on a timeout (``TimeoutExpired``) or any error of ``on_start``."""
    with subprocess.Popen(
        args,
        stdin=subprocess.PIPE if input_text is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=env,
        cwd=cwd,
        **extra,
    ) as child:
        try:
            on_start(child.pid)
            out, err = child.communicate(input_text, timeout=timeout_s)
        except BaseException:
            child.kill()
            child.communicate()
            raise
        return subprocess.CompletedProcess(args, child.returncode, out, err)


def run_logged(
    argv: Sequence[str | os.PathLike[str]],
    log_path: Path,
    *,
    timeout_s: float | None = 600.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    error_cls: type[CommandError] = CommandError,
    confined: Mapping[str, Any] | None = None,
) -> CommandResult:
    """:func:`run`, with stdout and stderr appended to ``log_path`` as they come (a long command
    can be followed there) instead of being captured; the result's ``stderr`` is the tail of what
    this command wrote."""

    extra = dict(confined or {})
    extra["preexec_fn"] = _preexec(extra)

    def child(args: list[str], full_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return _run_logged(args, log_path, timeout_s=timeout_s, env=full_env, cwd=cwd, extra=extra)

    return _run(argv, child, timeout_s=timeout_s, check=check, env=env, error_cls=error_cls)


def _run(
    argv: Sequence[str | os.PathLike[str]],
    child: Callable[[list[str], dict[str, str]], subprocess.CompletedProcess[str]],
    *,
    timeout_s: float | None,
    check: bool,
    env: Mapping[str, str] | None,
    error_cls: type[CommandError],
) -> CommandResult:
    """``child`` run on ``argv`` in the tools' locale, its failures as ``error_cls`` with the evidence."""
    args = [os.fspath(a) for a in argv]
    full_env = {**os.environ, **TOOL_LOCALE, **(env or {})}
    start = time.monotonic()
    try:
        proc = child(args, full_env)
    except FileNotFoundError as exc:
        raise error_cls(
            f"{args[0]}: command not found; run scripts/setup.sh to install it",
            argv=args,
        ) from exc
    except PermissionError as exc:
        raise error_cls(
            f"{args[0]}: cannot be run ({exc.strerror}): make it and its directories readable and "
            "executable by the user that runs it (see harness/host/confine.py)",
            argv=args,
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise error_cls(
            f"{args[0]} did not finish within {timeout_s} s",
            argv=args,
            stderr=str(exc.stderr or ""),
            timed_out=True,
        ) from exc
    result = CommandResult(
        argv=tuple(args),
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        duration_s=time.monotonic() - start,
    )
    if check and proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        raise error_cls(
            f"{' '.join(args[:3])} failed with exit code {proc.returncode}: {tail[0]}",
            argv=args,
            returncode=proc.returncode,
            stderr=proc.stderr,
        )
    return result


def _run_logged(
    args: list[str],
    log_path: Path,
    *,
    timeout_s: float | None,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    extra: Mapping[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as fh:
        offset = fh.tell()
        fh.write(f"$ {' '.join(args)}\n".encode())
        fh.flush()
        try:
            done = subprocess.run(
                args,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout_s,
                env=env,
                cwd=cwd,
                check=False,
                **{"preexec_fn": die_with_parent, **(extra or {})},
            )
        finally:
            fh.flush()
    with log_path.open("rb") as fh:
        fh.seek(offset)
        written = fh.read().decode(errors="replace")
    return subprocess.CompletedProcess(args, done.returncode, stdout="", stderr=written[-4000:])


#: children that outlive an interrupted round: a host disk model's daemons, ended by its teardown
_KEPT: set[int] = set()


def keep_on_interrupt(pid: int) -> None:
    """Leave child ``pid`` to its owner's teardown when :func:`end_children` ends the others."""
    _KEPT.add(pid)


def end_children(sig: int = signal.SIGTERM) -> list[int]:
    """Send ``sig`` to every child process of the harness but the kept ones (QEMU, qemu-io, a
    pair's swapper: what threads of an interrupted round started); the pids signalled."""
    me, ended = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in _KEPT:
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me:
            try:
                os.kill(int(entry), sig)
                ended.append(int(entry))
            except ProcessLookupError:
                pass
    return ended

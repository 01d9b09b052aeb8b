"""The one subprocess helper: list argv, explicit timeout, a result with evidence."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.errors import CommandError


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
) -> CommandResult:
    """Run ``argv`` (never through a shell) and return what it did.

    ``timeout_s=None`` waits forever; a timeout raises ``error_cls``.
    With ``check=True`` a non-zero exit raises ``error_cls`` carrying argv,
    exit code and the tail of stderr.
    """
    args = [os.fspath(a) for a in argv]
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=full_env,
            cwd=cwd,
            input=input_text,
            check=False,
        )
    except FileNotFoundError as exc:
        raise error_cls(
            f"{args[0]}: command not found; run scripts/setup.sh to install it",
            argv=args,
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise error_cls(
            f"{args[0]} did not finish within {timeout_s} s",
            argv=args,
            stderr=str(exc.stderr or ""),
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

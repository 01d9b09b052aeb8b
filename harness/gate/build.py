"""A side's QEMU built from its checkout: the build command as an account of its own, ended whole,
its tree sealed read-only (:mod:`harness.host.accounts`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import BuildError, CommandError
from harness.host import accounts, proc

#: how long a build may take
BUILD_TIMEOUT_S = 3 * 3600.0


@dataclass(frozen=True)
class BuildInfo:
    """Whose build a side ran: the command, the account it ran as, what was left of it."""

    label: str
    command: str
    account: accounts.BuildAccount
    #: processes of the account still there when the build command ended, killed then
    leftovers_killed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "side": self.label,
            "command": self.command,
            **self.account.as_dict(),
            "leftovers_killed": self.leftovers_killed,
        }


def build_side(
    label: str, command: str, checkout: Path, *, log_path: Path, timeout_s: float = BUILD_TIMEOUT_S
) -> BuildInfo:
    """Run ``command`` in ``checkout`` as a fresh account (:func:`harness.host.accounts.fresh_account`)
    that owns the checkout alone, end every process of it, seal the checkout; raises
    :class:`~harness.errors.BuildError` when the command fails or runs past ``timeout_s``."""
    account = accounts.fresh_account()
    accounts.give_tree(checkout, account)
    kwargs = account.popen_kwargs()
    killed = 0
    try:
        proc.run_logged(
            shlex.split(command),
            cwd=checkout,
            timeout_s=timeout_s,
            env={"HOME": str(checkout)},
            log_path=log_path,
            confined=kwargs,
        )
    except CommandError as exc:
        raise BuildError(
            f"the build command failed for {label}: {exc.message}", log_tail=exc.log_tail
        ) from exc
    finally:
        # whatever it left running, in any session, ends with it: nothing of a build outlives it
        killed = accounts.end_account(account, keep=[checkout])
        accounts.seal_tree(checkout)
    return BuildInfo(label=label, command=command, account=account, leftovers_killed=killed)

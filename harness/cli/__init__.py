"""The ``diskbench`` command: one module per command, the flags they share in :mod:`.common`.

Each command module has ``add_parser(sub)`` and ``run(args) -> int``: it parses, calls one
domain function with plain values, and prints.  argparse is imported nowhere else.  Errors map
to exit codes here, in one place: 0 ok, 1 regression, 2 bad usage or input, 3 infrastructure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from harness import __version__
from harness.cli import (
    accel,
    bisect,
    bundle,
    compare,
    gate,
    guest,
    history,
    kvmcheck,
    merge,
    qemu,
    report,
    run,
    show,
    sweep,
)
from harness.cli.builds import qemu_builds
from harness.cli.common import (
    ENV_QEMU,
    ENV_QEMU_IMG,
    Parser,
    configure_logging,
    err,
    exit_epilog,
    resolve_binaries,
)
from harness.cli.reproduce import use_parser
from harness.errors import ExitCode, HarnessError
from harness.subject.qemu_pin import RUNNER
from harness.untrusted import inert_output

# in the order ``diskbench --help`` lists them
COMMANDS: tuple[ModuleType, ...] = (
    run,
    guest,
    qemu,
    accel,
    show,
    sweep,
    merge,
    report,
    compare,
    gate,
    bisect,
    history,
    bundle,
    kvmcheck,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="diskbench",
        description=(
            "Benchmark virtual-disk IO under QEMU: boot a minimal guest on a fresh disk image "
            "per sample, run a workload in it, and record guest and host figures."
        ),
        epilog=exit_epilog(None),
    )
    parser.add_argument("--version", action="version", version=f"diskbench {__version__}")
    parser.add_argument(
        "--qemu",
        metavar="BUILD",
        help=f"the QEMU to run guests with: a qemu-system-x86_64, the prefix of a build fetched by "
        f"`diskbench qemu get`, or a version `diskbench qemu list` offers (10.0; fetched when needed), "
        f"whose qemu-img comes with it (default: ${ENV_QEMU}, else the one on PATH); recorded in "
        "every record's machine info. run and sweep take several, comma-separated, side by side "
        "(runner,10.0: 'runner' is that QEMU)",
    )
    parser.add_argument(
        "--qemu-img",
        metavar="PATH",
        help=f"qemu-img to create and check images with (default: ${ENV_QEMU_IMG}, else the one on PATH)",
    )
    # every sub-parser is a Parser too (argparse makes them of the parent's class): one formatter
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    _set_epilogs(sub)
    return parser


def _set_epilogs(sub: argparse._SubParsersAction[Parser]) -> None:
    """Each command's help ends with the exit codes it gives, from the one table
    (:data:`harness.errors.EXIT_CODES`); a command's sub-commands (``guest build``) with its own."""
    for name, parser in sub.choices.items():
        parser.epilog = exit_epilog(name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    child.epilog = exit_epilog(name)


use_parser(build_parser)


def handlers() -> dict[str, Callable[[argparse.Namespace], int]]:
    """Command name -> its ``run``."""
    return {command.__name__.rsplit(".", 1)[1]: command.run for command in COMMANDS}


def _terminate(signum: int, _frame: object) -> None:
    # SIGTERM (a CI job cancelled, a runner stopping) takes the same path as
    # Ctrl-C, so every QEMU is shut down and the record of the sample in
    # flight is written before the harness exits.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI. Everything it prints goes through :func:`harness.untrusted.inert_output`: an
    error may quote a pull request's policy key or symlink, a line a guest's reason, and none of
    them may become a command of the CI runner that reads the log; what modules log goes there
    too (:func:`~harness.cli.common.configure_logging`)."""
    with inert_output():
        configure_logging()
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # decided once, then handed down as a value (``args.binaries``) to what runs QEMU or qemu-img
        args.qemu_builds = qemu_builds(args)
        single = args.qemu_builds[0] if len(args.qemu_builds) == 1 else None
        args.binaries = resolve_binaries(
            qemu=None if single == RUNNER else single, qemu_img=args.qemu_img, environ=os.environ
        )
        handler = handlers().get(args.command or "")
        if handler is None:
            parser.print_help()
            return ExitCode.USAGE
        return handler(args)
    except HarnessError as exc:
        err(f"diskbench: error: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        err("diskbench: interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # the reader of our output went away (``| head``): nothing more to say, to anyone
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit
        return ExitCode.OK
    except Exception as exc:  # noqa: BLE001 - no traceback reaches a user: one line and a log
        from harness.host.crash import report_crash

        return report_crash(exc, list(sys.argv[1:] if argv is None else argv))

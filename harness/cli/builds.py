"""The QEMU builds ``--qemu`` names: one, or several side by side for ``run`` and ``sweep`` (a QEMU
axis, each build's cells with its own binaries)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from harness.cli.common import executable, qemu_build_flag, resolve_binaries
from harness.errors import UsageError
from harness.subject.binaries import Binaries, QemuChoice


def qemu_axis(values: Sequence[str], runner: Binaries) -> tuple[QemuChoice, ...]:
    """Each value of a QEMU axis (``runner``, a version, a build's prefix or a binary) as the
    binaries it runs: ``runner`` is the run's own (``runner``: ``--qemu``, else the environment,
    else PATH); a fetched build brings its own qemu-img and qemu-io; a bare qemu-system-x86_64
    takes the runner's qemu-img.  Two values that name the same binaries are bad input."""
    from harness.subject.binaries import QemuChoice
    from harness.subject.qemu_pin import RUNNER
    from harness.sweep import check_qemu_value

    out: list[QemuChoice] = []
    for value in values:
        name = check_qemu_value(value, "--qemu")
        if name == RUNNER:
            binaries = runner
        else:
            build = qemu_build_flag(name)
            binaries = (
                build.binaries()
                if build is not None
                else Binaries(qemu=executable("--qemu", name), qemu_img=runner.qemu_img)
            )
        twin = next((c for c in out if c.binaries == binaries), None)
        if twin is not None:
            raise UsageError(
                f"--qemu {twin.name} and {name} are the same QEMU ({binaries.qemu}): name it once"
            )
        out.append(QemuChoice(name, binaries))
    return tuple(out)


#: the commands that run cells under several QEMU builds side by side (``--qemu A,B``)
AXIS_COMMANDS = ("run", "sweep")


def qemu_builds(args: argparse.Namespace) -> tuple[str, ...]:
    """The builds ``--qemu`` names (global, or the command's own: one flag, one meaning), each
    checked as a QEMU axis's value when there are several; several for a command that runs no
    cells side by side is bad input."""
    from harness.spec import split_list
    from harness.sweep import check_qemu_value

    values = tuple(split_list(args.qemu)) if getattr(args, "qemu", None) else ()
    if len(values) > 1:
        if args.command not in AXIS_COMMANDS:
            raise UsageError(
                f"--qemu {args.qemu}: several builds side by side are for {' and '.join(AXIS_COMMANDS)}; "
                f"give {args.command or 'this command'} one"
            )
        values = tuple(check_qemu_value(v, "--qemu") for v in values)
    return values


def qemu_choices(
    values: Sequence[str], args: argparse.Namespace, *, given: bool
) -> tuple[Binaries, tuple[QemuChoice, ...]]:
    """The binaries a run or sweep starts with, and its QEMU axis (empty: one build).

    Two values or more are an axis: each build runs with its own binaries, ``runner`` with the
    run's default (``$DISKBENCH_QEMU``, else PATH).  One value ``given`` on the command line was
    resolved with the run's binaries already (``--qemu-img`` still wins); one from a spec is
    resolved here."""
    from harness.subject.qemu_pin import RUNNER

    if len(values) > 1:
        choices = qemu_axis(values, args.binaries)
        return choices[0].binaries, choices
    if given or not values or values[0] == RUNNER:
        return args.binaries, ()
    return resolve_binaries(qemu=values[0], qemu_img=args.qemu_img, environ=os.environ), ()


def add_qemu_axis(group: Any, *, what: str) -> None:
    """``--qemu`` of ``run`` and ``sweep``, the global flag given after the command: one build, or
    several side by side (a QEMU axis)."""
    group.add_argument(
        "--qemu",
        metavar="BUILD",
        # the global --qemu's value stays unless this one is given
        default=argparse.SUPPRESS,
        help="the QEMU to run, as diskbench --qemu (a qemu-system-x86_64, a fetched build's prefix, "
        "or a version `diskbench qemu list` offers, fetched when needed); several, comma-separated, "
        f"each a build or 'runner' (the QEMU $DISKBENCH_QEMU names, else the one on PATH): {what}",
    )

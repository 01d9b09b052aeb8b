"""The command line that runs a command again: read back from the parser that parsed it.

Every option whose value is not its default is given again, in the parser's order, so a flag
added to a command later is carried without a word here; the caller names the options that only
say where output goes (``--out``, ``--junit``), which are left out, and the values it resolved
(a revision's commit, a run's directory) in place of what was typed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: the top-level options a command's line starts with, before the command's name
GLOBAL_DESTS = ("qemu", "qemu_img")

# how to build the parser of every command: harness.cli sets it (use_parser) when it is imported;
# the commands that give their command line again sit below harness.cli and cannot import it
_BUILD: list[Callable[[], argparse.ArgumentParser]] = []


def use_parser(build: Callable[[], argparse.ArgumentParser]) -> None:
    """Read command lines back with the parsers ``build`` makes (``harness.cli.build_parser``)."""
    _BUILD[:] = [build]


def _subparser(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.ArgumentParser:
    for word in words:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[word]
    return parser


def _given(action: argparse.Action, value: Any) -> list[str]:
    """``action`` with ``value`` as argv; empty at its default."""
    flag = action.option_strings[-1] if action.option_strings else ""
    if value is None or value is False or value == [] or value == _default(action):
        return []
    if isinstance(action, argparse._StoreTrueAction):
        return [flag]
    if isinstance(action, argparse._AppendAction):
        return [w for item in value for w in (flag, _word(item))]
    if action.nargs in ("*", "+") or isinstance(action.nargs, int):
        return [flag, *(_word(v) for v in value)]
    return [flag, _word(value)]


def _default(action: argparse.Action) -> Any:
    """The value ``action`` leaves when not given: argparse converts a string default with the
    action's type (``--max-disk-size 64G`` is a number of bytes)."""
    default = action.default
    if isinstance(default, str) and callable(action.type):
        try:
            return action.type(default)
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            return default
    return default


def _word(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def command_argv(
    args: argparse.Namespace,
    command: Sequence[str],
    *,
    positionals: Sequence[str] = (),
    leave_out: Iterable[str] = (),
    values: Mapping[str, Any] | None = None,
) -> list[str]:
    """``diskbench [global options] COMMAND POSITIONALS OPTIONS`` for ``args`` as parsed by the
    command ``command`` (``["gate"]``, ``["history", "changes"]``).

    ``leave_out``: destinations never given again; ``values``: a destination's value to give in
    place of the parsed one.  An attribute ``args`` lacks counts as its default."""
    top = _BUILD[0]()
    parser = _subparser(top, command)
    skip = set(leave_out)
    chosen = dict(values or {})

    def options(of: argparse.ArgumentParser, dests: Iterable[str] | None) -> list[str]:
        argv: list[str] = []
        for action in of._actions:
            if not action.option_strings or action.dest in skip or isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._VersionAction) or (
                dests is not None and action.dest not in dests
            ):
                continue
            if action.dest in chosen:
                argv += _given(action, chosen[action.dest])
            elif hasattr(args, action.dest):
                argv += _given(action, getattr(args, action.dest))
        return argv

    return [
        "diskbench",
        *options(top, GLOBAL_DESTS),
        *command,
        *positionals,
        *options(parser, None),
    ]


def spec_value(spec: Path, default: Path, repo: Path) -> str | None:
    """A spec path as a command gives it again: None for the default spec, else relative to the
    repository it lies in (a checkout elsewhere has it there too), else absolute."""
    path = Path(spec).resolve()
    if path == default.resolve():
        return None
    return str(path.relative_to(repo) if path.is_relative_to(repo) else path)

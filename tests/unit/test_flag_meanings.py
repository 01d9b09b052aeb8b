"""One meaning per flag: a flag name that several commands take means the same in each of them
(the same destination, action, type, metavar and choices), whatever command it is given to."""

from __future__ import annotations

import argparse
from collections import defaultdict

import pytest
from test_help import ALL, flags

from harness.cli import build_parser, main
from harness.cli.outputs import DEPRECATED, REFUSED


def _meaning(action: argparse.Action) -> tuple[object, ...]:
    kind = type(action).__name__
    choices = tuple(action.choices) if isinstance(action.choices, list | tuple) else None
    return (action.dest, kind, getattr(action.type, "__name__", action.type), action.metavar, bool(choices))


def test_no_flag_name_has_two_meanings() -> None:
    uses: dict[str, dict[tuple[object, ...], list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, parser in ALL:
        for action in flags(parser):
            if (action.help or "").startswith((DEPRECATED, REFUSED)):
                continue  # an old spelling kept working or refused: its help names the flag to use
            for option in action.option_strings:
                uses[option][_meaning(action)].append(name)
    clashes = {flag: dict(meanings) for flag, meanings in uses.items() if len(meanings) > 1}
    assert not clashes, "flags with two meanings:\n" + "\n".join(f"{k}: {v}" for k, v in clashes.items())
    # the names the walk is about: shared by several commands, one meaning each
    assert len(next(iter(uses["--metric"].values()))) >= 4
    assert "diskbench run" in str(uses["--output-format"]) and "diskbench show" in str(
        uses["--output-format"]
    )


def test_every_deprecated_spelling_names_a_flag_its_command_has() -> None:
    for name, parser in ALL:
        options = {o for a in flags(parser) for o in a.option_strings}
        for action in flags(parser):
            for prefix in (DEPRECATED, REFUSED):
                if (action.help or "").startswith(prefix):
                    new = (action.help or "").removeprefix(prefix).split()[0].rstrip(":")
                    assert new in options, f"{name} {action.option_strings}: {new}"


def test_a_mistyped_flag_names_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["show", "results", "--outptu-format", "csv"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--outptu-format" in err and "did you mean --output-format" in err


def test_every_command_is_walked() -> None:
    assert {"diskbench run", "diskbench compare", "diskbench gate", "diskbench history changes"} <= {
        name for name, _ in ALL
    }
    assert build_parser().prog == "diskbench"


@pytest.mark.parametrize(
    "argv", [["show", "latest"], ["compare", "latest~1", "latest"], ["history", "changes", "x"]]
)
def test_format_is_the_image_format_and_refused_where_it_is_not(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--format", "csv"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "--format csv" in lines[0] and "--output-format" in lines[0], lines
    assert "image format" in lines[0] and not captured.out
    assert build_parser().parse_args(["run", "--format", "raw"]).format == "raw"

"""Every parser's help: one formatter, each default said once, every flag explained."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from harness.cli import build_parser
from harness.cli.common import HelpFormatter, Parser


def parsers(
    parser: argparse.ArgumentParser, name: str = "diskbench"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and every sub-parser below it, with its command line."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


ALL = list(parsers(build_parser()))


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction))
    ]


def rendered_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text of one flag as ``-h`` prints it, on one line."""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split())


def test_every_command_is_reached() -> None:
    names = {name for name, _ in ALL}
    assert {"diskbench run", "diskbench show", "diskbench guest build", "diskbench gate"} <= names
    assert len(ALL) >= 13


@pytest.mark.parametrize(("name", "parser"), ALL, ids=[name for name, _ in ALL])
def test_one_formatter_and_clean_help(name: str, parser: argparse.ArgumentParser) -> None:
    assert isinstance(parser, Parser) and parser.formatter_class is HelpFormatter, name
    text = parser.format_help()
    assert "(default: None)" not in text
    assert "(default: False)" not in text
    assert "(default: [])" not in text
    for action in flags(parser):
        what = f"{name} {'/'.join(action.option_strings) or action.dest}"
        assert action.help and action.help is not argparse.SUPPRESS, f"{what} has no help"
        shown = rendered_help(parser, action)
        assert len(re.findall(r"\bdefault\b", shown)) <= 1, f"{what} says its default twice: {shown}"
        if action.default not in (None, False, [], argparse.SUPPRESS) and action.option_strings:
            # the formatter says it: the flag's own text must not
            assert "default" not in action.help, f"{what} says its default by hand: {action.help}"
            assert shown.endswith(")") and "(default: " in shown, what
        assert "/work/" not in shown and str(__file__).split("/tests/")[0] not in shown, what


def test_every_command_has_a_description() -> None:
    commands = [(n, p) for n, p in ALL if n.count(" ") == 1]
    # run sweep merge gate bisect compare report history show guest qemu accel bundle kvmcheck
    assert len(commands) == 14
    for name, parser in commands:
        assert parser.description, f"{name} -h has no description"


def test_paths_under_the_checkout_are_shown_as_the_readme_writes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISKBENCH_WORK_DIR", raising=False)
    monkeypatch.delenv("DISKBENCH_RESULTS_DIR", raising=False)
    run = dict(parsers(build_parser()))["diskbench run"]
    text = " ".join(run.format_help().split())
    assert "(default: ./work)" in text and "(default: ./results)" in text
    assert "(default: 1800)" in text  # a whole float without its ".0"


def test_gate_help_says_what_the_gate_tests_and_its_minimum_effect() -> None:
    from harness.cli.bisect import BISECT_SPEC
    from harness.compare.metric import read_effect
    from harness.compare.settings import Settings
    from harness.gate import GATE_SPEC, load_gate_spec

    commands = dict(ALL)
    gate = " ".join(commands["diskbench gate"].format_help().split())
    assert "Mann-Whitney test" not in gate and "Mann-Whitney U" not in gate
    assert "signed-rank test and the trimmed t of the pairs' log ratios" in gate
    for spec in (load_gate_spec(GATE_SPEC), load_gate_spec(BISECT_SPEC)):
        # what the help says of the shipped specs is what they hold
        assert spec.min_effect == Settings.min_effect and spec.crossed_reads == Settings.crossed_reads
    edge = read_effect(Settings.min_effect, Settings.crossed_reads)
    far = read_effect(Settings.min_effect, Settings.crossed_reads[::-1])
    assert f"5% reads {edge * 100:.1f}% to {far * 100:.1f}%, inconclusive between" in gate
    for name in ("diskbench gate", "diskbench bisect"):
        action = next(a for a in flags(commands[name]) if a.dest == "min_effect")
        shown = rendered_help(commands[name], action)
        assert "(default: the spec's min_effect, 5% in the specs shipped;" in shown, shown
        assert f"unchanged within ±{edge * 100:.1f}% and regressed beyond {far * 100:.1f}% for 5%" in shown

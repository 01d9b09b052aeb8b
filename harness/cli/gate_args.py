"""The flags ``gate`` and ``bisect`` share, and the one options value both build from them.

As asv's ``common_args.py``: the flags are declared here once, each command adds them where its
help lists them and says them in its own words (:class:`Words`: a gate compares two sides, a
bisection one comparison per step), and :func:`gate_options_from_args` checks them and decides
:class:`harness.gate.GateOptions` the same way for both.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cli.common import add_compare_options, machine_from_args, pct_text, settings_from_args
from harness.compare.settings import Settings
from harness.errors import UsageError
from harness.sweep.preflight import check_numbers

if typing.TYPE_CHECKING:
    from harness.compare import Settings
    from harness.gate import GateOptions, GateSpec


@dataclass(frozen=True)
class Words:
    """How one command's help says the shared flags."""

    budget_min: str
    rounds: str
    seed: str
    no_canary: str
    policy: str
    build_command: str


GATE = Words(
    budget_min="time budget in minutes (default: the spec's)",
    rounds="first rounds for every cell (default: the spec's)",
    seed="seed of the run order and the bootstrap (default: drawn, and recorded in the output)",
    no_canary="skip the host canary (O_DIRECT writes)",
    policy="policy for a side whose checkout has no policy.toml (default: this repository's)",
    build_command="build QEMU in each side's checkout with this command (e.g. a QEMU tree: "
    "\"sh -c './configure --target-list=x86_64-softmmu && make -C build qemu-system-x86_64 qemu-img'\")",
)
BISECT = Words(
    budget_min="time budget of one comparison in minutes (default: the spec's)",
    rounds="first rounds of a comparison (default: the spec's)",
    seed="seed of the run orders and the bootstrap (default: drawn)",
    no_canary="skip the host canary of each comparison",
    policy="policy for a commit whose checkout has no policy.toml (default: this repository's)",
    build_command="build QEMU in each commit's checkout with this command (a QEMU tree), as diskbench gate does",
)


def add_round_flags(parser: Any, words: Words) -> None:
    """``--budget-min``, ``--rounds``, ``--max-rounds``, ``--seed``, ``--no-canary``, ``--policy``."""
    parser.add_argument("--budget-min", type=float, default=None, help=words.budget_min)
    parser.add_argument("--rounds", type=int, default=None, help=words.rounds)
    parser.add_argument("--max-rounds", type=int, default=None, help="rounds at most (default: the spec's)")
    parser.add_argument("--seed", type=int, default=None, help=words.seed)
    parser.add_argument("--no-canary", action="store_true", help=words.no_canary)
    parser.add_argument("--policy", type=Path, default=None, help=words.policy)


def add_build_flag(group: Any, words: Words) -> None:
    """``--build-command``, in ``group`` (the gate lists it with the sides' QEMU)."""
    group.add_argument("--build-command", help=words.build_command)


def add_comparison_flags(parser: Any) -> None:
    """The comparison's options, ``--min-effect`` unset unless given (the spec's then: see
    :func:`harness.gate.settings_for`)."""
    add_compare_options(parser)
    parser.set_defaults(min_effect=None)
    effect = pct_text(Settings.min_effect)
    edge = pct_text((1 + Settings.min_effect) ** Settings.crossed_reads[0] - 1)
    far = pct_text((1 + Settings.min_effect) ** Settings.crossed_reads[1] - 1)
    for action in parser._actions:
        if action.dest == "min_effect":
            words = (
                f" (default: the spec's min_effect, {effect} in the specs shipped; a guest cell "
                f"measured in crossed pairs is unchanged within ±{edge} and regressed beyond {far} for {effect}, "
                "as such a pair reads it at least and at most)"
            )
            action.help = f"{action.help}{words.replace('%', '%%')}"


def gate_options_from_args(args: argparse.Namespace, spec: GateSpec) -> tuple[Settings, GateOptions]:
    """The shared flags checked (bad ones are UsageError naming the flag) and decided against
    ``spec``: the comparison's settings and the run's options."""
    from harness.gate import GateAsked, GateOptions, settings_for

    machine = machine_from_args(args)
    # the deadlines here; each side's cells once its policy is read, before it is built
    # (harness.gate.checks)
    check_numbers([], machine, max_disk_bytes=args.max_disk_size)
    for flag, value in (("--rounds", args.rounds), ("--max-rounds", args.max_rounds)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: use 1 or more")
    if args.budget_min is not None and args.budget_min <= 0:
        raise UsageError(f"--budget-min {args.budget_min}: use a positive number of minutes")
    given = settings_from_args(args)
    settings = settings_for(
        spec, given, metrics_given=args.metric is not None, min_effect_given=args.min_effect is not None
    )
    asked = GateAsked(
        rounds=args.rounds,
        max_rounds=args.max_rounds,
        budget_min=args.budget_min,
        seed=args.seed,
        default_policy=args.policy,
        build_command=args.build_command,
        canary=not args.no_canary,
    )
    return settings, GateOptions.decide(spec, machine, asked, max_disk_bytes=args.max_disk_size)

"""``diskbench bisect``: the first commit between a good and a bad revision that is measured like bad."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path
from typing import Any

from harness.cli.common import add_machine_options, err
from harness.cli.gate_args import (
    BISECT,
    add_build_flag,
    add_comparison_flags,
    add_round_flags,
    gate_options_from_args,
)
from harness.errors import UsageError
from harness.host.workdir import hold
from harness.paths import package_data

if typing.TYPE_CHECKING:
    from harness.bisect import BisectResult
    from harness.compare import Settings
    from harness.gate import GateOptions, GateSpec

BISECT_SPEC = package_data("bisect.toml")


def add_parser(sub: Any) -> None:
    bisect = sub.add_parser(
        "bisect",
        help="find the commit between GOOD and BAD that made a cell slower: measured steps, as git bisect",
        description=(
            "Walk the first-parent line from GOOD to BAD of the tracked repository as git bisect does, "
            "measuring the cells of a gate spec (default: the policy's cell, replayed). The ends are "
            "compared once (base GOOD, head BAD); a cell separates them when that gives regression, "
            "improvement or changed. Each step compares the step commit with GOOD and with BAD, each "
            "a gate run: interleaved rounds, more for cells not yet clear, the minimum effect, "
            "'unchanged' by equivalence. A step is BAD when a separating cell moved from GOOD the way "
            "BAD did, or is equivalent to BAD and not to GOOD; GOOD when every separating cell moved "
            "back from BAD, or is equivalent to GOOD and not to BAD; anything else is unclear. An "
            "unclear commit, one whose build fails or whose samples fail (it does not boot) is skipped "
            "as git bisect skip would. The state is written to OUT/bisect.json after every step: run "
            "the same command again to go on after a stop. Prints each step's evidence, then the first "
            "bad commit, its verdict and the table of the range."
        ),
    )
    bisect.add_argument("--good", required=True, help="a revision measured good (branch, tag or commit)")
    bisect.add_argument(
        "--bad", required=True, help="a later revision measured bad, GOOD on its first-parent line"
    )
    bisect.add_argument(
        "--spec",
        type=Path,
        default=BISECT_SPEC,
        help="a gate spec: the cells, rounds and budget of a comparison",
    )
    bisect.add_argument(
        "--cell",
        action="append",
        default=None,
        metavar="NAME",
        help="bisect only this cell of the spec (repeatable)",
    )
    bisect.add_argument(
        "--repo", type=Path, default=Path("."), help="the git repository the revisions are of"
    )
    bisect.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=None,
        help="output dir, and the state to go on from (default: RESULTS/bisect/GOOD..BAD)",
    )
    add_round_flags(bisect, BISECT)
    add_build_flag(bisect, BISECT)
    add_comparison_flags(bisect)
    add_machine_options(bisect)


def run(args: argparse.Namespace) -> int:
    from harness.bisect import commit_range
    from harness.gate import load_gate_spec, repo_toplevel

    spec = _cells(load_gate_spec(args.spec), args.cell)
    settings, options = gate_options_from_args(args, spec)
    # bad revisions and a bad range are bad usage before any lock or directory is taken
    top = repo_toplevel(args.repo)
    good, bad, _commits = commit_range(top, args.good, args.bad)
    out = args.out or args.results_dir / "bisect" / f"{good[:12]}..{bad[:12]}"
    with hold(args.results_dir, args.work_dir, host_disk=args.host_disk, progress=err):
        result = _run(args, top, spec, settings, options, out)
    print(result.text, end="")
    print(f"state: {result.out_dir / 'bisect.json'}")
    return result.exit_code


def _cells(spec: GateSpec, names: list[str] | None) -> GateSpec:
    """``spec`` with only the cells ``names`` (all when None); bad input for a name it lacks."""
    from dataclasses import replace

    if not names:
        return spec
    known = [c.name for c in spec.cells]
    for name in names:
        if name not in known:
            raise UsageError(
                f"--cell {name!r}: {spec.source} has no such cell: use one of {', '.join(known)}"
            )
    cells = tuple(c for c in spec.cells if c.name in names)
    return replace(spec, cells=cells, source=f"{spec.source} ({', '.join(c.name for c in cells)})")


def _run(
    args: argparse.Namespace, repo: Path, spec: GateSpec, settings: Settings, options: GateOptions, out: Path
) -> BisectResult:
    """The bisection with the work dir's and results dir's locks held."""
    from harness.bisect import run_bisect

    return run_bisect(
        repo=repo,
        ends=(args.good, args.bad),
        spec=spec,
        settings=settings,
        options=options,
        out_dir=out,
        progress=err,
    )

"""``diskbench history changes``: the change points of the history's series, as a table."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import err
from harness.cli.outputs import DEPRECATED, add_output_format, output_format
from harness.errors import ExitCode
from harness.history.asvrun import load_asv_config
from harness.history.changes import method
from harness.history.changes.find import Settings, branch_order, history_changes
from harness.history.changes.table import render_json, render_text
from harness.paths import REPO_ROOT


def add_parser(sub: Any) -> None:
    """``diskbench history changes``."""
    changes = sub.add_parser(
        "changes",
        help="the change points of every history series, with what else changed at their commit",
        description=(
            "Find the steps in every series of the history's asv results (binary segmentation; "
            "each split tested by permuting the series with the rank test, Holm over each round's "
            "segments; see docs/history.md) and print them per machine: cell, metric, commit, "
            "before -> after, confidence, and their cause: a step that lines up with a change of "
            "QEMU, guest kernel or recipe, host kernel, runner or accel at that commit says so."
        ),
    )
    changes.add_argument(
        "--config",
        type=Path,
        default=REPO_ROOT / "asv.conf.json",
        help="the asv config whose results are read (its results_dir; records beside it)",
    )
    changes.add_argument("--machine", default=None, help="one asv machine only (default: every machine)")
    changes.add_argument(
        "--alpha", type=float, default=method.ALPHA, help="significance level of each round of splits"
    )
    changes.add_argument(
        "--min-segment",
        type=int,
        default=method.MIN_SEGMENT,
        metavar="N",
        help="fewest commits on each side of a change point",
    )
    changes.add_argument(
        "--min-step",
        type=float,
        default=None,
        metavar="FRACTION",
        help="smallest step of the medians, 0.2 = 20 %% (default: the config's regressions_thresholds)",
    )
    # the old spelling: --min-effect is a percentage everywhere else (compare, gate, bisect)
    changes.add_argument(
        "--min-effect",
        dest="old_min_step",
        type=float,
        default=None,
        metavar="FRACTION",
        help=f"{DEPRECATED} --min-step",
    )
    changes.add_argument(
        "--permutations", type=int, default=method.PERMUTATIONS, metavar="N", help="permutations per test"
    )
    add_output_format(changes, ("text", "json"), "text: a table per machine; json: every change point")


def run(args: argparse.Namespace) -> int:
    conf = load_asv_config(args.config)
    min_step = args.min_step
    if args.old_min_step is not None:
        err(
            f"diskbench: history changes --min-effect {args.old_min_step} is now --min-step "
            f"{args.old_min_step} (a fraction; --min-effect is a percentage in compare and gate)"
        )
        min_step = args.old_min_step
    settings = Settings(
        alpha=args.alpha,
        min_segment=args.min_segment,
        min_effect=min_step,
        permutations=args.permutations,
    )
    found = history_changes(
        results_dir=conf.results_dir,
        records_root=conf.results_dir.parent / "history",
        thresholds=conf.data.get("regressions_thresholds") or {},
        settings=settings,
        order=branch_order(conf.repo_path, conf.branch),
        machine=args.machine,
    )
    render = render_json if output_format(args) == "json" else render_text
    print(render(found.changes, settings, series_count=found.series), end="")
    return ExitCode.OK

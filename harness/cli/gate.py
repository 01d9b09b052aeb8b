"""``diskbench gate``: base vs head on this runner, interleaved rounds, a verdict per cell."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path
from typing import Any

from harness.cli.common import (
    CROSSED_WORDS,
    TESTS_WORDS,
    add_machine_options,
    add_pages_option,
    err,
    executable,
    pages_url_from_args,
)
from harness.cli.gate_args import (
    GATE,
    add_build_flag,
    add_comparison_flags,
    add_round_flags,
    gate_options_from_args,
)
from harness.cli.outputs import add_junit_option
from harness.compare.pointers import Pointers
from harness.gate import GATE_SPEC
from harness.host.workdir import hold
from harness.report.exports import write_junit

if typing.TYPE_CHECKING:
    from harness.compare import Settings
    from harness.gate import GateOptions, GateResult, GateSpec, SubjectSource


def add_parser(sub: Any) -> None:
    gate = sub.add_parser(
        "gate",
        help="compare two revisions on this runner: interleaved rounds, a verdict per cell",
        description=(
            "Check out BASE and HEAD of the tracked repository in git worktrees (each side measures "
            "its own policy.toml, guest recipe and, if given or built, its own QEMU), run the gate "
            "spec's cells for both sides in interleaved rounds (order random per round and cell), "
            "add rounds to cells that are not yet clear until the budget is spent, and compare: "
            "a verdict per cell and gated metric from the ratio of medians, its bootstrap interval "
            f"and a test. {TESTS_WORDS} {CROSSED_WORDS} Writes OUT/comparison.json and OUT/summary.md "
            "and prints the summary."
        ),
    )
    gate.add_argument("--base", required=True, help="base revision (branch, tag or commit)")
    gate.add_argument("--head", required=True, help="head revision (branch, tag or commit)")
    gate.add_argument(
        "--spec",
        type=Path,
        default=GATE_SPEC,
        help="the gate spec: cells, rounds, budget (with --host-disk MODEL and no --spec: the model's own, "
        "harness/data/gate-MODEL.toml, where there is one)",
    )
    gate.add_argument("--repo", type=Path, default=Path("."), help="the git repository the revisions are of")
    gate.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="output dir (default: RESULTS/gate/BASE..HEAD-TIME)",
    )
    add_round_flags(gate, GATE)
    q = gate.add_argument_group("QEMU of each side (default: the one on PATH for both)")
    q.add_argument("--base-qemu", help="qemu-system-x86_64 of base")
    q.add_argument("--head-qemu", help="qemu-system-x86_64 of head")
    q.add_argument("--base-qemu-img", help="qemu-img of base")
    q.add_argument("--head-qemu-img", help="qemu-img of head")
    add_build_flag(q, GATE)
    add_comparison_flags(gate)
    add_pages_option(gate)
    add_junit_option(gate, default="OUT/junit.xml")
    add_machine_options(gate)


def run(args: argparse.Namespace) -> int:
    import datetime as dt

    from harness.gate import SubjectSource, load_gate_spec, repo_toplevel, resolve_rev
    from harness.gate.spec import disk_for_spec, spec_for_disk

    # a host disk model with a spec of its own runs it by default; a spec sized for a model runs on it
    args.spec = spec_for_disk(args.spec, args.host_disk)
    spec = load_gate_spec(args.spec)
    args.host_disk = disk_for_spec(spec, args.host_disk)
    settings, options = gate_options_from_args(args, spec)
    sources = []
    for label in ("base", "head"):
        qemu, qemu_img = getattr(args, f"{label}_qemu"), getattr(args, f"{label}_qemu_img")
        sources.append(
            SubjectSource(
                label=label,
                rev=getattr(args, label),
                qemu=executable(f"--{label}-qemu", qemu) if qemu else None,
                qemu_img=executable(f"--{label}-qemu-img", qemu_img) if qemu_img else None,
            )
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in f"{args.base}..{args.head}")
    out = args.out or args.results_dir / "gate" / f"{safe}-{stamp}"
    # bad revisions are bad usage before any lock or directory is taken
    top = repo_toplevel(args.repo)
    commits = [resolve_rev(top, source.rev, f"--{source.label}") for source in sources]
    pointers = Pointers(
        pages_url=pages_url_from_args(args), reproduce=tuple(reproduce_argv(args, commits, top))
    )
    with hold(args.results_dir, args.work_dir, host_disk=args.host_disk, progress=err):
        result = _run(args.repo, (sources[0], sources[1]), spec, settings, options, out, pointers)
    print(result.markdown, end="")
    print(f"comparison: {result.out_dir / 'comparison.json'}")
    junit = args.junit or result.out_dir / "junit.xml"
    # the one writer of the file; an inconclusive cell ends with the command the summary gives
    write_junit(junit, result.comparison)
    print(f"junit: {junit}")
    return result.exit_code


#: what says only where a gate's output goes: left out of the command that runs it again
OUTPUT_ONLY = ("out", "junit", "pages_url")


def reproduce_argv(args: argparse.Namespace, commits: list[str], top: Path) -> list[str]:
    """The command line that runs this gate again: the commits it resolved, the spec (relative to
    the repository when it lies in it) and every other flag given, the QEMU of each side, the
    accelerator and the results dir among them (the run adds its seed); the command that would
    decide an inconclusive cell is made from it (:func:`harness.compare.screen.decide_command`)."""
    from harness.cli.reproduce import command_argv, spec_value

    return command_argv(
        args,
        ["gate"],
        leave_out=OUTPUT_ONLY,
        values={"base": commits[0], "head": commits[1], "spec": spec_value(args.spec, GATE_SPEC, top)},
    )


def _run(
    repo: Path,
    sources: tuple[SubjectSource, SubjectSource],
    spec: GateSpec,
    settings: Settings,
    options: GateOptions,
    out: Path,
    pointers: Pointers,
) -> GateResult:
    """The gate with the work dir's and results dir's locks held (see :func:`harness.host.workdir.hold`)."""
    from harness.gate import run_gate

    return run_gate(
        repo=repo,
        sources=sources,
        spec=spec,
        settings=settings,
        options=options,
        out_dir=out,
        progress=err,
        pointers=pointers,
    )

"""What several commands share: printing to stderr, logging's configuration, the machine options,
the comparison options.

argparse lives only in :mod:`harness.cli`; the domain functions take plain values.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
import typing
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from harness.compare.settings import Settings, check_gated_metric, parse_percent, parse_rule
from harness.errors import InfraError, UsageError
from harness.paths import default_results_dir, default_work_dir, shown_path
from harness.subject.binaries import Binaries

if typing.TYPE_CHECKING:
    from harness.rounds.session import MachineOptions
    from harness.subject.qemu_build import QemuBuild


class HelpFormatter(argparse.HelpFormatter):
    """The one help formatter of every parser: each default said once, where it says something.

    The rule: a flag whose argparse default is a value gets ``(default: VALUE)`` from here, and
    its help text names no default itself; a flag whose default is unset (``None``: decided
    later, from a spec or the accelerator) or off (``False``, a switch) gets nothing from here,
    and its help text says what happens when it is not given where that needs saying.  Paths
    under the current directory are shown relative to it (``./work``), as the README writes them.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: {_shown_default(default)})"


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """Every flag of ``parser`` and of its sub-commands (unknown flags reach the top parser)."""
    found: list[str] = []
    for action in parser._actions:
        found += action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _options(sub)
    return list(dict.fromkeys(found))


def _shown_default(default: object) -> str:
    if isinstance(default, Path):
        return shown_path(default).replace("%", "%%")
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default).replace("%", "%%")


class Parser(argparse.ArgumentParser):
    """An argument parser whose help uses :class:`HelpFormatter`; sub-parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        """argparse's error, with the nearest flags of this command for one it does not know."""
        if message.startswith("unrecognized arguments:"):
            options = _options(self)
            given = [w for w in message.split(":", 1)[1].split() if w.startswith("-")]
            hints = [f"{w}{nearest(w.split('=')[0], options, count=2)}" for w in given]
            if any("did you mean" in h for h in hints):
                message += " (" + "; ".join(h for h in hints if "did you mean" in h) + ")"
        super().error(message)


def exit_epilog(command: str | None) -> str:
    """The exit codes ``command`` gives (None: all of them), as its help's epilog says them."""
    from harness.errors import exit_codes

    return "Exit codes: " + "; ".join(f"{e.code} {e.meaning}" for e in exit_codes(command)) + "."


def exit_table_markdown() -> str:
    """Every exit code as docs/usage.md lists it: a Markdown table, the commands that give each."""
    from harness.errors import exit_codes

    rows = ["| code | meaning | commands |", "| --- | --- | --- |"]
    for e in exit_codes():
        rows.append(
            f"| {e.code} | {e.meaning} | {', '.join(e.commands) if e.commands else 'every command'} |"
        )
    return "\n".join(rows) + "\n"


def err(msg: str) -> None:
    """One line to stderr, at once (progress and warnings; stdout carries the result)."""
    print(msg, file=sys.stderr, flush=True)


class _StderrLines(logging.Handler):
    """Each record as one line, written as :func:`err` writes it: to ``sys.stderr`` as it is at
    that moment, which within :func:`harness.cli.main` is the inert stream wrapping it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            err(self.format(record))
        except Exception:  # noqa: BLE001 - logging's own rule: a failing handler reports, never raises
            self.handleError(record)


def configure_logging() -> None:
    """What the harness's modules log at INFO and above goes to stderr, each message a line.

    The one place logging is configured; calling it again replaces its handler."""
    top = logging.getLogger("harness")
    for handler in [h for h in top.handlers if isinstance(h, _StderrLines)]:
        top.removeHandler(handler)
    handler = _StderrLines(logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    top.addHandler(handler)
    top.setLevel(logging.INFO)


def choices(enum: type[Enum]) -> str:
    return ",".join(m.value for m in enum)


def add_machine_options(group: Any) -> None:
    """Where and how samples run: shared by ``run``, ``sweep`` and ``gate``."""
    group.add_argument(
        "--accel",
        default="auto",
        choices=("auto", "kvm", "tcg"),
        help="auto: KVM if a guest really boots under it, else TCG with a warning",
    )
    group.add_argument(
        "--work-dir",
        type=Path,
        default=default_work_dir(),
        help="where disk images are created: the runner's real disk, never tmpfs; relative to the "
        "current directory ($DISKBENCH_WORK_DIR changes it)",
    )
    add_results_dir(group, "records and logs go here, a sweep's under RESULTS/sweeps/NAME/")
    group.add_argument(
        "--host-disk",
        default="native",
        metavar="NAME",
        help="the disk the work dir is on: native (the runner's own) or a model built under the work "
        "dir as root, named in harness/data/host_disks.toml (period-hdd, sata-ssd); the model is part "
        "of the machine's identity in records",
    )
    group.add_argument(
        "--boot-timeout-s",
        type=float,
        default=None,
        help="deadline in seconds for the guest's ready line (default: 30 under KVM, 120 under TCG)",
    )
    group.add_argument(
        "--workload-timeout-s", type=float, default=1800.0, help="deadline in seconds for the workload report"
    )
    group.add_argument(
        "--max-disk-size",
        type=_disk_size,
        default="64G",
        metavar="SIZE",
        help="the largest disk a cell may have, and the most host bytes its image may take "
        "(preallocation included): a spec or a pull request's policy that asks for more is refused "
        "before anything runs",
    )
    group.add_argument(
        "--start",
        choices=("cold", "snapshot", "auto"),
        default="auto",
        help="how each sample's guest starts: boot it (cold), restore it from a snapshot taken at "
        "its ready line (snapshot), or snapshot where it applies (auto)",
    )


def add_results_dir(parser: Any, what: str) -> None:
    """``--results-dir``: where a command writes its records (``run``...) or finds the runs a name
    such as ``latest`` stands for (``show``, ``compare``, ``report``); one default for all of them."""
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=default_results_dir(),
        metavar="DIR",
        help=f"{what}; under the current directory unless absolute ($DISKBENCH_RESULTS_DIR changes it)",
    )


def add_spec_repeat(parser: Any) -> None:
    """``--repeat N``: samples per cell, over the spec's own ``repeat`` (``sweep``, ``history``)."""
    parser.add_argument(
        "--repeat", type=int, default=None, metavar="N", help="samples per cell (default: the spec's repeat)"
    )


def _disk_size(text: str) -> int:
    from harness.sizes import parse_size

    try:
        size = parse_size(text, what="--max-disk-size")
    except UsageError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"--max-disk-size {text!r}: use a size above 0, e.g. 64G")
    return size


def machine_from_args(args: argparse.Namespace) -> MachineOptions:
    """The options of :func:`add_machine_options`, with the binaries the top-level flags resolved
    (``args.binaries``), as one value."""
    from harness.host.hostdisk import check_usable, model_dir
    from harness.rounds.session import MachineOptions

    check_usable(args.host_disk)
    return MachineOptions(
        binaries=args.binaries,
        work_dir=model_dir(args.work_dir, args.host_disk),
        host_disk=args.host_disk,
        results_dir=args.results_dir,
        accel=args.accel,
        start=args.start,
        boot_timeout_s=args.boot_timeout_s,
        workload_timeout_s=args.workload_timeout_s,
    )


def executable(flag: str, value: str) -> str:
    """The absolute path of a binary given as ``flag``; bad input if it is no executable file."""
    path = Path(value).expanduser().resolve()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(f"{flag} {value}: not an executable file: pass the path of a built binary")
    return str(path)


# where the binaries come from when no flag names them; read here and nowhere below the CLI
ENV_QEMU = "DISKBENCH_QEMU"
ENV_QEMU_IMG = "DISKBENCH_QEMU_IMG"


def resolve_binaries(*, qemu: str | None, qemu_img: str | None, environ: Mapping[str, str]) -> Binaries:
    """The binaries of this run, decided once: ``--qemu``/``--qemu-img`` (an executable file, made
    absolute; bad input if not), else ``$DISKBENCH_QEMU``/``$DISKBENCH_QEMU_IMG`` as given, else
    the names on PATH. ``--qemu`` may name a fetched QEMU build instead (:func:`qemu_build_flag`):
    then its qemu-img comes with it unless ``--qemu-img`` is given."""
    default = Binaries.on_path()
    build = qemu_build_flag(qemu) if qemu else None
    if build is not None:
        own = build.binaries()
        return Binaries(
            qemu=own.qemu, qemu_img=executable("--qemu-img", qemu_img) if qemu_img else own.qemu_img
        )
    return Binaries(
        qemu=executable("--qemu", qemu) if qemu else environ.get(ENV_QEMU) or default.qemu,
        qemu_img=executable("--qemu-img", qemu_img)
        if qemu_img
        else environ.get(ENV_QEMU_IMG) or default.qemu_img,
    )


def qemu_build_flag(value: str) -> QemuBuild | None:
    """The fetched QEMU build ``--qemu`` names, checked (its binaries' digests, and QEMU's account
    can reach it), or None when it names a binary of no fetched build.

    A directory is a build's prefix (``diskbench qemu get`` printed it); a binary inside one is
    that build; a value that is no path and reads as a version (``10.0``, a Debian version) is
    resolved among the versions the configured suites offer and fetched when needed."""
    from harness.debian.qemu import QemuCache
    from harness.host import confine
    from harness.paths import qemu_cache_dir
    from harness.subject.qemu_build import build_of, load_build

    path = Path(value).expanduser()
    build: QemuBuild | None
    if path.is_dir():
        build = load_build(path.resolve())
    elif path.is_file():
        build = build_of(str(path.resolve()))
    elif "/" not in value and re.fullmatch(r"\d[\w.+~:-]*", value):
        build = QemuCache(qemu_cache_dir()).get(value)
    else:
        build = None
    if build is None:
        return None
    build.check()
    problem = confine.reach_problem(build.prefix, confine.account())
    if problem:
        raise InfraError(
            f"--qemu {value}: {problem}: keep builds where it can read them, as `diskbench qemu get` does"
        )
    return build


def binaries_environ(binaries: Binaries) -> dict[str, str]:
    """The environment that hands ``binaries`` to another diskbench process (the history suite's)."""
    return {ENV_QEMU: binaries.qemu, ENV_QEMU_IMG: binaries.qemu_img}


RECORDS_HELP = (
    "a record file, a run's or sweep's directory (results/records/RUN_ID, results/sweeps/NAME), "
    "a results directory (its newest run) or latest (latest~1: the run before it)"
)


# the --results-dir of the commands that read runs
READ_RUNS = "where the runs latest, latest~N and saved names stand for are looked up"


def named_records(name: str | Path, results_dir: Path) -> Path:
    """The records a person named (see :func:`harness.record.name_records`), runs such as
    ``latest`` looked up in ``results_dir``; how a name was read (``results``: its newest run)
    goes to stderr."""
    from harness.record import name_records

    named = name_records(str(name), results_dir=results_dir)
    if named.note:
        err(named.note)
    return named.path


def nearest(name: str, names: Iterable[str], *, count: int = 3) -> str:
    """``: did you mean A, B?`` with the names nearest to ``name`` (difflib), or empty."""
    close = difflib.get_close_matches(name, list(dict.fromkeys(names)), n=count, cutoff=0.5)
    return f": did you mean {', '.join(close)}?" if close else ""


def pct_text(fraction: float) -> str:
    """``0.05`` as ``5%``, ``0.0172`` as ``1.7%`` (one decimal at most)."""
    return f"{fraction * 100:.1f}".rstrip("0").rstrip(".") + "%"


# what the comparison tests, said in compare's and gate's help
TESTS_WORDS = (
    "Samples of a side taken apart are tested by rank (Mann-Whitney) and by Yuen's trimmed t on "
    "logs; pairs of samples started together (the gate's guest cells, crossed on two CPUs, and its "
    "replay cells) by the signed-rank test and the trimmed t of the pairs' log ratios."
)
# how a crossed guest pair decides, from the comparison's defaults (the default gate spec's too)
CROSSED_WORDS = (
    f"A crossed pair reads a change at {Settings.crossed_reads[0]:g}-{Settings.crossed_reads[1]:g} "
    "times its size alone (on logs), so its cells are unchanged within the minimum effect as such a "
    "pair reads it at least and regressed beyond it as such a pair reads it at most: "
    f"{pct_text(Settings.min_effect)} reads "
    f"{pct_text((1 + Settings.min_effect) ** Settings.crossed_reads[0] - 1)} to "
    f"{pct_text((1 + Settings.min_effect) ** Settings.crossed_reads[1] - 1)}, inconclusive between."
)


def add_compare_options(parser: Any) -> None:
    """The statistical options of a comparison (``compare`` and ``gate``).

    An option the parser already has (``gate`` has its own ``--seed``) is
    left as the parser defined it.
    """
    group = parser.add_argument_group("how base and head are compared")
    options: list[tuple[str, dict[str, Any]]] = [
        (
            "--metric",
            {
                "action": "append",
                "default": None,
                "metavar": "PATTERN",
                "help": METRIC_HELP + ": gated, their regression fails the comparison (default: total_s)",
            },
        ),
        (
            "--min-effect",
            {
                "default": pct_text(Settings.min_effect),
                "metavar": "PCT",
                "help": "smallest change that counts as a regression or improvement, e.g. 5 or 5%%",
            },
        ),
        (
            "--rule",
            {
                "action": "append",
                "default": [],
                "metavar": "METRIC:PCT",
                "help": "the minimum effect of one metric, e.g. total_s:3%% or host.flushes:1%% (repeatable)",
            },
        ),
        (
            "--alpha",
            {
                "type": float,
                "default": Settings.alpha,
                "help": "family-wise significance level of the tests that can fail the comparison "
                "(every cell x gated metric and structural counter: rank and trimmed t, or for pairs "
                "started together signed rank and trimmed t of their log ratios), kept with Holm's "
                "step-down correction",
            },
        ),
        (
            "--changed-passes",
            {
                "action": "store_true",
                "default": None,
                "help": "a change of a structural counter (verdict changed: flushes, write amplification, "
                "bytes written) is reported but does not fail (exit 0)",
            },
        ),
        (
            "--mix-starts",
            {
                "action": "store_true",
                "default": None,
                "help": "compare samples whose guests started differently (cold boot and snapshot restore); "
                "without it such a cell is an error (kind mixed-start)",
            },
        ),
        (
            "--seed",
            {
                "type": int,
                "default": Settings.seed,
                "help": "seed of the bootstrap: same input, same interval",
            },
        ),
    ]
    for flag, kwargs in options:
        try:
            group.add_argument(flag, **kwargs)
        except argparse.ArgumentError:
            continue  # the parser has its own


# what --metric is, in every command that has it (show, compare, gate, bisect)
METRIC_HELP = (
    "metrics by name or glob, e.g. total_s, 'phase.*' or 'fio.*.iops' (repeatable, or comma-separated)"
)


def metric_names(patterns: Iterable[str], names: Iterable[str]) -> list[str]:
    """The metrics ``patterns`` (globs, comma-separated) name among ``names``; a pattern that
    names none is a :class:`UsageError` that lists the nearest names."""
    import fnmatch

    from harness.spec import split_list

    known = list(dict.fromkeys(names))
    chosen: list[str] = []
    for text in patterns:
        for pattern in split_list(text):
            hits = [n for n in known if fnmatch.fnmatchcase(n, pattern)]
            if not hits and not any(c in pattern for c in "*?["):
                hits = [pattern]  # an exact name: checked by whoever reads it
            if not hits:
                raise UsageError(f"--metric {pattern!r} matches no metric{nearest(pattern, known) or ''}")
            chosen += hits
    return list(dict.fromkeys(chosen))


def settings_from_args(args: argparse.Namespace, *, names: Iterable[str] = ()) -> Settings:
    """:class:`Settings` from the options of :func:`add_compare_options`; bad values are UsageError.

    ``--metric`` globs match among ``names`` (the records' metrics) and every metric with a fixed
    name.  An option that is missing or None (a parser that leaves it to a spec) takes Settings'
    default.
    """
    from harness.workloads import all_metrics

    known = [*names, *all_metrics()]
    metrics: list[str] = []
    for name in metric_names(getattr(args, "metric", None) or ["total_s"], known):
        try:
            metrics.append(check_gated_metric(name.strip()))
        except UsageError as exc:
            # the nearest names among the records' too, said once in place of the metric table's own
            hint = nearest(name, known)
            unknown = exc.message.startswith("unknown metric")
            message = f"unknown metric {name!r}{hint}" if hint and unknown else exc.message
            raise UsageError(f"--metric {name!r}: {message}") from None
    rules = dict(parse_rule(text, what="--rule") for text in getattr(args, "rule", None) or [])
    min_effect = getattr(args, "min_effect", None)
    return Settings(
        metrics=tuple(dict.fromkeys(metrics)),
        min_effect=Settings.min_effect
        if min_effect is None
        else parse_percent(str(min_effect), what="--min-effect"),
        min_effect_by_metric=rules,
        alpha=Settings.alpha if getattr(args, "alpha", None) is None else args.alpha,
        seed=Settings.seed if getattr(args, "seed", None) is None else args.seed,
        changed_fails=not getattr(args, "changed_passes", None),
        mix_starts=bool(getattr(args, "mix_starts", None)),
    )


def add_pages_option(parser: Any) -> None:
    """``--pages-url``: where the history pages are published (``compare`` and ``gate``)."""
    parser.add_argument(
        "--pages-url",
        metavar="URL",
        default=None,
        help="the published history pages (diskbench history, asv): the summary links each cell's "
        "metrics to their graphs there; without it, no links",
    )


def pages_url_from_args(args: argparse.Namespace) -> str | None:
    """``--pages-url`` checked (a UsageError names it), or None."""
    from harness.compare.pointers import check_pages_url

    url = getattr(args, "pages_url", None)
    return None if url is None else check_pages_url(url)

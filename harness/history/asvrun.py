"""``diskbench history``: asv over a repository's commits, with kvm and tcg kept apart.

The asv suite (``benchmarks/history/``) measures every figure of every cell
of the history matrix (``sweeps/history.toml``) and the storage policy's own
cells, once per commit; this module drives asv around it:

1. pick the commits (``--commits N``: the last N of the config's branch,
   first parent; ``--range A..B``), in the repository the config tracks;
2. find the accelerator that really works here and name the asv machine
   after it, ``HOST-kvm`` or ``HOST-tcg``, registering it without
   questions: asv plots one series per machine, so a TCG point never lands
   in a KVM series (the suite checks the name again before it runs);
3. ``asv run`` those commits, ``asv publish``, make the pages work offline
   (:mod:`harness.history.pages`), and say where they are.

Two configs ship: ``asv.conf.json`` (this repository: policy, guest recipe
and harness are the subject) and ``benchmarks/qemu/asv.conf.json`` (a QEMU
repository: the commit's build is the subject; ``--repo`` points it at a
checkout).  Every asv command's output goes to one log file under
``RESULTS/logs/``; a failure is one line naming it (exit 3).

Parsing the config, machine names and ranges is pure; the rest runs git and asv.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import CommandError, InfraError, UsageError
from harness.history.changes.find import branch_order
from harness.history.changes.page import publish_changes
from harness.history.history_progress import LogFollower
from harness.history.pages import localize
from harness.host import proc
from harness.paths import default_work_dir
from harness.subject.binaries import Binaries

Log = Callable[[str], None]

ACCELS = ("kvm", "tcg")
ENV_MACHINE = "DISKBENCH_ASV_MACHINE"
#: the host disk model the suite's work dir lies on (set only for a model, never the native disk)
ENV_HOST_DISK = "DISKBENCH_HOST_DISK"
NATIVE = "native"
ENV_RECORDS = "DISKBENCH_HISTORY_RECORDS"
ENV_SPEC = "DISKBENCH_HISTORY_SPEC"
ENV_REPEAT = "DISKBENCH_HISTORY_REPEAT"
# keys of an asv config that name paths, relative to the config's directory
PATH_KEYS = ("benchmark_dir", "env_dir", "results_dir", "html_dir")
COMMAND_KEYS = ("build_command", "install_command", "uninstall_command")
ASV_TIMEOUT_S: float | None = None  # a history run takes as long as its matrix: no deadline
PUBLISH_TIMEOUT_S = 1800.0
_RANGE_SIDE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/~^@{}-]*$")


# -- the asv config ---------------------------------------------------------------------


@dataclass(frozen=True)
class AsvConfig:
    """What history needs of an ``asv.conf.json``; paths resolved against its directory."""

    path: Path
    data: Mapping[str, Any]

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def repo(self) -> str:
        return str(self.data["repo"])

    @property
    def branch(self) -> str:
        branches = self.data.get("branches") or ["main"]
        return str(branches[0])

    def resolve(self, key: str, default: str) -> Path:
        return (self.directory / str(self.data.get(key, default))).resolve()

    @property
    def results_dir(self) -> Path:
        return self.resolve("results_dir", "results")

    @property
    def html_dir(self) -> Path:
        return self.resolve("html_dir", "html")

    @property
    def repo_path(self) -> Path | None:
        """The tracked repository if it is a local directory (asv also takes URLs)."""
        if "://" in self.repo or self.repo.startswith("git@"):
            return None
        return (self.directory / self.repo).resolve()


def parse_asv_config(text: str, *, source: str) -> dict[str, Any]:
    """Parse an asv config; lines starting with ``//`` are comments, as asv allows."""
    lines = ["" if line.lstrip().startswith("//") else line for line in text.splitlines()]
    try:
        data = json.loads("\n".join(lines))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg}): fix the config") from None
    if not isinstance(data, dict):
        raise UsageError(f"{source}: an asv config is a JSON object")
    if not data.get("repo"):
        raise UsageError(f"{source}: no 'repo': name the repository asv tracks")
    branches = data.get("branches", ["main"])
    if not isinstance(branches, list) or not branches or not all(isinstance(b, str) for b in branches):
        raise UsageError(f"{source}: 'branches' must be a list of branch names")
    return data


def load_asv_config(path: Path) -> AsvConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"asv config {path} does not exist: pass --config asv.conf.json") from None
    except OSError as exc:
        raise UsageError(f"asv config {path} cannot be read: {exc}") from None
    return AsvConfig(path=path.resolve(), data=parse_asv_config(text, source=str(path)))


def derive_config(config: AsvConfig, *, repo: Path) -> dict[str, Any]:
    """The config tracking another checkout of its repository: ``--repo``.

    Written to a temporary file, so every path is made absolute and
    ``{conf_dir}`` in the commands is replaced by the original config's
    directory (asv runs from the directory of the config it is given).
    """
    data = dict(config.data)
    data["repo"] = str(repo.resolve())
    for key in PATH_KEYS:
        if key in data:
            data[key] = str((config.directory / str(data[key])).resolve())
    for key in COMMAND_KEYS:
        commands = data.get(key)
        if isinstance(commands, str):
            commands = [commands]
        if isinstance(commands, list):
            data[key] = [str(c).replace("{conf_dir}", str(config.directory)) for c in commands]
    return data


def _suite_disk(
    options: HistoryOptions, records: Path, log: Callable[[str], None]
) -> tuple[contextlib.AbstractContextManager[None], dict[str, str]]:
    """Where the suite's images go: the work dir's variables, and the host disk model to hold
    around the asv run (built under the work dir, torn down after it), else a no-op."""
    work_dir = (options.work_dir or default_work_dir()).resolve()
    if options.host_disk == NATIVE:
        return contextlib.nullcontext(), {"DISKBENCH_WORK_DIR": str(work_dir)}
    from harness.host import hostdisk, workdir

    work_dir.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    model = workdir.hold(records, work_dir, host_disk=options.host_disk, progress=log)
    return model, {
        "DISKBENCH_WORK_DIR": str(hostdisk.model_dir(work_dir, options.host_disk)),
        ENV_HOST_DISK: options.host_disk,
    }


# -- machine names and ranges -----------------------------------------------------------


def machine_name(hostname: str, accel: str, host_disk: str = NATIVE) -> str:
    """``vm`` under TCG -> ``vm-tcg``; on a host disk model ``vm-period-hdd-tcg``: the accelerator
    and the model are part of the machine's identity, so their series never mix."""
    if accel not in ACCELS:
        raise UsageError(f"accel {accel!r}: use one of {', '.join(ACCELS)}")
    return f"{hostname}-{accel}" if host_disk == NATIVE else f"{hostname}-{host_disk}-{accel}"


def disk_of_machine(name: str, models: Sequence[str]) -> str:
    """The host disk model an asv machine name says (``vm-period-hdd-tcg`` -> ``period-hdd``),
    else the native disk."""
    stem = name.rsplit("-", 1)[0]
    return next((m for m in models if stem.endswith(f"-{m}")), NATIVE)


def accel_of_machine(name: str) -> str | None:
    """``vm-tcg`` -> ``tcg``; None when the name carries no accelerator suffix."""
    suffix = name.rsplit("-", 1)[-1] if "-" in name else ""
    return suffix if suffix in ACCELS else None


def check_machine(name: str, accel: str, host_disk: str = NATIVE) -> str:
    """A ``--machine`` name must end in the accelerator that works here, after the host disk model
    its records are taken on (none for the native disk)."""
    from harness.host import hostdisk

    theirs = accel_of_machine(name)
    said = disk_of_machine(name, hostdisk.names()) if theirs is not None else host_disk
    if said != host_disk:
        where = f"the host disk model {host_disk}" if host_disk != NATIVE else "the native disk"
        raise UsageError(
            f"--machine {name} names the host disk {said}, but this history runs on {where}: "
            f"use {machine_name(name.rsplit('-', 1)[0].removesuffix(f'-{said}'), theirs or accel, host_disk)}"
        )
    if theirs is None:
        raise UsageError(
            f"--machine {name}: end the name in -kvm or -tcg (this host runs guests under {accel}), "
            f"e.g. {machine_name(name, accel, host_disk)}"
        )
    if theirs != accel:
        raise UsageError(
            f"--machine {name} says {theirs}, but this host runs guests under {accel}: "
            f"use {name.rsplit('-', 1)[0]}-{accel}"
        )
    return name


def parse_range(text: str) -> tuple[str, str]:
    """``A..B`` -> ``(A, B)``: the commits after A up to B, as ``git rev-list A..B`` means."""
    base, sep, head = text.partition("..")
    if not sep or head.startswith(".") or not _RANGE_SIDE.match(base) or not _RANGE_SIDE.match(head):
        raise UsageError(f"--range {text!r} is not A..B: give two commits or branches, e.g. main~5..main")
    return base, head


def select_commits(repo: Path, branch: str, *, commits: int | None, range_: str | None) -> list[str]:
    """Full hashes, oldest first: the last ``commits`` of ``branch``, or the commits of ``range_``."""
    if range_ is not None:
        base, head = parse_range(range_)
        spec = [f"{base}..{head}"]
        what = f"--range {range_}"
    else:
        count = 1 if commits is None else commits
        if count < 1:
            raise UsageError(f"--commits {count}: use 1 or more")
        spec = ["-n", str(count), branch]
        what = f"the last {count} commit(s) of {branch}"
    try:
        result = proc.run(["git", "-C", str(repo), "rev-list", "--first-parent", *spec], timeout_s=60)
    except CommandError as exc:
        detail = (exc.stderr.strip().splitlines() or [exc.message])[0]
        raise UsageError(f"{what}: git cannot read it in {repo}: {detail}") from None
    hashes = result.stdout.split()
    if not hashes:
        raise UsageError(f"{what} selects no commit in {repo}: check the range")
    return list(reversed(hashes))


# -- running asv -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryResult:
    index: Path
    log: Path
    machine: str | None
    commits: tuple[str, ...]
    regressions: int
    # commit -> ids of the cells with a failed sample (gaps in the graphs)
    failed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def asv_command() -> list[str]:
    """asv of this Python (a dev dependency: ``pip install -e '.[dev]'``)."""
    if importlib.util.find_spec("asv") is None:
        raise InfraError("asv is not installed here: run scripts/setup.sh (pip install -e '.[dev]')")
    return [sys.executable, "-m", "asv"]


def detect_accel(log: Log, binaries: Binaries) -> str:
    """The accelerator guests really run under here with ``binaries`` (a KVM probe boot, cached
    per host boot)."""
    from harness.guest import build_guest
    from harness.sample.accel import choose_accel

    guest = build_guest(log=log)
    return choose_accel("auto", guest.kernel, guest.initrd, warn=log, qemu=binaries.qemu).accel


def machine_args(name: str) -> list[str]:
    """``asv machine`` answers from this host's identity, so it asks nothing."""
    from harness.host.hostinfo import cpu_model, mem_total_kib

    uname = os.uname()
    return [
        "--machine",
        name,
        "--os",
        f"{uname.sysname} {uname.release}",
        "--arch",
        uname.machine,
        "--cpu",
        cpu_model(),
        "--num_cpu",
        str(os.cpu_count() or 1),
        "--ram",
        f"{mem_total_kib() // 1024**2}GB",
        "--yes",
    ]


@dataclass(frozen=True)
class HistoryOptions:
    """What ``diskbench history`` was asked for, built once by the CLI.

    ``config`` is the asv config; ``commits`` (the last N) or ``range_`` (``A..B``) select the
    commits of the tracked checkout (``repo``, else the config's own), ``publish_only`` runs
    nothing.  ``accel`` skips the detection (tests, or a caller that has just probed), which
    boots ``binaries``' QEMU.  The suite runs in asv's own process: ``suite_environ`` is what it
    is handed besides the machine and where records go (the caller's binaries, in the variables
    the suite reads).  ``spec`` and ``repeat`` replace the history matrix and its samples per
    cell (the suite reads them from its environment).
    """

    config: Path
    binaries: Binaries
    commits: int | None = None
    range_: str | None = None
    machine: str | None = None
    publish_only: bool = False
    html_dir: Path | None = None
    repo: Path | None = None
    work_dir: Path | None = None
    accel: str | None = None
    spec: Path | None = None
    repeat: int | None = None
    suite_environ: Mapping[str, str] = field(default_factory=dict)
    host_disk: str = NATIVE


def run_history(options: HistoryOptions, *, log: Log = lambda _msg: None) -> HistoryResult:
    """Measure the commits with asv and publish the pages; return where they are.

    While asv runs, progress lines (counts, ETA) go to ``log``.
    """
    repo = options.repo
    conf = load_asv_config(options.config)
    matrix = matrix_environ(options.spec, options.repeat)
    if repo is not None and not (repo / ".git").exists():
        raise UsageError(f"--repo {repo}: not a git checkout: clone the repository there first")
    logs_dir = conf.results_dir.parent / "logs"
    log_path = logs_dir / f"history-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    asv = asv_command()
    with tempfile.TemporaryDirectory(prefix="diskbench-history-") as tmp:
        config_path = conf.path
        if repo is not None:
            config_path = Path(tmp) / "asv.conf.json"
            config_path.write_text(json.dumps(derive_config(conf, repo=repo), indent=1), encoding="utf-8")
        tracked = repo.resolve() if repo is not None else conf.repo_path
        name: str | None = None
        hashes: list[str] = []
        if not options.publish_only:
            if tracked is None:
                raise UsageError(
                    f"{conf.path} tracks {conf.repo}: clone it and pass --repo PATH (history reads its commits)"
                )
            hashes = select_commits(tracked, conf.branch, commits=options.commits, range_=options.range_)
            here = options.accel or detect_accel(log, options.binaries)
            name = (
                check_machine(options.machine, here, options.host_disk)
                if options.machine
                else machine_name(socket.gethostname(), here, options.host_disk)
            )
            log(f"history: {len(hashes)} commit(s) of {tracked} on asv machine {name}; asv log: {log_path}")
            _asv(asv, ["machine", "--config", str(config_path), *machine_args(name)], log_path, "asv machine")
            hashfile = Path(tmp) / "commits.txt"
            hashfile.write_text("\n".join(hashes) + "\n", encoding="utf-8")
            records = conf.results_dir.parent / "history"
            model, where = _suite_disk(options, records, log)
            env = {**options.suite_environ, **matrix, ENV_MACHINE: name, ENV_RECORDS: str(records), **where}
            with model, LogFollower(log_path, log):
                _asv(
                    asv,
                    [
                        "run",
                        "--config",
                        str(config_path),
                        "--machine",
                        name,
                        "--show-stderr",
                        "--skip-existing-successful",
                        f"HASHFILE:{hashfile}",
                    ],
                    log_path,
                    "asv run",
                    env=env,
                    timeout_s=ASV_TIMEOUT_S,
                )
        pages = options.html_dir.resolve() if options.html_dir else conf.html_dir
        _asv(
            asv,
            ["publish", "--config", str(config_path), "--html-dir", str(pages)],
            log_path,
            "asv publish",
            timeout_s=PUBLISH_TIMEOUT_S,
        )
    index = pages / "index.html"
    if not index.is_file():
        raise InfraError(f"asv publish wrote no {index}: see {log_path}")
    localize(pages, log=log)
    try:
        changes_page = publish_changes(
            pages,
            results_dir=conf.results_dir,
            records_root=conf.results_dir.parent / "history",
            thresholds=conf.data.get("regressions_thresholds") or {},
            order=branch_order(tracked, conf.branch),
        )
        log(f"history: change points: {changes_page}")
    except UsageError as exc:
        log(f"history: WARNING: no change points page: {exc}")
    failed = failed_cells(conf.results_dir.parent / "history", name, hashes) if name else {}
    for commit, cells in failed.items():
        log(f"history: WARNING: {commit[:12]}: failed cells, gaps in the graphs: {', '.join(cells)}")
    return HistoryResult(
        index=index,
        log=log_path,
        machine=name,
        commits=tuple(hashes),
        regressions=count_regressions(pages),
        failed=failed,
    )


def matrix_environ(spec: Path | None, repeat: int | None) -> dict[str, str]:
    """The suite's variables for ``--spec`` and ``--repeat``, checked here (bad input stops before asv)."""
    from harness.sweep import load_spec

    env = {}
    if spec is not None:
        load_spec(spec)
        env[ENV_SPEC] = str(spec.resolve())
    if repeat is not None:
        if repeat < 1:
            raise UsageError(f"--repeat {repeat}: use 1 or more samples per cell")
        env[ENV_REPEAT] = str(repeat)
    return env


def _asv(
    asv: Sequence[str],
    args: Sequence[str],
    log_path: Path,
    what: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = 600.0,
) -> None:
    try:
        result = proc.run_logged([*asv, *args], log_path, timeout_s=timeout_s, check=False, env=env)
    except CommandError as exc:
        raise InfraError(f"{what} did not finish ({exc.message}): see {log_path}") from exc
    if not result.ok:
        raise InfraError(f"{what} failed with exit code {result.returncode}: see {log_path}")


def failed_cells(records_root: Path, machine: str, commits: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The cells with a failed sample at each commit, from the suite's records (asv shows only gaps)."""
    from harness.sweep import scan_records, sweep_dir

    out: dict[str, tuple[str, ...]] = {}
    for commit in commits:
        found = scan_records(sweep_dir(records_root / machine / commit, "history"))
        bad = tuple(cell_id for cell_id, record in sorted(found.items()) if record.failed)
        if bad:
            out[commit] = bad
    return out


def count_regressions(html_dir: Path) -> int:
    """How many series asv flags as regressed (its ``regressions.json``)."""
    try:
        data = json.loads((html_dir / "regressions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return len(data.get("regressions", []))

"""The gate: base vs head on one runner, interleaved, compared cell by cell.

A gate run has four parts:

1. **Subjects.**  Each side (base, head) is a revision of the tracked repository,
   checked out in a git worktree: its ``policy.toml`` and its guest recipe
   (``images/``) are what that side measures; its QEMU is either given
   (``--base-qemu``/``--head-qemu``) or built in the worktree by a configured
   build command.  The harness code that runs is this one, for both sides.
2. **Cells.**  The gate spec (``sweeps/gate.toml``) names a few cells; each
   side completes them from its own policy.  Cells are paired by their name in
   the spec, not by cell id: when a pull request changes the policy (seed 001:
   qcow2 preallocation off → metadata), the policy cell of head is another
   point of the matrix than base's, and that difference is what is measured.
3. **Rounds.**  Every round runs each cell once for base and once for head, the
   order of cells and of the two sides drawn at random per round and per cell,
   so drift of the host (thermal, a neighbour, the page cache) hits both sides
   alike.  After the first rounds, only cells whose result is not yet clear get
   more, until clear, ``max_rounds``, or the time budget.
4. **Verdicts.**  :mod:`harness.compare` does the statistics; a host canary
   (O_DIRECT writes on the work dir, before and after) turns time verdicts
   inconclusive when the host itself moved.

Output in ``OUT``: ``comparison.json`` (see ``docs/comparison.md``),
``summary.md``, and the records and logs of both sides.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import mmap
import os
import random
import shlex
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness import proc
from harness.compare import (
    STRUCTURAL_COUNTERS,
    CellResult,
    Settings,
    apply_canary,
    build_comparison,
    compare_family,
    needs_more_rounds,
    parse_percent,
    parse_rule,
    render_markdown,
)
from harness.errors import CommandError, InfraError, SpecError, UsageError
from harness.files import read_input_text, write_json_atomic, write_text_atomic
from harness.paths import IMAGES_DIR, REPO_ROOT
from harness.policy import POLICY_FILE, Policy, load_policy
from harness.spec import Cell, make_cell
from harness.workloads import metric_info

GATE_SPEC = REPO_ROOT / "sweeps" / "gate.toml"
SIDES = ("base", "head")
SPEC_KEYS = (
    "name",
    "description",
    "rounds",
    "max_rounds",
    "budget_min",
    "metrics",
    "min_effect",
    "rules",
    "counters",
    "changed_fails",
)
SPEC_KEYS_TABLES = ("params", "cells")


# -- the gate spec -----------------------------------------------------------------


@dataclass(frozen=True)
class GateCell:
    """A named cell of the gate spec: the values it sets; the rest comes from a policy."""

    name: str
    values: Mapping[str, Any]

    def resolve(self, policy: Policy) -> Cell:
        return make_cell(**{**policy.defaults_for(self.values), **self.values})


@dataclass(frozen=True)
class GateSpec:
    name: str
    source: str
    cells: tuple[GateCell, ...]
    rounds: int = 4
    max_rounds: int = 10
    budget_min: float = 60.0
    metrics: tuple[str, ...] = ("total_s",)
    min_effect: float = 0.05
    rules: Mapping[str, float] = field(default_factory=dict)
    description: str = ""
    counters: tuple[str, ...] = STRUCTURAL_COUNTERS
    changed_fails: bool = True


def parse_gate_spec(text: str, *, source: str = "<gate spec>") -> GateSpec:
    """Parse and validate a gate spec; errors name the file and the cell."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML ({exc}): fix the syntax") from None
    for key in data:
        if key not in SPEC_KEYS + SPEC_KEYS_TABLES:
            raise SpecError(
                f"{source}: unknown key {key!r}: use one of {', '.join(SPEC_KEYS + SPEC_KEYS_TABLES)}"
            )
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise SpecError(f"{source}: params must be a table ([params])")
    entries = data.get("cells")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{source}: no [[cells]]: name at least one cell")
    cells: list[GateCell] = []
    for number, entry in enumerate(entries, start=1):
        values = dict(entry)
        name = str(values.pop("name", "") or f"cell{number}")
        if any(c.name == name for c in cells):
            raise SpecError(f"{source}: cells[{number}]: the name {name!r} is used twice: name cells apart")
        cell = GateCell(name=name, values={**params, **values})
        try:
            make_cell(**cell.values)
        except SpecError as exc:
            raise SpecError(f"{source}: cells[{number}] ({name}): {exc.message}") from None
        except TypeError as exc:
            raise SpecError(f"{source}: cells[{number}] ({name}): unknown key: {exc}") from None
        cells.append(cell)

    def integer(key: str, default: int) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecError(f"{source}: {key} = {value!r}: use a whole number of 1 or more")
        return value

    rounds = integer("rounds", 4)
    max_rounds = integer("max_rounds", max(rounds, 10))
    if max_rounds < rounds:
        raise SpecError(f"{source}: max_rounds {max_rounds} is below rounds {rounds}: raise max_rounds")
    budget = data.get("budget_min", 60)
    if not isinstance(budget, int | float) or isinstance(budget, bool) or budget <= 0:
        raise SpecError(f"{source}: budget_min = {budget!r}: use a positive number of minutes")
    metrics = data.get("metrics", ["total_s"])
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise SpecError(f'{source}: metrics must be a list of metric names such as ["total_s"]')
    rules: dict[str, float] = {}
    raw_rules = data.get("rules", {})
    if not isinstance(raw_rules, dict):
        raise SpecError(f'{source}: rules must be a table of metric = "percent"')
    for metric, pct in raw_rules.items():
        try:
            name, effect = parse_rule(f"{metric}:{pct}", what=f"{source}: [rules]")
        except UsageError as exc:
            raise SpecError(exc.message) from None
        rules[name] = effect
    try:
        min_effect = parse_percent(str(data.get("min_effect", "5%")), what=f"{source}: min_effect")
    except UsageError as exc:
        raise SpecError(exc.message) from None
    counters = data.get("counters", list(STRUCTURAL_COUNTERS))
    if not isinstance(counters, list) or not all(isinstance(c, str) for c in counters):
        raise SpecError(f'{source}: counters must be a list of metric names such as ["host.flushes"]')
    for name in counters:
        try:
            metric_info(name)
        except UsageError as exc:
            raise SpecError(f"{source}: counters: {exc.message}") from None
    changed_fails = data.get("changed_fails", True)
    if not isinstance(changed_fails, bool):
        raise SpecError(f"{source}: changed_fails = {changed_fails!r}: use true or false")
    return GateSpec(
        name=str(data.get("name", "gate")),
        source=source,
        cells=tuple(cells),
        rounds=rounds,
        max_rounds=max_rounds,
        budget_min=float(budget),
        metrics=tuple(metrics),
        min_effect=min_effect,
        rules=rules,
        description=str(data.get("description", "")),
        counters=tuple(counters),
        changed_fails=changed_fails,
    )


def load_gate_spec(path: Path) -> GateSpec:
    text = read_input_text(path, what="gate spec", hint="pass a file such as sweeps/gate.toml")
    return parse_gate_spec(text, source=str(path))


# -- subjects ----------------------------------------------------------------------


@dataclass(frozen=True)
class SubjectSource:
    """Where one side comes from: a revision, and optionally its own QEMU."""

    label: str
    rev: str
    qemu: str | None = None
    qemu_img: str | None = None


@dataclass
class Subject:
    """One side, prepared: its checkout, policy, recipe and binaries."""

    label: str
    rev: str
    commit: str
    checkout: Path
    policy: Policy
    recipe_dir: Path
    qemu: str | None
    qemu_img: str | None

    def describe(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "rev": self.rev,
            "commit": self.commit,
            "policy": self.policy.as_dict(),
            "qemu": self.qemu,
            "qemu_img": self.qemu_img,
        }

    @contextlib.contextmanager
    def binaries(self) -> Iterator[None]:
        """Point the harness at this side's QEMU (it reads the environment at each use)."""
        saved = {k: os.environ.get(k) for k in ("DISKBENCH_QEMU", "DISKBENCH_QEMU_IMG")}
        try:
            for key, value in (("DISKBENCH_QEMU", self.qemu), ("DISKBENCH_QEMU_IMG", self.qemu_img)):
                if value:
                    os.environ[key] = value
            yield
        finally:
            for key, old in saved.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old


def git(repo: Path, *args: str, timeout_s: float = 120.0) -> str:
    try:
        result = proc.run(["git", "-C", str(repo), *args], timeout_s=timeout_s)
    except CommandError as exc:
        raise InfraError(f"git {' '.join(args)} in {repo} failed: {exc.message}") from exc
    return result.stdout.strip()


def resolve_rev(repo: Path, rev: str, what: str) -> str:
    result = proc.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        timeout_s=60,
        check=False,
    )
    if result.returncode != 0:
        raise UsageError(f"{what} {rev!r} is not a commit of {repo}: pass a branch, tag or commit")
    return result.stdout.strip()


def prepare_subject(
    repo: Path,
    source: SubjectSource,
    into: Path,
    *,
    default_policy: Path,
    build_command: str | None = None,
    built_qemu: str = "build/qemu-system-x86_64",
    built_qemu_img: str = "build/qemu-img",
    log: Callable[[str], None] = lambda _m: None,
) -> Subject:
    """Check ``source.rev`` out into ``into`` and find what that side measures.

    A checkout without ``policy.toml`` (a QEMU tree) uses ``default_policy``;
    one without ``images/recipe.toml`` uses this repository's guest recipe.
    """
    commit = resolve_rev(repo, source.rev, f"--{source.label}")
    git(repo, "worktree", "add", "--detach", "--force", str(into), commit, timeout_s=600)
    log(f"gate: {source.label} = {source.rev} ({commit[:12]}) checked out in {into}")
    policy_file = into / POLICY_FILE
    policy = load_policy(policy_file if policy_file.is_file() else default_policy)
    recipe_dir = into / "images" if (into / "images" / "recipe.toml").is_file() else IMAGES_DIR
    qemu, qemu_img = source.qemu, source.qemu_img
    if build_command and not qemu:
        log(f"gate: building {source.label}: {build_command}")
        try:
            proc.run(shlex.split(build_command), cwd=into, timeout_s=3 * 3600)
        except CommandError as exc:
            raise InfraError(
                f"the build command failed for {source.label} ({source.rev}): {exc.message}"
            ) from exc
        qemu = str(into / built_qemu)
        qemu_img = qemu_img or str(into / built_qemu_img)
        for path in (qemu, qemu_img):
            if not os.access(path, os.X_OK):
                raise InfraError(f"the build command of {source.label} made no executable {path}: check it")
    return Subject(
        label=source.label,
        rev=source.rev,
        commit=commit,
        checkout=into,
        policy=policy,
        recipe_dir=recipe_dir,
        qemu=qemu,
        qemu_img=qemu_img,
    )


def remove_worktree(repo: Path, checkout: Path) -> None:
    proc.run(
        ["git", "-C", str(repo), "worktree", "remove", "--force", str(checkout)], timeout_s=120, check=False
    )
    proc.run(["git", "-C", str(repo), "worktree", "prune"], timeout_s=60, check=False)


# -- the host canary ---------------------------------------------------------------


CANARY_MIB = 256
CANARY_CHUNK = 2 * 1024 * 1024


def canary_once(work_dir: Path, *, mib: int = CANARY_MIB) -> float:
    """MiB/s of ``mib`` MiB written with O_DIRECT in 2 MiB chunks, fsync included."""
    path = work_dir / f".canary-{os.getpid()}"
    buf = mmap.mmap(-1, CANARY_CHUNK)  # page-aligned, as O_DIRECT wants
    buf.write(os.urandom(4096) * (CANARY_CHUNK // 4096))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    try:
        start = time.monotonic()
        for _ in range(mib * 1024 * 1024 // CANARY_CHUNK):
            os.write(fd, buf)
        os.fsync(fd)
        elapsed = time.monotonic() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
        buf.close()
    return mib / elapsed


def host_canary(work_dir: Path, *, repeats: int = 5, mib: int = CANARY_MIB) -> list[float]:
    """Several canary writes; the gate keeps them all (their spread is the canary's own noise)."""
    try:
        return [canary_once(work_dir, mib=mib) for _ in range(repeats)]
    except OSError as exc:
        raise InfraError(f"the host canary could not write in {work_dir}: {exc.strerror or exc}") from exc


# -- running -----------------------------------------------------------------------


@dataclass
class GateResult:
    out_dir: Path
    document: dict[str, Any]
    markdown: str
    cells: list[CellResult]

    @property
    def exit_code(self) -> int:
        from harness.comparison import verdict_exit_code

        return verdict_exit_code(self.document)


@dataclass
class _Side:
    subject: Subject
    session: Any
    cells: dict[str, Cell]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_gate(
    *,
    repo: Path,
    base: SubjectSource,
    head: SubjectSource,
    spec: GateSpec,
    settings: Settings,
    out_dir: Path,
    work_dir: Path,
    accel: str = "auto",
    budget_min: float | None = None,
    rounds: int | None = None,
    max_rounds: int | None = None,
    default_policy: Path | None = None,
    build_command: str | None = None,
    seed: int | None = None,
    canary: bool = True,
    boot_timeout_s: float | None = None,
    workload_timeout_s: float = 1800.0,
    progress: Callable[[str], None] = lambda _m: None,
    start: str = "auto",
) -> GateResult:
    """Prepare both sides, run the cells interleaved, compare, write the outputs."""
    from harness.session import open_session

    top = proc.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"], timeout_s=60, check=False)
    if top.returncode != 0:
        raise UsageError(
            f"--repo {repo} is not a git repository: pass the checkout whose revisions to compare"
        )
    repo = Path(top.stdout.strip())
    # every cell x gated metric is one test of the family that shares alpha
    settings = replace(settings, comparisons=len(spec.cells) * len(settings.metrics))
    rounds = rounds or spec.rounds
    max_rounds = max(max_rounds or spec.max_rounds, rounds)
    budget_s = (budget_min if budget_min is not None else spec.budget_min) * 60
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    started = time.monotonic()
    checkouts = Path(tempfile.mkdtemp(prefix="diskbench-gate-"))
    # a QEMU built in a checkout must be reachable by the QEMU account (harness.confine)
    checkouts.chmod(0o755)
    subjects: list[Subject] = []
    try:
        for source in (base, head):
            subjects.append(
                prepare_subject(
                    repo,
                    source,
                    checkouts / source.label,
                    default_policy=default_policy or REPO_ROOT / POLICY_FILE,
                    build_command=build_command,
                    log=progress,
                )
            )
        sides: dict[str, _Side] = {}
        out_dir.mkdir(parents=True, exist_ok=True)
        for subject in subjects:
            try:
                cells = {gc.name: gc.resolve(subject.policy) for gc in spec.cells}
            except SpecError as exc:
                raise UsageError(
                    f"{spec.source}: under the policy of {subject.label}: {exc.message}"
                ) from None
            ids = [c.id for c in cells.values()]
            if len(set(ids)) != len(ids):
                raise UsageError(
                    f"{spec.source}: two cells are the same cell under the policy of {subject.label}: "
                    "make the cells differ in a value the policy does not set"
                )
            with subject.binaries():
                session = open_session(
                    caches={c.drive.cache for c in cells.values()},
                    repeat=1,
                    accel=accel,
                    work_dir=work_dir,
                    results_dir=out_dir,
                    boot_timeout_s=boot_timeout_s,
                    workload_timeout_s=workload_timeout_s,
                    start=start,
                    progress=progress,
                    policy=subject.policy,
                    recipe_dir=subject.recipe_dir,
                    run_id=subject.label,
                )
            session.subject["rev"] = subject.rev
            session.subject["commit"] = subject.commit
            sides[subject.label] = _Side(subject=subject, session=session, cells=cells)
        if sides["base"].session.opts.accel != sides["head"].session.opts.accel:
            raise InfraError("base and head got different accelerators: run the gate with --accel kvm or tcg")
        accel_used = sides["base"].session.opts.accel
        canary_before = host_canary(work_dir) if canary else []
        if canary_before:
            progress(f"gate: host canary before: {statistics.median(canary_before):.0f} MiB/s")
        names = [gc.name for gc in spec.cells]
        rounds_of = dict.fromkeys(names, 0)
        sample_s: list[float] = []

        def run_round(cell_names: Sequence[str], number: int) -> None:
            order = list(cell_names)
            rng.shuffle(order)
            for name in order:
                pair = list(SIDES)
                rng.shuffle(pair)
                for label in pair:
                    t0 = time.monotonic()
                    _run_one(sides[label], name, number, out_dir, progress)
                    sample_s.append(time.monotonic() - t0)
                rounds_of[name] = number

        for number in range(1, rounds + 1):
            progress(f"gate: round {number}/{rounds} of {len(names)} cells, base and head")
            run_round(names, number)
        results = _compare_all(spec, sides, settings, rounds_of)
        stop_reason = "every cell clear"
        for number in range(rounds + 1, max_rounds + 1):
            pending = [r.cell_id for r in results if needs_more_rounds(r)]
            pending_names = [n for n in names if _key(sides, n) in pending]
            if not pending_names:
                break
            per_round_s = 2 * len(pending_names) * (statistics.mean(sample_s) if sample_s else 60.0)
            if time.monotonic() - started + per_round_s > budget_s:
                stop_reason = f"budget of {budget_s / 60:.0f} min reached"
                progress(f"gate: {stop_reason}; {len(pending_names)} cell(s) stay as they are")
                break
            progress(f"gate: round {number}/{max_rounds} for {len(pending_names)} cell(s) not yet clear")
            run_round(pending_names, number)
            results = _compare_all(spec, sides, settings, rounds_of)
        else:
            if any(needs_more_rounds(r) for r in results):
                stop_reason = f"max_rounds {max_rounds} reached"
        canary_doc = None
        if canary_before:
            canary_after = host_canary(work_dir)
            progress(f"gate: host canary after: {statistics.median(canary_after):.0f} MiB/s")
            results, canary_doc = judge_canary(results, canary_before, canary_after, settings)
        elapsed = time.monotonic() - started
        document = build_comparison(
            results,
            settings=settings,
            base={
                **sides["base"].subject.describe(),
                "subject": sides["base"].session.subject,
                "machine": sides["base"].session.machine,
            },
            head={
                **sides["head"].subject.describe(),
                "subject": sides["head"].session.subject,
                "machine": sides["head"].session.machine,
            },
            machine=sides["head"].session.machine,
            canary=canary_doc,
            budget={
                "budget_min": budget_s / 60,
                "used_min": round(elapsed / 60, 2),
                "rounds": rounds,
                "max_rounds": max_rounds,
                "stopped": stop_reason,
                "seed": seed,
                "spec": spec.source,
                "accel": accel_used,
            },
            created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )
        markdown = render_markdown(document)
        write_json_atomic(out_dir / "comparison.json", document)
        write_text_atomic(out_dir / "summary.md", markdown)
        return GateResult(out_dir=out_dir, document=document, markdown=markdown, cells=results)
    finally:
        for subject in subjects:
            remove_worktree(repo, subject.checkout)
        with contextlib.suppress(OSError):
            for leftover in sorted(checkouts.rglob("*"), reverse=True):
                if leftover.is_dir() and not leftover.is_symlink():
                    leftover.rmdir()
                else:
                    leftover.unlink()
            checkouts.rmdir()


def judge_canary(
    results: Sequence[CellResult], before: Sequence[float], after: Sequence[float], settings: Settings
) -> tuple[list[CellResult], dict[str, Any]]:
    """The host moved only if the medians differ by more than the minimum effect *and* the
    ranges of the canary's own repeats do not overlap: its own noise is not a move of the host."""
    before_s, after_s = statistics.median(before), statistics.median(after)
    overlap = max(min(before), min(after)) <= min(max(before), max(after))
    if overlap:
        # judged with an effect no change can reach: the document still carries the figures
        results, doc = apply_canary(
            results, before_mib_s=before_s, after_mib_s=after_s, settings=replace(settings, min_effect=9.99)
        )
    else:
        results, doc = apply_canary(results, before_mib_s=before_s, after_mib_s=after_s, settings=settings)
    return results, {**doc, "before_runs": list(before), "after_runs": list(after)}


def _key(sides: Mapping[str, _Side], name: str) -> str:
    """The id a gate cell goes by in the comparison: head's cell id."""
    return sides["head"].cells[name].id


def _run_one(side: _Side, name: str, number: int, out_dir: Path, progress: Callable[[str], None]) -> None:
    cell = side.cells[name]
    session = replace(side.session, opts=replace(side.session.opts, repeat=number))
    path = out_dir / "records" / side.subject.label / f"{cell.id}.json"
    with side.subject.binaries():
        _, record = session.run_cell(
            cell,
            path=path,
            existing=side.records.get(name),
            log_root=out_dir / "logs" / side.subject.label / cell.id,
            progress=progress,
            label=f"[{side.subject.label}] ",
            of=number,
        )
    side.records[name] = record


def _compare_all(
    spec: GateSpec, sides: Mapping[str, _Side], settings: Settings, rounds_of: Mapping[str, int]
) -> list[CellResult]:
    groups = []
    names = []
    for gc in spec.cells:
        base_rec = sides["base"].records.get(gc.name)
        head_rec = sides["head"].records.get(gc.name)
        if base_rec is None or head_rec is None:
            continue
        cell = dict(head_rec["cell"])
        base_id = base_rec["cell"]["id"]
        cell["gate_name"] = gc.name
        if base_id != cell["id"]:
            cell["base_id"] = base_id
        groups.append((cell, base_rec["samples"], head_rec["samples"]))
        names.append(gc.name)
    # every cell x gated metric (and counter, when changed fails) is one test of the family
    results = compare_family(groups, settings=settings)
    return [replace(r, rounds=rounds_of[name]) for r, name in zip(results, names, strict=True)]


def settings_for(
    spec: GateSpec, given: Settings, *, metrics_given: bool = False, min_effect_given: bool = False
) -> Settings:
    """The spec's metrics and minimum effects, unless the command line gave its own."""
    return replace(
        given,
        metrics=given.metrics if metrics_given else spec.metrics,
        min_effect=given.min_effect if min_effect_given else spec.min_effect,
        min_effect_by_metric={**spec.rules, **dict(given.min_effect_by_metric)},
        counters=spec.counters,
        changed_fails=spec.changed_fails and given.changed_fails,
    )

"""The comparison as a value: :class:`Comparison` and its typed parts.  Pure: no I/O.

``comparison.json`` (schema ``diskbench-comparison``, ``docs/comparison.md``) is this value's JSON
form: :meth:`Comparison.from_json` reads a document that passed the top-level check
(:func:`harness.compare.document.validate_comparison`), :meth:`Comparison.to_json` gives back the
very same document, key for key and in the same order, so that reading and writing a comparison
never changes its bytes.  A comparison made by :func:`harness.compare.document.build_comparison`
writes its keys in the order the harness always wrote them.  Every renderer (``summary.md``, the
text table, the summary's screen) and every reader (the gate, the bisection, ``diskbench
compare``) reads these values; JSON is :mod:`harness.compare.comparison`'s business only.

The parts, as the document nests them::

    Comparison
      summary: Summary (counts, changed, subject_diff: DiffEntry (reach: Reach), sensitivity,
               screen: Screen (first, unchanged, inconclusive, rows: Row), policy_held: HeldCell)
      base, head: Side (subject: SubjectInfo, machine: MachineInfo)
      machine: MachineInfo; settings: SettingsUsed; canary: Canary; budget: Budget
      cells: ComparedCell (cell: FlatCell, metrics and counters: Figures)
      guest_word: GuestWord (a gate whose guests differ)

How each part reads and writes its JSON object is :mod:`harness.compare.jsonpart`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.compare.jsonpart import JsonObject, JsonPart
from harness.compare.text import format_value, pct
from harness.compare.verdict import Kind, Verdict
from harness.record.model import MachineInfo, SubjectInfo

SCHEMA = "diskbench-comparison"
# 2: the verdict "changed" (kind "counter"), Holm's correction, the subject diff, the canary's
# voided/kept lists; a reader of version 1 would misread a changed cell, so it must refuse
VERSION = 2


# --- a cell ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Figures(JsonPart):
    """One gated metric or structural counter of a cell, as compared: the medians, their ratio
    head/base and its interval (also as percent changes; null where not finite), the test's p,
    the minimum effect, the verdict and why, what it could have seen and the rounds to decide."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset(
        {
            "shrink",
            "measured_change_pct",
            "information",
            "alone_low_pct",
            "alone_high_pct",
            "crossed_effect",
        }
    )

    metric: str
    unit: str = ""
    higher_is_better: bool = False
    paired: bool = False
    together: bool = False
    # a guest pair taken together on one CPU: the factor on logs its ratio and interval are scaled
    # by to the size alone, and the pairs' own change (percent)
    shrink: float | None = None
    measured_change_pct: float | None = None
    # a guest pair taken crossed: the range of sizes alone its change stands for (percent), and the
    # minimum effect as the pair reads it at least, the edge of every verdict (Settings.crossed_reads)
    alone_low_pct: float | None = None
    alone_high_pct: float | None = None
    crossed_effect: float | None = None
    # a figure shown but not gated: why
    information: str | None = None
    n_base: int = 0
    n_head: int = 0
    median_base: float | None = None
    median_head: float | None = None
    ratio: float | None = None
    change_pct: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    min_effect: float = 0.0
    verdict: Verdict
    reason: str = ""
    could_see_pct: float | None = None
    rounds_to_decide: int | None = None

    @property
    def moved(self) -> bool:
        """A regression or improvement (for a counter: a change of the IO)."""
        return self.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)

    @property
    def rounds(self) -> int:
        """The rounds both sides have: the smaller of their samples."""
        return min(self.n_base, self.n_head)

    @property
    def head_over_base(self) -> float | None:
        """``ratio``, or where the document holds null for it while both medians are known (base's
        median 0, head's not) the infinite ratio it stands for; None without samples."""
        if self.ratio is not None or self.median_base is None or self.median_head is None:
            return self.ratio
        if self.median_base == 0:
            return 1.0 if self.median_head == 0 else math.copysign(math.inf, self.median_head)
        return self.median_head / self.median_base

    def change_text(self) -> str:
        """``"host.write_amplification +2.6% (1.001 → 1.027)"``."""
        return (
            f"{self.metric} {pct(self.head_over_base)} "
            f"({format_value(self.median_base, self.unit)} → {format_value(self.median_head, self.unit)})"
        )


@dataclass(frozen=True, kw_only=True)
class FlatCell(JsonPart):
    """A compared cell's axes, flat (:func:`harness.compare.rules.flatten_cell`): the image's, the
    drive's, the workload's slug, the cache state; a gate's name of the cell and base's id when
    the sides' ids differ; other plain values of the record's cell in ``extra``."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"measure", "gate_name", "base_id"})

    format: str | None = None
    preallocation: str | None = None
    cluster_size: int | None = None
    cache: str | None = None
    aio: str | None = None
    interface: str | None = None
    workload: str | None = None
    cache_state: str | None = None
    measure: str | None = None
    gate_name: str | None = None
    base_id: str | None = None

    def axis(self, name: str) -> Any:
        """The value of the axis ``name`` (``format``, ``cache``...; an extra's too); None if absent."""
        if name in self.extra:
            return self.extra[name]
        return getattr(self, name, None) if name not in ("extra", "keys") else None


@dataclass(frozen=True, kw_only=True)
class ComparedCell(JsonPart):
    """One cell of a comparison: its verdict, where it comes from and why, its samples, every
    figure (gated metrics, then counters), the counters' note, its short name and history graphs.

    ``time_verdict`` is the verdict of the gated metrics and failures (None on a cell not yet in a
    document: the same as ``verdict``); ``counter_verdict`` that of the structural counters:
    ``changed`` when one moved beyond its threshold, else the worst of theirs.  ``verdict`` is the
    time verdict, except that a ``changed`` counter turns anything short of a regression or an
    error into ``changed`` (kind ``counter``).  ``note`` ties counters and time together
    ("explained by: ..." or "structural change: ...")."""

    cell_id: str
    cell: FlatCell = field(default_factory=FlatCell)
    verdict: Verdict
    kind: Kind
    reason: str = ""
    rounds: int = 0
    base_ok: int = 0
    base_failed: int = 0
    head_ok: int = 0
    head_failed: int = 0
    metrics: tuple[Figures, ...] = ()
    counters: tuple[Figures, ...] = ()
    # figures shown beside the gated ones, never deciding; each says why it is not gated
    information: tuple[Figures, ...] = ()
    counter_verdict: Verdict | None = Verdict.UNCHANGED
    time_verdict: Verdict | None = None
    note: str = ""
    title: str | None = None
    # metric -> the fragment of the history pages that graphs it
    history: Mapping[str, str] = field(default_factory=dict)

    @property
    def figures(self) -> tuple[Figures, ...]:
        return (*self.metrics, *self.counters)

    def figure(self, metric: str | None) -> Figures | None:
        """The figures of ``metric`` (a gated metric or a counter); None if the cell has none."""
        return next((m for m in self.figures if metric is not None and m.metric == metric), None)

    @property
    def name(self) -> str:
        """The gate spec's name of the cell, else its id."""
        return self.cell.gate_name or self.cell_id


# --- the summary ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StructuralChange(JsonPart):
    cell_id: str
    note: str


@dataclass(frozen=True, kw_only=True)
class ChangedCell(JsonPart):
    """A ``changed`` cell and its counters that moved (``host.flushes -100.0% (1901 → 0)``)."""

    cell_id: str
    name: str
    counters: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class KeptCell(JsonPart):
    """A gate cell that a change of the policy does not reach, what it keeps, and why; ``axis``:
    the cell's value that rules the policy's out (``cache=writeback``), "" if the cell sets the key."""

    name: str
    keeps: str
    axis: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Reach(JsonPart):
    """The gate cells a difference of the policies applied to, and those that kept another value."""

    applied: tuple[str, ...] = ()
    kept: tuple[KeptCell, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DiffEntry(JsonPart):
    """One difference between base and head (``cache: none → writethrough``); for a gate's policy
    value, where it applied (``where`` in words, ``reach``)."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"where", "reach"})

    what: str
    base: str
    head: str
    where: str | None = None
    reach: Reach | None = None


@dataclass(frozen=True, kw_only=True)
class Renamed(JsonPart):
    """A cell whose id differs between the sides (a policy change renames the cells it reaches)."""

    name: str
    base_id: str
    head_id: str


@dataclass(frozen=True, kw_only=True)
class HeldCell(JsonPart):
    """A value of a side's policy that one gate cell cannot take (QEMU refuses it with the cell's
    own axes), the value it keeps instead, and on which sides."""

    name: str
    key: str
    value: str
    keeps: str
    axis: str
    why: str
    sides: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SensitivityRow(JsonPart):
    """One cell's gated metric: the smallest change it could have caught (percent) at its rounds,
    and for an inconclusive one about how many rounds per side would decide it."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"measure"})

    cell_id: str
    name: str
    # the cell's kind: guest or replay
    measure: str | None = None
    metric: str
    rounds: int = 0
    verdict: Verdict
    could_see_pct: float | None = None
    rounds_to_decide: int | None = None


@dataclass(frozen=True, kw_only=True)
class FirstLine(JsonPart):
    """A line under the headline: the cell (an index into ``cells``), its lead, and for a cell
    without figures what happened in a few words."""

    cell: int
    metric: str | None = None
    said: str | None = None


@dataclass(frozen=True, kw_only=True)
class CouldSee(JsonPart):
    """What an unchanged comparison could have seen: the smallest and largest, over its cells."""

    cells: int = 0
    could_see_low_pct: float | None = None
    could_see_high_pct: float | None = None


@dataclass(frozen=True, kw_only=True)
class Inconclusive(JsonPart):
    """The inconclusive cells (indices into ``cells``), the rounds per side that would decide the
    slowest, the gate's command that runs them, what they could have seen."""

    cells: tuple[int, ...] = ()
    rounds: int | None = None
    command: tuple[str, ...] | None = None
    gate: bool = False
    could_see_pct: float | None = None
    slowest: int | None = None
    slowest_rounds: int | None = None


@dataclass(frozen=True, kw_only=True)
class RowFigure(JsonPart):
    """A figure of a cell's fold and its verdict as the fold writes it."""

    metric: str
    label: str


@dataclass(frozen=True, kw_only=True)
class Row(JsonPart):
    """A table row: the cell (an index into ``cells``), its lead, its verdict as the table writes
    it, every figure of the cell for its fold."""

    cell: int
    metric: str | None = None
    label: str = ""
    figures: tuple[RowFigure, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Screen(JsonPart):
    """What every summary shows first and in which order (:mod:`harness.compare.screen`)."""

    first: tuple[FirstLine, ...] = ()
    unchanged: CouldSee | None = None
    inconclusive: Inconclusive | None = None
    rows: tuple[Row, ...] = ()
    unchanged_rows: tuple[Row, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Summary(JsonPart):
    """The comparison in brief: the verdicts counted, what changed, what differs, the sensitivity,
    the screen; a gate's cells that hold back a policy value and those no difference reached."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"policy_held", "untouched"})

    cells: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    structural_changes: tuple[StructuralChange, ...] = ()
    axis_sentence: str | None = None
    fails: bool = False
    changed: tuple[ChangedCell, ...] = ()
    # None: a document from before the subject diff
    subject_diff: tuple[DiffEntry, ...] | None = None
    cell_id_changes: tuple[Renamed, ...] = ()
    sensitivity: tuple[SensitivityRow, ...] = ()
    screen: Screen | None = None
    policy_held: tuple[HeldCell, ...] | None = None
    untouched: tuple[str, ...] | None = None


# --- the sides, the settings, the canary, the budget ----------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Side(JsonPart):
    """A side of the comparison: its label (the records' path, or ``base``/``head``) and revision,
    the subject and machine of its records; a gate's side also its commit, policy and binaries."""

    label: str | None = None
    rev: str | None = None
    commit: str | None = None
    policy: JsonObject | None = None
    qemu: str | None = None
    qemu_img: str | None = None
    # a gate side's build: the command, the account it ran as, the processes ended after it
    build: JsonObject | None = None
    subject: SubjectInfo = field(default_factory=SubjectInfo)
    records: int | None = None
    machine: MachineInfo = field(default_factory=MachineInfo)

    # the keys of a side of records compared (``diskbench compare``), and of a gate's side
    RECORDS: ClassVar[tuple[str, ...]] = ("label", "rev", "subject", "records", "machine")
    GATE: ClassVar[tuple[str, ...]] = (
        "label",
        "rev",
        "commit",
        "policy",
        "qemu",
        "qemu_img",
        "subject",
        "machine",
    )
    GATE_BUILT: ClassVar[tuple[str, ...]] = (
        "label",
        "rev",
        "commit",
        "policy",
        "qemu",
        "qemu_img",
        "build",
        "subject",
        "machine",
    )


@dataclass(frozen=True, kw_only=True)
class SettingsUsed(JsonPart):
    """How the comparison decided (:class:`harness.compare.settings.Settings`, as it was)."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"crossed_reads"})

    metrics: tuple[str, ...] = ()
    counters: tuple[str, ...] = ()
    min_effect: float = 0.0
    counter_min_effect: float = 0.0
    min_effect_by_metric: Mapping[str, float] = field(default_factory=dict)
    alpha: float | None = None
    confidence: float = 0.0
    bootstrap: int | None = None
    seed: int | None = None
    min_samples: int | None = None
    comparisons: int = 1
    alpha_per_test: float | None = None
    correction: str = "bonferroni"
    test: str | None = None
    changed_fails: bool = True
    # a cell's own gated metrics by its gate name; why a metric is shown but not gated; the shrink
    # of a guest pair taken together (harness.compare.settings.Settings)
    cell_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    information: Mapping[str, str] = field(default_factory=dict)
    together_shrink: float | None = None
    # what a crossed guest pair reads of a change's size alone, at least and at most, on logs
    crossed_reads: tuple[float, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Canary(JsonPart):
    """The host canary: the disk's write throughput before and after the rounds, whether it moved,
    the cells it voided and those it could not explain; a gate's repeats of it."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"before_runs", "after_runs"})

    before_mib_s: float | None = None
    after_mib_s: float | None = None
    change: float | None = None
    moved: bool = False
    voided: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    before_runs: tuple[float, ...] | None = None
    after_runs: tuple[float, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Budget(JsonPart):
    """A gate's time: its budget and what it used, its rounds, why they stopped, its seed and spec."""

    budget_min: float | None = None
    used_min: float | None = None
    rounds: int | None = None
    max_rounds: int | None = None
    stopped: str | None = None
    seed: int | None = None
    spec: str | None = None
    accel: str | None = None

    def items(self) -> Iterator[tuple[str, Any]]:
        """Its figures by name, in the document's order (the summary's ``Budget:`` line)."""
        return iter(self.to_json().items())


@dataclass(frozen=True, kw_only=True)
class GuestWordRow(JsonPart):
    cell: str
    metric: str
    median_base: float | None = None
    median_head: float | None = None
    change_pct: float | None = None


@dataclass(frozen=True, kw_only=True)
class GuestWord(JsonPart):
    """A gate whose guests differ: the figures the guests report of themselves, never gated, and
    the host's figures gated instead (:mod:`harness.gate.judge`)."""

    base_guest: str = ""
    head_guest: str = ""
    gated_instead: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    rows: tuple[GuestWordRow, ...] = ()


# --- the comparison -------------------------------------------------------------------------------


def command_word(argv: Sequence[str]) -> str | None:
    """The command of a ``diskbench`` argv (``gate``), past the top-level options before it
    (``diskbench --qemu BUILD gate ...``)."""
    words = [str(w) for w in argv[1:]]
    at = 0
    while at < len(words) and words[at].startswith("-"):
        at += 1 if "=" in words[at] else 2
    return words[at] if at < len(words) else None


@dataclass(frozen=True, kw_only=True)
class Comparison(JsonPart):
    """Base against head: the overall verdict, its summary, both sides, the machine, the settings,
    a gate's canary and budget, where it points its reader, and every cell."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"guest_word"})

    schema: str = SCHEMA
    version: int = VERSION
    created_at: str
    verdict: Verdict
    accel: str = "unknown"
    summary: Summary
    warnings: tuple[str, ...] = ()
    base: Side = field(default_factory=Side)
    head: Side = field(default_factory=Side)
    machine: MachineInfo = field(default_factory=MachineInfo)
    settings: SettingsUsed | None = None
    canary: Canary | None = None
    budget: Budget | None = None
    pages_url: str | None = None
    reproduce: tuple[str, ...] | None = None
    cells: tuple[ComparedCell, ...] = ()
    guest_word: GuestWord | None = None

    @property
    def gate(self) -> bool:
        """The comparison of a gate (more rounds decide), not of records (more samples)."""
        if self.reproduce:
            return command_word(self.reproduce) == "gate"
        return self.budget is not None

    @property
    def fails(self) -> bool:
        return self.summary.fails

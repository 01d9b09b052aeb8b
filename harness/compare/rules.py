"""The verdict rules of cells: one cell (:func:`compare_cell`), a family of cells, many records.

One metric's verdict is :mod:`harness.compare.metric`'s (re-exported here)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from harness.compare.evidence import family_p
from harness.compare.metric import Alone, compare_metric
from harness.compare.model import ComparedCell, Figures, FlatCell
from harness.compare.settings import Settings
from harness.compare.stats import holm_adjust
from harness.compare.verdict import Kind, Verdict, worst
from harness.record.model import CellInfo, Record, Sample

__all__ = [
    "Family",
    "compare_cell",
    "compare_family",
    "compare_metric",
    "compare_records",
    "flatten_cell",
    "judge_family",
    "judge_records",
    "mixed_starts",
    "needs_more_rounds",
    "overall_verdict",
    "start_kind",
    "with_counters",
]


# --- one cell -------------------------------------------------------------------------------------


def _workload_slug(workload: Mapping[str, Any]) -> str:
    """The workload part of a cell id (``install-full``, ``dd-256m-2m-ext4``)."""
    from harness.spec import WorkloadSpec

    try:
        return WorkloadSpec.from_dict(workload).slug
    except (KeyError, TypeError, ValueError):
        return str(workload.get("name", "?"))


def flatten_cell(cell: CellInfo) -> FlatCell:
    """The axes of a record's cell, flat: format, ..., workload (slug), cache_state.

    Other plain values at the top of the cell (a replay's ``measure``, a gate's ``gate_name``...)
    follow the axes as they are.
    """
    image = cell.get("image") or {}
    drive = cell.get("drive") or {}
    workload = cell.get("workload") or {}
    plain: dict[str, Any] = {
        k: v
        for k, v in cell.data.items()
        if k not in ("id", "image", "drive", "workload", "cache_state")
        and (v is None or isinstance(v, str | int | float | bool))
    }
    named = ("measure", "gate_name", "base_id")
    return FlatCell(
        format=image.get("format"),
        preallocation=image.get("preallocation"),
        cluster_size=image.get("cluster_size"),
        cache=drive.get("cache"),
        aio=drive.get("aio"),
        interface=drive.get("interface"),
        workload=_workload_slug(workload) if isinstance(workload, Mapping) else str(workload),
        cache_state=cell.get("cache_state", "fresh"),
        measure=plain.get("measure"),
        gate_name=plain.get("gate_name"),
        base_id=plain.get("base_id"),
        extra={k: v for k, v in plain.items() if k not in named},
    )


def _ok(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.ok]


def _fails(ok: int, total: int) -> bool:
    """A side fails when more than half its samples failed, or none is ok."""
    return ok == 0 or (total - ok) * 2 > total


def _first_failure(samples: Sequence[Sample]) -> str:
    for s in samples:
        if not s.ok:
            return str(s.reason or f"status {s.status!r}, no reason recorded")
    return ""


def _values(
    metric: str, base: Sequence[Sample], head: Sequence[Sample]
) -> tuple[list[float], list[float], bool]:
    """The metric's values of both sides, paired by round when both have the same rounds."""
    b, h, paired, _together = _pairs(metric, base, head)
    return b, h, paired


def taken_together(sample: Sample) -> bool:
    """Whether ``sample`` ran at the same moment as its partner of the other side: every pass of a
    replay, or a guest's workload (a gate's pair, :class:`harness.sample.pairing.Pairing`)."""
    together = sample.host.get("together")
    if isinstance(together, Mapping):
        return together.get("met") is True
    replay = sample.replay
    if not isinstance(replay, Mapping):
        return False
    met, walls = replay.get("passes_together"), replay.get("pass_wall_s")
    return isinstance(met, int) and isinstance(walls, list) and 0 < len(walls) == met


# figures of a guest sample that do not count what a partner on its CPU took: QEMU's own CPU time,
# the workload's time less its vCPUs' waits for the CPU (harness.sample.vm.cpu)
OWN_CPU_FIGURES = frozenset({"host.workload_cpu_s", "host.workload_alone_s"})


def shrink_of(metric: str, base: Sequence[Sample], settings: Settings) -> float:
    """How much sharing one CPU may have shrunk ``metric``'s change in pairs taken together: the
    settings' factor for a guest's figure that counts its partner's share, else 1 (a replay's
    qemu-io, a figure of the guest's own CPU, a crossed pair's)."""
    if metric in OWN_CPU_FIGURES:
        return 1.0
    if any(shared_cpu(s) for s in base):
        return settings.together_shrink
    return 1.0


def reads_of(metric: str, base: Sequence[Sample], settings: Settings) -> tuple[float, float] | None:
    """What a pair taken crossed reads of a change of ``metric``'s size alone, at least and at most
    (the settings' measured range), where ``base``'s samples are a crossed guest pair's; None
    elsewhere and for a structural counter (the IO a guest does does not depend on its CPU)."""
    if metric in settings.counters or not any(pair_mode(s) == "crossed" for s in base):
        return None
    return settings.crossed_reads


def shared_cpu(sample: Sample) -> bool:
    """Whether ``sample`` is a guest's taken together with its partner on one CPU (a crossed
    pair's sides each had a CPU of their own: nothing shrinks)."""
    return pair_mode(sample) == "shared"


def pair_mode(sample: Sample) -> str | None:
    """How a guest sample taken together shared the host with its partner (``"shared"``,
    ``"crossed"``; a record from before crossed pairs says no mode and shared one CPU); None for
    a sample not taken together."""
    together = sample.host.get("together")
    if not isinstance(together, Mapping):
        return None
    return str(together.get("mode", "shared"))


def _pairs(
    metric: str, base: Sequence[Sample], head: Sequence[Sample]
) -> tuple[list[float], list[float], bool, bool]:
    """:func:`_values`, and whether every pair ran together (both its samples at one moment)."""

    def by_index(samples: Sequence[Sample]) -> tuple[list[float], list[Any], bool]:
        values, indices, together = [], [], True
        for pos, s in enumerate(samples):
            figures = s.metrics
            if metric in figures and figures[metric] is not None:
                values.append(float(figures[metric]))
                indices.append(pos if s.index is None else s.index)
                together = together and taken_together(s)
        return values, indices, together

    b, bi, b_together = by_index(base)
    h, hi, h_together = by_index(head)
    paired = bool(b) and len(set(bi)) == len(bi) and len(set(hi)) == len(hi) and set(bi) == set(hi)
    if paired:
        order = {index: pos for pos, index in enumerate(bi)}
        h_by_round = [0.0] * len(h)
        for value, index in zip(h, hi, strict=True):
            h_by_round[order[index]] = value
        h = h_by_round
    return b, h, paired, paired and b_together and h_together


def _present(metric: str, samples: Iterable[Sample]) -> bool:
    return any(metric in s.metrics for s in samples)


def compare_cell(
    cell: CellInfo,
    base_samples: Sequence[Sample],
    head_samples: Sequence[Sample],
    *,
    settings: Settings,
    p_adjusted: Mapping[str, float] | None = None,
) -> ComparedCell:
    """The verdict of one cell from the samples of base and head (a record's ``samples``).

    ``p_adjusted``: metric -> its Holm-adjusted p in the family (see
    :func:`compare_family`); a metric not in it is judged with ``alpha_per_test``.
    """
    cell_id = str(cell.get("id", "?"))
    base_ok, head_ok = _ok(base_samples), _ok(head_samples)
    common: dict[str, Any] = {
        "cell_id": cell_id,
        "cell": flatten_cell(cell),
        "rounds": max(len(base_samples), len(head_samples)),
        "base_ok": len(base_ok),
        "base_failed": len(base_samples) - len(base_ok),
        "head_ok": len(head_ok),
        "head_failed": len(head_samples) - len(head_ok),
    }
    base_fails = _fails(len(base_ok), len(base_samples))
    head_fails = _fails(len(head_ok), len(head_samples))
    if base_fails or head_fails:
        base_text = _tally("base", len(base_ok), base_samples)
        head_text = _tally("head", len(head_ok), head_samples)
        if head_fails and not base_fails:
            verdict, kind, reason = Verdict.REGRESSION, Kind.FAILURE, f"{head_text}; {base_text}"
        elif base_fails and head_fails:
            verdict, kind = Verdict.ERROR, Kind.BOTH_FAILED
            reason = f"both sides failed: {base_text}; {head_text}"
        else:
            verdict, kind = Verdict.ERROR, Kind.BASE_FAILED
            reason = f"{base_text}: nothing to compare head with; {head_text}"
        return ComparedCell(
            **common, verdict=verdict, kind=kind, reason=reason, counter_verdict=Verdict.ERROR
        )

    mixed = None if settings.mix_starts else mixed_starts(base_ok, head_ok)
    if mixed:
        return ComparedCell(
            **common,
            verdict=Verdict.ERROR,
            kind=Kind.MIXED_START,
            reason=mixed,
            counter_verdict=Verdict.ERROR,
        )

    def run(names: Sequence[str], *, adjusted: Mapping[str, float] | None) -> tuple[Figures, ...]:
        return _compare_metrics(names, base_ok, head_ok, settings=settings, adjusted=adjusted)

    gated = settings.gated_for(cell.get("gate_name"))
    metrics = run(gated, adjusted=p_adjusted)
    counters = run(_counters(settings, gated), adjusted=p_adjusted)
    shown = settings.information_for(cell.get("gate_name"))
    information = tuple(
        replace(m, information=shown[m.metric] or None) for m in run(list(shown), adjusted=None)
    )
    counter_verdict = _counter_verdict(counters)
    if not metrics:
        return with_counters(
            ComparedCell(
                **common,
                verdict=Verdict.INCONCLUSIVE,
                kind=Kind.NO_METRIC,
                reason=f"none of the gated metrics ({', '.join(gated)}) is in the samples",
                counters=counters,
                information=information,
                counter_verdict=counter_verdict,
                note=_note(Verdict.INCONCLUSIVE, counters),
            )
        )
    verdict = worst(r.verdict for r in metrics)
    reason = "; ".join(f"{r.metric}: {r.reason}" for r in metrics if r.verdict is verdict)
    partial = [
        _tally(side, len(ok), samples)
        for side, ok, samples in (("base", base_ok, base_samples), ("head", head_ok, head_samples))
        if len(ok) < len(samples)
    ]
    if partial:
        reason += f" ({'; '.join(partial)})"
    return with_counters(
        ComparedCell(
            **common,
            verdict=verdict,
            kind=Kind.METRIC,
            reason=reason,
            metrics=metrics,
            counters=counters,
            counter_verdict=counter_verdict,
            note=_note(verdict, counters),
            information=information,
        )
    )


def _tally(side: str, ok: int, samples: Sequence[Sample]) -> str:
    """How one side's samples went, in words: none, all ok, or how many failed and the first's why."""
    if not samples:
        return f"{side} has no samples"
    first = _first_failure(samples)
    if not first:
        return f"{side} {ok} of {len(samples)} samples ok"
    return f"{side} failed {len(samples) - ok} of {len(samples)} samples (first: {first})"


def _compare_metrics(
    names: Sequence[str],
    base_ok: Sequence[Sample],
    head_ok: Sequence[Sample],
    *,
    settings: Settings,
    adjusted: Mapping[str, float] | None,
) -> tuple[Figures, ...]:
    """The figures of each of ``names`` that either side's ok samples have, paired by round where
    they can be; ``adjusted``: metric -> its Holm-adjusted p (None: judged at ``alpha_per_test``)."""
    results = []
    for name in names:
        if not (_present(name, base_ok) or _present(name, head_ok)):
            continue  # not a figure of this workload
        b, h, paired, together = _pairs(name, base_ok, head_ok)
        results.append(
            compare_metric(
                name,
                b,
                h,
                settings=settings,
                paired=paired,
                p_adjusted=None if adjusted is None else adjusted.get(name),
                together=together,
                alone=Alone(shrink_of(name, base_ok, settings), reads_of(name, base_ok, settings)),
            )
        )
    return tuple(results)


def _counters(settings: Settings, gated: Sequence[str] | None = None) -> list[str]:
    gated = settings.metrics if gated is None else gated
    return [c for c in settings.counters if c not in gated]


def _counter_verdict(counters: Sequence[Figures]) -> Verdict:
    """``changed`` when a counter moved either way beyond its threshold, else the worst of them."""
    if any(c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) for c in counters):
        return Verdict.CHANGED
    return worst(c.verdict for c in counters)


def with_counters(result: ComparedCell) -> ComparedCell:
    """A ``changed`` counter makes the cell ``changed`` unless its time regressed."""
    if result.counter_verdict is not Verdict.CHANGED or result.verdict in (Verdict.REGRESSION, Verdict.ERROR):
        return result
    moved = [c for c in result.counters if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)]
    return replace(
        result,
        verdict=Verdict.CHANGED,
        kind=Kind.COUNTER,
        time_verdict=result.verdict,
        reason="the IO changed: "
        + "; ".join(f"{c.change_text()}: {c.reason}" for c in moved)
        + f"; time: {result.verdict.value}, {result.reason}",
    )


def _note(verdict: Verdict, counters: Sequence[Figures]) -> str:
    """Counters that moved with the time explain it; counters that moved on their own are news."""
    changed = [c for c in counters if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)]
    if not changed:
        return ""
    if verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        same = [c for c in changed if c.verdict is verdict]
        if same:
            return "explained by: " + "; ".join(c.change_text() for c in same)
    return "structural change: " + "; ".join(c.change_text() for c in changed)


def needs_more_rounds(result: ComparedCell) -> bool:
    """Whether more rounds could decide this cell: its time verdict is inconclusive from the statistics.

    Not for failures, missing records, cells without a gated metric, or a
    verdict voided by the host canary.  Also a cell not yet regressed or
    changed whose counter moved beyond its threshold without being
    significant yet: more rounds may make it ``changed``.
    """
    if result.verdict is Verdict.INCONCLUSIVE and result.kind is Kind.METRIC:
        return True
    if result.verdict in (Verdict.REGRESSION, Verdict.CHANGED, Verdict.ERROR):
        return False
    return any(_counter_pending(c) for c in result.counters)


def _counter_pending(counter: Figures) -> bool:
    ratio = counter.head_over_base
    if counter.verdict is not Verdict.INCONCLUSIVE or ratio is None:
        return False
    m = counter.min_effect
    return not 1.0 / (1.0 + m) < ratio < 1.0 + m


def overall_verdict(cells: Sequence[ComparedCell]) -> Verdict:
    """The worst cell's verdict (:data:`~harness.compare.verdict.SEVERITY`); unchanged for none."""
    return worst(c.verdict for c in cells)


def _group(records: Sequence[Record]) -> dict[str, tuple[CellInfo, list[Sample]]]:
    """Cell id -> (the record's cell, samples of every record of that cell, in order)."""
    groups: dict[str, tuple[CellInfo, list[Sample]]] = {}
    for record in records:
        cell = record.cell
        cell_id = str(cell.get("id", "?"))
        if cell_id not in groups:
            groups[cell_id] = (cell, [])
        groups[cell_id][1].extend(record.samples)
    return groups


def compare_records(
    base: Sequence[Record], head: Sequence[Record], *, settings: Settings
) -> list[ComparedCell]:
    """:func:`judge_records`' cells."""
    return judge_records(base, head, settings=settings).cells


def judge_records(base: Sequence[Record], head: Sequence[Record], *, settings: Settings) -> Family:
    """Every cell of either side, sorted by id, the cells of both compared as one family
    (:func:`judge_family`); a cell on one side only is an error (kind ``missing``)."""
    base_cells, head_cells = _group(base), _group(head)
    common = sorted(set(base_cells) & set(head_cells))
    family = judge_family(
        [(base_cells[i][0], base_cells[i][1], head_cells[i][1]) for i in common], settings=settings
    )
    compared = dict(zip(common, family.cells, strict=True))
    results = []
    for cell_id in sorted(set(base_cells) | set(head_cells)):
        if cell_id not in head_cells or cell_id not in base_cells:
            side, other = ("head", "base") if cell_id not in head_cells else ("base", "head")
            cell, samples = (base_cells if side == "head" else head_cells)[cell_id]
            ok = len(_ok(samples))
            counts: dict[str, Any] = {f"{other}_ok": ok, f"{other}_failed": len(samples) - ok}
            results.append(
                ComparedCell(
                    cell_id=cell_id,
                    cell=flatten_cell(cell),
                    verdict=Verdict.ERROR,
                    kind=Kind.MISSING,
                    reason=f"no {side} record of this cell ({other} has {len(samples)} samples): "
                    f"run it on {side} too",
                    rounds=len(samples),
                    counter_verdict=Verdict.ERROR,
                    **counts,
                )
            )
            continue
        results.append(compared[cell_id])
    return Family(results, family.settings)


@dataclass(frozen=True)
class Family:
    """Cells compared as one family of tests, and the settings they were judged with: under
    Holm's correction ``settings.comparisons`` is the number of tests made that can fail the
    comparison (at least 1), the one count of it that a comparison writes."""

    cells: list[ComparedCell]
    settings: Settings


class _Test(NamedTuple):
    """One test of a family: its cell's place in the groups (``at``), the metric, the values, together."""

    at: int
    name: str
    base: list[float]
    head: list[float]
    together: bool


def compare_family(
    groups: Sequence[tuple[CellInfo, Sequence[Sample], Sequence[Sample]]],
    *,
    settings: Settings,
) -> list[ComparedCell]:
    """:func:`judge_family`'s cells."""
    return judge_family(groups, settings=settings).cells


def judge_family(
    groups: Sequence[tuple[CellInfo, Sequence[Sample], Sequence[Sample]]],
    *,
    settings: Settings,
) -> Family:
    """Compare cells, each ``(cell, base samples, head samples)``, as one family of tests.

    With ``settings.correction == "holm"`` every test (``settings.test``, see
    :mod:`harness.compare.evidence`) whose verdict can fail the comparison (each gated metric of
    each cell, and each counter when ``changed_fails``) is one member of a family that shares
    ``settings.alpha``: their p values (:func:`~harness.compare.evidence.family_p`) are adjusted
    with Holm's step-down (:func:`~harness.compare.stats.holm_adjust`).  Counters that cannot fail
    it form a family of their own.  A test needs ``min_samples`` on both sides; a failed side tests
    nothing.  With ``"bonferroni"`` each test is judged at ``alpha_per_test`` as given.
    """
    if settings.correction != "holm":
        return Family([compare_cell(c, b, h, settings=settings) for c, b, h in groups], settings)
    families = _family_tests(groups, settings)
    adjusted: list[dict[str, float]] = [{} for _ in groups]
    for tests in families.values():
        # each test's p knows the levels of its family (Holm's alpha/m .. alpha)
        sized = _sized(settings, tests)
        p_values = [family_p(t.base, t.head, sized, together=t.together) for t in tests]
        for test, p_adj in zip(tests, holm_adjust(p_values), strict=True):
            adjusted[test.at][test.name] = p_adj
    settings = _sized(settings, families[True])
    cells = [
        compare_cell(cell, base, head, settings=settings, p_adjusted=adjusted[index])
        for index, (cell, base, head) in enumerate(groups)
    ]
    return Family(cells, settings)


def _family_tests(
    groups: Sequence[tuple[CellInfo, Sequence[Sample], Sequence[Sample]]], settings: Settings
) -> dict[bool, list[_Test]]:
    """The tests a family of cells makes, by whether their verdict can fail the comparison."""
    families: dict[bool, list[_Test]] = {True: [], False: []}
    for index, (cell, base, head) in enumerate(groups):
        base_ok, head_ok = _ok(base), _ok(head)
        if _fails(len(base_ok), len(base)) or _fails(len(head_ok), len(head)):
            continue
        gated = settings.gated_for(cell.get("gate_name"))
        for name in (*gated, *_counters(settings, gated)):
            b, h, _paired, together = _pairs(name, base_ok, head_ok)
            if len(b) < settings.min_samples or len(h) < settings.min_samples:
                continue
            fails = name in gated or settings.changed_fails
            families[fails].append(_Test(index, name, b, h, together))
    return families


def _sized(settings: Settings, tests: Sequence[_Test]) -> Settings:
    """``settings`` for a family of ``tests`` (at least one)."""
    return replace(settings, comparisons=max(len(tests), 1))


def start_kind(sample: Sample) -> str:
    """How a sample's guest started; records from before snapshot start were cold boots."""
    return sample.start


def mixed_starts(base: Iterable[Sample], head: Iterable[Sample]) -> str | None:
    """Why base and head samples must not be compared (their start kinds differ), or None.

    Boot time and the guest's state at the workload's start differ between
    a cold boot and a restore, so a comparison keeps them apart unless asked.
    """
    base_kinds = {start_kind(s) for s in base}
    head_kinds = {start_kind(s) for s in head}
    if base_kinds == head_kinds and len(base_kinds) <= 1:
        return None
    return (
        f"start kinds differ: base {'/'.join(sorted(base_kinds)) or 'none'}, "
        f"head {'/'.join(sorted(head_kinds)) or 'none'}; run both with the same --start"
    )

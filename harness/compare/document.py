"""The comparison (:class:`~harness.compare.model.Comparison`): built from the cells, and its
``comparison.json`` document checked when loaded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from harness.compare.axis import axis_sentence
from harness.compare.jsonpart import PartError
from harness.compare.model import (
    SCHEMA,
    VERSION,
    Budget,
    Canary,
    ChangedCell,
    ComparedCell,
    Comparison,
    HeldCell,
    KeptCell,
    Reach,
    SensitivityRow,
    Side,
    StructuralChange,
    Summary,
)
from harness.compare.pointers import Pointers, with_pointers
from harness.compare.rules import overall_verdict
from harness.compare.screen import with_screen
from harness.compare.settings import Settings
from harness.compare.subject import cell_id_changes, subject_diff
from harness.compare.verdict import Verdict
from harness.errors import UsageError
from harness.record.model import MachineInfo

__all__ = [
    "REQUIRED_KEYS",
    "SCHEMA",
    "VERSION",
    "build_comparison",
    "compared_cell",
    "fails",
    "load_document",
    "sensitivity",
    "validate_comparison",
    "with_policy_reach",
]


def compared_cell(result: ComparedCell) -> ComparedCell:
    """A cell as the comparison holds it: its time verdict said (``verdict`` where None), its short
    name and history graphs."""
    return with_pointers(replace(result, time_verdict=result.time_verdict or result.verdict))


@dataclass(frozen=True)
class Context:
    """What a comparison says beside its verdicts: the warnings of its making, what its summary
    points to, and a gate's host canary and budget."""

    warnings: Sequence[str] = ()
    pointers: Pointers | None = None
    canary: Canary | None = None
    budget: Budget | None = None


def build_comparison(
    cells: Sequence[ComparedCell],
    *,
    settings: Settings,
    base: Side,
    head: Side,
    machine: MachineInfo,
    created_at: str,
    context: Context | None = None,
) -> Comparison:
    """The comparison (schema ``diskbench-comparison`` version 2, docs/comparison.md).

    ``settings``: those the cells were judged with (a family's, :class:`~harness.compare.rules.Family`),
    written as they are.
    ``pointers``: the history pages' URL and the command that reproduces the comparison, for the
    summary and the comment (each cell gets its short name and history graphs whatever they are).
    Each cell's ``lead`` and ``summary.screen`` say what every summary shows first and in which
    order (:mod:`harness.compare.screen`).
    """
    counts = {v.value: 0 for v in Verdict}
    for cell in cells:
        counts[cell.verdict.value] += 1
    verdict = overall_verdict(cells)
    compared = tuple(compared_cell(c) for c in cells)
    context = context or Context()
    warnings, canary, budget = context.warnings, context.canary, context.budget
    pointers = context.pointers or Pointers()
    summary = Summary(
        cells=len(cells),
        counts=counts,
        structural_changes=tuple(
            StructuralChange(cell_id=c.cell_id, note=c.note) for c in cells if c.note.startswith("structural")
        ),
        axis_sentence=axis_sentence(cells),
        fails=fails(verdict, settings),
        changed=tuple(
            ChangedCell(
                cell_id=c.cell_id,
                name=c.cell.gate_name or c.cell_id,
                counters=tuple(
                    m.change_text()
                    for m in c.counters
                    if m.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
                ),
            )
            for c in cells
            if c.counter_verdict is Verdict.CHANGED
        ),
        subject_diff=tuple(subject_diff(base, head)),
        cell_id_changes=tuple(cell_id_changes(compared)),
        sensitivity=sensitivity(cells),
    )
    comparison = Comparison(
        created_at=created_at,
        verdict=verdict,
        accel=str(machine.accel or "unknown"),
        summary=summary,
        warnings=tuple(warnings),
        base=base,
        head=head,
        machine=machine,
        settings=settings.used(),
        canary=canary,
        budget=budget,
        pages_url=pointers.pages_url,
        reproduce=pointers.reproduce or None,
        cells=compared,
    )
    return with_screen(comparison)


class PolicyLine(Protocol):
    """A value that differs between the sides' policies and the gate cells it reached."""

    @property
    def what(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def applied(self) -> tuple[str, ...]: ...

    @property
    def kept(self) -> tuple[KeptCell, ...]: ...


class PolicyReach(Protocol):
    """Where each difference of a gate's two policies applied (:class:`harness.gate.reach.PolicyReach`)."""

    @property
    def keys(self) -> tuple[PolicyLine, ...]: ...

    @property
    def held(self) -> tuple[HeldCell, ...]: ...

    @property
    def untouched(self) -> tuple[str, ...]: ...


def with_policy_reach(
    comparison: Comparison, cells: Sequence[ComparedCell], reach: PolicyReach
) -> Comparison:
    """``comparison`` with where each difference of the policies applied (a gate's ``reach``, see
    :mod:`harness.gate.reach`): each policy line of the subject diff gets the cells it applied to
    and the ones that kept another value (``reach``, and ``where`` in words), the summary the cells
    that hold back a value of their side's policy (``policy_held``) and those no difference reached
    (``untouched``); the axis sentence counts only cells that a difference reached."""
    summary = comparison.summary
    by_what = {line.what: line for line in reach.keys}
    diff = []
    for entry in summary.subject_diff or ():
        line = by_what.get(entry.what)
        if line is None:
            diff.append(entry)
            continue
        diff.append(replace(entry, where=line.where, reach=Reach(applied=line.applied, kept=line.kept)))
    # only a policy's values can leave a cell alike on both sides: a QEMU or guest difference reaches all
    untouched = reach.untouched if all(entry.what in by_what for entry in diff) else ()
    sentence = summary.axis_sentence
    if untouched:
        sentence = axis_sentence([c for c in cells if (c.cell.gate_name or c.cell_id) not in untouched])
    summary = replace(
        summary,
        subject_diff=tuple(diff),
        axis_sentence=sentence,
        policy_held=tuple(reach.held),
        untouched=tuple(untouched),
    )
    return replace(comparison, summary=summary)


def sensitivity(cells: Sequence[ComparedCell]) -> tuple[SensitivityRow, ...]:
    """Per cell and gated metric: the smallest change it could have caught (percent) at its
    rounds, never below the metric's minimum effect (a counter with no spread "sees" 0 %, but
    nothing below the minimum effect ever fails), and for an inconclusive metric about how many
    rounds per side would decide it."""
    return tuple(
        SensitivityRow(
            cell_id=c.cell_id,
            name=c.cell.gate_name or c.cell_id,
            measure=c.cell.measure or "guest",
            metric=m.metric,
            rounds=min(m.n_base, m.n_head),
            verdict=m.verdict,
            could_see_pct=_at_least_effect(m.could_see_pct, m.min_effect),
            rounds_to_decide=m.rounds_to_decide,
        )
        for c in cells
        for m in c.metrics
    )


def _at_least_effect(pct: float | None, min_effect: float) -> float | None:
    return None if pct is None else max(pct, round(min_effect * 100.0, 2))


def fails(verdict: Verdict, settings: Settings) -> bool:
    """Whether the overall verdict fails the comparison (exit 1): a regression, or a change
    of the IO when ``settings.changed_fails``."""
    return verdict is Verdict.REGRESSION or (verdict is Verdict.CHANGED and settings.changed_fails)


REQUIRED_KEYS: dict[str, type | tuple[type, ...]] = {
    "created_at": str,
    "verdict": str,
    "accel": str,
    "summary": dict,
    "warnings": list,
    "base": dict,
    "head": dict,
    "machine": dict,
    "settings": dict,
    "canary": (dict, type(None)),
    "budget": (dict, type(None)),
    "cells": list,
}


def validate_comparison(data: Any, *, source: str) -> dict[str, Any]:
    """Check a loaded document's schema, version and top-level keys; ``source`` names it in errors."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(
            f"{source} is not a diskbench comparison: pass the comparison.json of `diskbench compare`"
        )
    version = data.get("version")
    if version != VERSION:
        raise UsageError(
            f"comparison {source} has version {version!r}, this diskbench reads version {VERSION}: "
            "run `diskbench compare` again with this version"
        )
    for key, kind in REQUIRED_KEYS.items():
        if not isinstance(data.get(key, ...), kind):
            raise UsageError(
                f"comparison {source} lacks {key!r} or it is malformed: run `diskbench compare` again"
            )
    if data["verdict"] not in {v.value for v in Verdict}:
        raise UsageError(f"comparison {source} has an unknown verdict {data['verdict']!r}: run it again")
    return data


def load_document(data: Any, *, source: str) -> Comparison:
    """The comparison of a loaded ``comparison.json`` document: checked (:func:`validate_comparison`),
    then read into its parts; a part of the wrong kind is a UsageError naming the field."""
    checked = validate_comparison(data, source=source)
    try:
        return Comparison.from_json(checked)
    except PartError as exc:
        raise UsageError(f"comparison {source}: {exc}: run `diskbench compare` again") from None

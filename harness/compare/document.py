"""The ``comparison.json`` document: built from the cells, and checked when loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.compare.axis import axis_sentence
from harness.compare.pointers import Pointers, cell_pointers
from harness.compare.rules import CellResult, overall_verdict
from harness.compare.screen import with_screen
from harness.compare.settings import Settings
from harness.compare.subject import cell_id_changes, subject_diff
from harness.compare.verdict import Verdict
from harness.errors import UsageError

SCHEMA = "diskbench-comparison"
# 2: the verdict "changed" (kind "counter"), Holm's correction, the subject diff, the canary's
# voided/kept lists; a reader of version 1 would misread a changed cell, so it must refuse
VERSION = 2


def build_comparison(
    cells: Sequence[CellResult],
    *,
    settings: Settings,
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    machine: Mapping[str, Any],
    canary: Mapping[str, Any] | None = None,
    budget: Mapping[str, Any] | None = None,
    created_at: str,
    warnings: Sequence[str] = (),
    pointers: Pointers | None = None,
) -> dict[str, Any]:
    """The ``comparison.json`` document (schema ``diskbench-comparison`` version 2, docs/comparison.md).

    ``pointers``: the history pages' URL and the command that reproduces the comparison, for the
    summary and the comment (each cell gets its short name and history graphs whatever they are).
    Each cell's ``lead`` and ``summary.screen`` say what every summary shows first and in which
    order (:mod:`harness.compare.screen`).
    """
    counts = {v.value: 0 for v in Verdict}
    for cell in cells:
        counts[cell.verdict.value] += 1
    verdict = overall_verdict(cells)
    cell_docs = [{**doc, **cell_pointers(doc)} for doc in (c.as_dict() for c in cells)]
    if settings.correction == "holm":
        # the family Holm's correction was applied to: the tests that can fail the comparison
        family = [
            m
            for c in cells
            for m in (*c.metrics, *(c.counters if settings.changed_fails else ()))
            if m.p_adjusted is not None
        ]
        if family:
            settings = replace(settings, comparisons=len(family))
    doc = {
        "schema": SCHEMA,
        "version": VERSION,
        "created_at": created_at,
        "verdict": verdict.value,
        "accel": str(machine.get("accel") or "unknown"),
        "summary": {
            "cells": len(cells),
            "counts": counts,
            "structural_changes": [
                {"cell_id": c.cell_id, "note": c.note} for c in cells if c.note.startswith("structural")
            ],
            "axis_sentence": axis_sentence(cells),
            "fails": fails(verdict, settings),
            "changed": [
                {
                    "cell_id": c.cell_id,
                    "name": str(c.cell.get("gate_name") or c.cell_id),
                    "counters": [
                        m.change_text()
                        for m in c.counters
                        if m.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
                    ],
                }
                for c in cells
                if c.counter_verdict is Verdict.CHANGED
            ],
            "subject_diff": subject_diff(base, head),
            "cell_id_changes": cell_id_changes(cell_docs),
            "sensitivity": sensitivity(cells),
        },
        "warnings": list(warnings),
        "base": dict(base),
        "head": dict(head),
        "machine": dict(machine),
        "settings": settings.as_dict(),
        "canary": dict(canary) if canary is not None else None,
        "budget": dict(budget) if budget is not None else None,
        **(pointers or Pointers()).as_dict(),
        "cells": cell_docs,
    }
    return with_screen(doc)


def with_policy_reach(
    document: dict[str, Any], cells: Sequence[CellResult], reach: Mapping[str, Any]
) -> dict[str, Any]:
    """``document`` with where each difference of the policies applied (a gate's ``reach``, see
    :mod:`harness.gate.reach`): each policy line of the subject diff gets the cells it applied to
    and the ones that kept another value (``reach``, and ``where`` in words), the summary the cells
    that hold back a value of their side's policy (``policy_held``) and those no difference reached
    (``untouched``); the axis sentence counts only cells that a difference reached."""
    summary = dict(document["summary"])
    by_what = {str(k["what"]): k for k in reach.get("keys") or []}
    diff = []
    for entry in summary.get("subject_diff") or []:
        key = by_what.get(entry["what"])
        if key is None:
            diff.append(entry)
            continue
        diff.append(
            {
                **entry,
                "where": key["where"],
                "reach": {"applied": list(key["applied"]), "kept": list(key["kept"])},
            }
        )
    summary["subject_diff"] = diff
    summary["policy_held"] = list(reach.get("held") or [])
    untouched = [str(n) for n in reach.get("untouched") or []]
    # only a policy's values can leave a cell alike on both sides: a QEMU or guest difference reaches all
    if any(entry["what"] not in by_what for entry in diff):
        untouched = []
    summary["untouched"] = untouched
    if untouched:
        reached = [c for c in cells if str(c.cell.get("gate_name") or c.cell_id) not in untouched]
        summary["axis_sentence"] = axis_sentence(reached)
    return {**document, "summary": summary}


def sensitivity(cells: Sequence[CellResult]) -> list[dict[str, Any]]:
    """Per cell and gated metric: the smallest change it could have caught (percent) at its
    rounds, and for an inconclusive metric about how many rounds per side would decide it."""
    return [
        {
            "cell_id": c.cell_id,
            "name": str(c.cell.get("gate_name") or c.cell_id),
            "measure": str(c.cell.get("measure") or "guest"),
            "metric": m.metric,
            "rounds": min(m.n_base, m.n_head),
            "verdict": m.verdict.value,
            "could_see_pct": m.as_dict()["could_see_pct"],
            "rounds_to_decide": m.rounds_to_decide,
        }
        for c in cells
        for m in c.metrics
    ]


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

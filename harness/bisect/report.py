"""What a bisection prints: each comparison's evidence, the answer, the table of the range.  Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from harness.bisect.classify import CellVerdict
from harness.bisect.search import Found, Outcome
from harness.bisect.state import BisectState, Step
from harness.compare.model import ComparedCell, Figures
from harness.compare.text import pct
from harness.compare.verdict import Kind


def evidence_lines(cells: Sequence[ComparedCell]) -> list[str]:
    """One line per cell of a gate run's :class:`~harness.compare.ComparedCell`: its verdict, rounds
    and every gated metric's change with its interval and adjusted p."""
    lines = []
    for cell in cells:
        name = cell.cell.gate_name or cell.cell_id
        kind = "" if cell.kind is Kind.METRIC else f" ({cell.kind})"
        figures = [_metric(m) for m in cell.metrics if m.head_over_base is not None]
        detail = "; ".join(figures) if figures else cell.reason
        lines.append(f"{name}: {cell.verdict}{kind} after {cell.rounds} round(s): {detail}")
    return lines


def _metric(m: Figures) -> str:
    p = m.p_adjusted if m.p_adjusted is not None else m.p_value
    ci = "" if m.ci_low is None or m.ci_high is None else f" [{pct(m.ci_low)}, {pct(m.ci_high)}]"
    return f"{m.change_text()}{ci}{'' if p is None else f' p={p:.2g}'} {m.verdict}"


def _verdicts(verdicts: Mapping[str, CellVerdict]) -> str:
    if not verdicts:
        return "-"
    if len(verdicts) == 1:
        return str(next(iter(verdicts.values())).verdict)
    return ", ".join(f"{name} {v.verdict}" for name, v in verdicts.items())


def render_end(found: Found | None, state: BisectState, *, title: Callable[[str], str]) -> str:
    """The answer: the first bad commit with its verdicts against both ends, or the commits it can be."""
    if found is None:
        return "the search did not end\n"
    steps = {s.commit: s for s in state.steps}
    if found.first_bad is not None:
        commit = found.first_bad
        lines = [f"first bad commit: {commit} {title(commit)}"]
        step = steps.get(commit)
        if step is None:
            lines.append("  (the bad end itself: every commit before it was measured good)")
        else:
            lines.append(f"  verdict: {step.outcome} ({step.reason})")
            lines += [f"  {line}" for line in step.evidence]
        return "\n".join(lines) + "\n\n"
    lines = ["only skipped commits are left: the first bad commit is one of"]
    lines += [f"  {c} {title(c)}" for c in found.candidates]
    return "\n".join(lines) + "\n\n"


def render_table(state: BisectState, *, title: Callable[[str], str]) -> str:
    """Every commit of the range, oldest first: the step that measured it, its outcome, its verdicts
    against good and against bad."""
    steps: dict[str, tuple[int, Step]] = {s.commit: (i, s) for i, s in enumerate(state.steps, start=1)}
    rows = [("", "commit", "step", "outcome", "against good", "against bad", "title")]
    rows.append(("good", state.good[:12], "", "good", "", "", title(state.good)))
    for i, commit in enumerate(state.commits, start=1):
        number, step = steps.get(commit, (0, None))
        end = commit == state.bad
        outcome = step.outcome.value if step else ("bad" if end else "")
        rows.append(
            (
                "bad" if end else str(i),
                commit[:12],
                str(number) if number else "",
                outcome,
                _verdicts(step.vs_good) if step else "",
                _verdicts(step.vs_bad) if step else "",
                title(commit),
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
        for row in rows
    ]
    counts = {o: sum(1 for s in state.steps if s.outcome is o) for o in Outcome}
    lines.append(
        f"{len(state.steps)} step(s): {counts[Outcome.GOOD]} good, {counts[Outcome.BAD]} bad, "
        f"{counts[Outcome.SKIP]} skipped; {sum(s.elapsed_s for s in state.steps) / 60:.1f} min measuring"
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"

"""The change points as a person reads them: an aligned text table per machine, or JSON.  Pure."""

from __future__ import annotations

import json
from collections.abc import Sequence

from harness.history.changes.find import Change, Settings
from harness.units import human

HEADERS = ("cell", "metric", "commit", "before → after", "confidence", "cause")


def step_text(change: Change) -> str:
    """``12.40 s → 30.12 s (+143 %)``."""
    unit = change.series.unit
    words = f"{human(change.before, unit)} → {human(change.after, unit)}"
    if change.before:
        words += f" ({(change.after / change.before - 1) * 100:+.0f} %)"
    return words


def confidence_text(change: Change) -> str:
    return f"{change.confidence * 100:.1f} %"


def rows(changes: Sequence[Change]) -> list[tuple[str, ...]]:
    return [
        (c.series.cell, c.series.metric, c.commit[:12], step_text(c), confidence_text(c), c.cause)
        for c in changes
    ]


def aligned(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return lines


def settings_line(settings: Settings) -> str:
    effect = (
        "the asv config's regressions_thresholds"
        if settings.min_effect is None
        else f"{settings.min_effect:g}"
    )
    return (
        f"significance {settings.alpha:g} (Holm over each round's segments, {settings.permutations} "
        f"permutations), minimum segment {settings.min_segment} commits, minimum step {effect}"
    )


def render_text(changes: Sequence[Change], settings: Settings, *, series_count: int) -> str:
    """One table per machine, its change points by commit order; a line when there is none."""
    out = [f"change points in {series_count} series: {settings_line(settings)}"]
    if not changes:
        out.append("no change point")
        return "\n".join(out) + "\n"
    machines = sorted({c.series.machine for c in changes})
    for machine in machines:
        mine = [c for c in changes if c.series.machine == machine]
        out += ["", f"machine {machine}: {len(mine)} change point(s)", *aligned(HEADERS, rows(mine))]
    return "\n".join(out) + "\n"


def render_json(changes: Sequence[Change], settings: Settings, *, series_count: int) -> str:
    return (
        json.dumps(
            {
                "settings": {
                    "alpha": settings.alpha,
                    "min_segment": settings.min_segment,
                    "min_effect": settings.min_effect,
                    "permutations": settings.permutations,
                },
                "series": series_count,
                "changes": [c.as_dict() for c in changes],
            },
            indent=1,
        )
        + "\n"
    )

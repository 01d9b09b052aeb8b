"""Who measures: when the head's guest is not base's, the gate decides on what the host sees.

The guest's init and workload scripts report ``total_s``, the phases and the
raw output fio's figures are parsed from; a pull request that changes
``images/`` changes them, and could make its own figures say anything (divide
its ``total_s`` by ten).  So when the two sides' guests differ (their recipe
hashes: the recipe, ``init``, the workload scripts), no verdict rests on a
figure the head's guest reports: each such gated metric gives way to the
workload's time as the host clocks it (``host.workload_s``), beside the
figures of QEMU's accounting and ``/proc`` (``dev.*``, ``host.*``), which
stay.  The guest's figures are still compared, and shown as the guest's own
word, never gated; the summary says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness.compare import Settings
from harness.compare.model import GuestWord, GuestWordRow
from harness.compare.text import format_value
from harness.errors import UsageError
from harness.record import Sample
from harness.untrusted import inert_markdown
from harness.workloads import metric_info

# namespaces of the figures the host measures itself (QEMU's accounting, /proc, its clock, and
# the native replay of a request stream, timed by the side's own qemu-io)
HOST_NAMESPACES = ("host.", "dev.", "replay.")
# the host's clock of the workload: what a guest's own time gives way to
HOST_TIME = "host.workload_s"


def guest_reported(metric: str) -> bool:
    """Whether ``metric`` is a figure the guest reports or the host parses from the guest's output."""
    return not metric.startswith(HOST_NAMESPACES)


@dataclass(frozen=True)
class Judge:
    """What decides a gate: ``settings``, and the guest figures shown as the guest's own word."""

    settings: Settings
    guest_differs: bool = False
    base_guest: str = ""
    head_guest: str = ""
    # gated metrics the head's guest reports, left out of the verdict
    guest_word: tuple[str, ...] = ()

    @property
    def warnings(self) -> list[str]:
        if not self.guest_differs:
            return []
        return [
            f"head's guest ({self.head_guest[:12]}) is not base's ({self.base_guest[:12]}): the verdict rests on "
            f"what the host measures ({', '.join(self.settings.metrics)}), not on figures the head's guest "
            f"reports ({', '.join(self.guest_word) or 'none gated'}); those are the guest's own word, shown "
            "below and never gated"
        ]


def decide_judge(settings: Settings, *, base_guest: str, head_guest: str) -> Judge:
    """``settings`` as given when both guests are the same; else the host's figures in place of the
    guest's (:data:`HOST_TIME` for any guest-reported metric)."""
    if base_guest == head_guest:
        return Judge(settings=settings, base_guest=base_guest, head_guest=head_guest)
    dropped = tuple(m for m in settings.metrics if guest_reported(m))
    kept = [m for m in settings.metrics if not guest_reported(m)]
    if dropped and HOST_TIME not in kept:
        kept.insert(0, HOST_TIME)
    return Judge(
        settings=replace(settings, metrics=tuple(kept)),
        guest_differs=True,
        base_guest=base_guest,
        head_guest=head_guest,
        guest_word=dropped,
    )


def guest_word_document(
    judge: Judge, cells: Sequence[tuple[str, Sequence[Sample], Sequence[Sample]]]
) -> GuestWord | None:
    """The guest's own figures per cell (name, base samples, head samples): medians of the ok
    samples and their change, for the summary; None when the guests are the same."""
    if not judge.guest_differs:
        return None
    rows = []
    for name, base, head in cells:
        for metric in judge.guest_word:
            b, h = _median(base, metric), _median(head, metric)
            if b is None and h is None:
                continue
            change = None if b in (None, 0) or h is None else (h / b - 1) * 100
            rows.append(
                GuestWordRow(cell=name, metric=metric, median_base=b, median_head=h, change_pct=change)
            )
    return GuestWord(
        base_guest=judge.base_guest,
        head_guest=judge.head_guest,
        gated_instead=judge.settings.metrics,
        metrics=judge.guest_word,
        rows=tuple(rows),
    )


def _median(samples: Sequence[Sample], metric: str) -> float | None:
    values = [
        float(s.metrics[metric]) for s in samples if s.ok and isinstance(s.metrics.get(metric), (int, float))
    ]
    return statistics.median(values) if values else None


def render_guest_word(word: GuestWord | None) -> str:
    """The summary's section of the guest's own word (empty when the guests are the same)."""
    if word is None:
        return ""
    lines = [
        "### The head's guest's own word (not gated)",
        "",
        "The head brings another guest than base: these figures are what each side's guest reports "
        "of itself. The verdict above rests on the host's figures alone "
        f"({', '.join(inert_markdown(m) for m in word.gated_instead)}).",
        "",
    ]
    rows = word.rows
    if not rows:
        return "\n".join([*lines, "- no figure of the guest's in the samples", ""]) + "\n"
    lines += ["| cell | metric (guest's word) | base | head | change |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        unit = _unit(row.metric)
        change = row.change_pct
        lines.append(
            "| "
            + " | ".join(
                inert_markdown(x)
                for x in (
                    row.cell,
                    row.metric,
                    format_value(row.median_base, unit),
                    format_value(row.median_head, unit),
                    "n/a" if change is None else f"{change:+.1f}%",
                )
            )
            + " |"
        )
    return "\n".join([*lines, ""]) + "\n"


def _unit(metric: str) -> str:
    try:
        return metric_info(metric).unit
    except UsageError:  # an unknown name is shown without a unit
        return ""

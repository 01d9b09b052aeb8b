"""The verdicts' order lives in one place (harness/compare/verdict.py): the reductions of a cell's
metrics and of a comparison's cells use its severity, every tally its tally order, and the
action's TypeScript lists the verdicts in that same order."""

from __future__ import annotations

import re

from harness.compare.rules import overall_verdict
from harness.compare.verdict import SEVERITY, TALLY, Verdict, worst
from harness.paths import REPO_ROOT

ACTION = REPO_ROOT / ".github" / "actions" / "gate-comment" / "src"


def _ts_list(path: str, name: str) -> list[str]:
    text = (ACTION / path).read_text()
    match = re.search(rf"{name}[^=]*=\s*\[([^\]]*)\]", text)
    assert match, f"{name} in {path}"
    return re.findall(r"'([a-z-]+)'", match.group(1))


def test_every_verdict_has_one_place_in_each_order() -> None:
    assert sorted(SEVERITY) == sorted(Verdict) == sorted(TALLY)


def test_the_actions_order_is_the_tally_order() -> None:
    tally = [v.value for v in TALLY]
    assert _ts_list("render.ts", "const ORDER") == tally
    assert _ts_list("comparison.ts", "export const VERDICTS") == tally


def test_the_reductions_follow_the_severity() -> None:
    for i, worse in enumerate(SEVERITY):
        for better in SEVERITY[i:]:
            assert worst([better, worse]) is worse

    class Cell:
        def __init__(self, verdict: Verdict) -> None:
            self.verdict = verdict

    assert overall_verdict([Cell(Verdict.IMPROVEMENT), Cell(Verdict.ERROR)]) is Verdict.ERROR  # type: ignore[list-item]
    assert overall_verdict([]) is Verdict.UNCHANGED
    assert worst([]) is Verdict.UNCHANGED

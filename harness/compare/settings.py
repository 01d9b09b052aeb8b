"""How a comparison decides (:class:`Settings`), and the rules of minimum effect."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.compare.model import SettingsUsed
from harness.errors import UsageError
from harness.workloads import metric_info

CORRECTIONS = ("holm", "bonferroni")
# the test of each cell x metric: the exact rank test, with Yuen's trimmed-mean t on log values
# for the level the rank test cannot use (harness.compare.evidence), or the Mann-Whitney rank test
# alone as before (normal approximation under ties), whose p has a floor at small n (8 + 8
# rounds: 1.6e-4, more with ties)
TESTS = ("rank-yuen", "mann-whitney")

# Counters of the work the IO path did, not of its speed: with the same guest and policy they
# barely move, so a move beyond their threshold means the IO itself changed (a cache mode that
# drops the guest's flushes, a format that writes more metadata, a guest that writes more).
# Not the request counts (dev.write_ops): the guest merges requests as timing allows, 85 to 102
# writes between two samples of the same dd cell here.
STRUCTURAL_COUNTERS: tuple[str, ...] = (
    "host.write_amplification",
    "host.flushes",
    "host.guest_written_bytes",
)


@dataclass(frozen=True)
class Settings:
    """How the comparison decides; written into comparison.json as they were."""

    metrics: tuple[str, ...] = ("total_s",)
    # structural counters: a move beyond their threshold is the verdict ``changed``
    counters: tuple[str, ...] = STRUCTURAL_COUNTERS
    min_effect: float = 0.05
    counter_min_effect: float = 0.02
    min_effect_by_metric: Mapping[str, float] = field(default_factory=dict)
    # family-wise: shared by ``comparisons`` tests, so that a gate of many cells does not cry
    # wolf more often than one of a single cell: Holm's step-down (``correction="holm"``, the
    # default of a family of cells) or Bonferroni (alpha / comparisons for every test)
    alpha: float = 0.01
    confidence: float = 0.95
    bootstrap: int = 2000
    seed: int = 0
    min_samples: int = 4
    comparisons: int = 1
    correction: str = "holm"
    # the test whose p the family's correction adjusts: one of TESTS
    test: str = "rank-yuen"
    # whether the verdict ``changed`` fails the comparison (exit 1); counters that cannot fail it
    # are a family of their own
    changed_fails: bool = True
    # compare samples of different start kinds (cold boot, snapshot restore): off, they are an error
    mix_starts: bool = False
    # the gated metrics of a cell where not ``metrics``, by the cell's gate name (a gate spec's
    # cells gate what can decide within the budget); the others are shown as information
    cell_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # why a metric is not gated (shown beside its figures, never deciding), by metric
    information: Mapping[str, str] = field(default_factory=dict)
    # how much sharing one CPU shrinks a change of a guest pair taken together (harness.sample.pairing):
    # its log ratio and interval are scaled by this to the size the change has alone, at worst
    together_shrink: float = 2.0
    # what a guest pair taken crossed (each side a CPU of its own, swapped) reads of a change's size
    # alone, on logs, at least and at most (docs/calibration.md): such a pair's figure is unchanged
    # only within (1 + m) ** low - 1 (5 % -> 1.7 %), so that a change of 5 % alone is never called
    # unchanged, and a regression or an improvement only beyond (1 + m) ** high - 1 (5 % -> 7.6 %),
    # so that a change below 5 % alone never fails; between, inconclusive; its size alone is said as
    # the interval its interval's ends stand for
    crossed_reads: tuple[float, float] = (0.35, 1.5)

    @property
    def alpha_per_test(self) -> float:
        """The significance level of each test: ``alpha / comparisons``."""
        return self.alpha / max(self.comparisons, 1)

    def __post_init__(self) -> None:
        # a copy: the caller's dict cannot change a frozen Settings afterwards
        object.__setattr__(self, "min_effect_by_metric", dict(self.min_effect_by_metric))
        object.__setattr__(self, "cell_metrics", {k: tuple(v) for k, v in self.cell_metrics.items()})
        object.__setattr__(self, "information", dict(self.information))
        low, high = self.crossed_reads
        if not crossed_reads_ok(low, high):
            raise UsageError(
                f"crossed reads {low:g}-{high:g}: use a low factor from 0.1 to 1 and a high one from 1 to 10"
            )
        if not 1.0 <= self.together_shrink <= 4.0:
            raise UsageError(f"together shrink {self.together_shrink:g}: use a factor from 1 to 4")
        for name, gated in self.cell_metrics.items():
            if not gated:
                raise UsageError(f"cell {name!r} gates no metric: give it at least one")
        if not self.metrics:
            raise UsageError("no gated metric: give at least one (--metric total_s)")
        for name, value in (
            ("min effect", self.min_effect),
            ("counter min effect", self.counter_min_effect),
            *((f"min effect of {m}", v) for m, v in self.min_effect_by_metric.items()),
        ):
            if not 0 <= value < 10:
                raise UsageError(f"{name} {value * 100:g}%: use 0% or more, below 1000%")
        if not 0 < self.alpha < 1:
            raise UsageError(f"alpha {self.alpha:g}: use a value between 0 and 1, e.g. 0.05")
        if not 0 < self.confidence < 1:
            raise UsageError(f"confidence {self.confidence:g}: use a value between 0 and 1, e.g. 0.95")
        if self.bootstrap < 100:
            raise UsageError(f"bootstrap {self.bootstrap}: use 100 resamples or more")
        if self.min_samples < 2:
            raise UsageError(f"min_samples {self.min_samples}: use 2 or more")
        if self.correction not in CORRECTIONS:
            raise UsageError(f"correction {self.correction!r}: use {' or '.join(CORRECTIONS)}")
        if self.test not in TESTS:
            raise UsageError(f"test {self.test!r}: use {' or '.join(TESTS)}")

    def gated_for(self, gate_name: object) -> tuple[str, ...]:
        """The gated metrics of the cell a gate spec names ``gate_name`` (None: not a gate's cell)."""
        return self.cell_metrics.get(str(gate_name), self.metrics) if gate_name is not None else self.metrics

    def information_for(self, gate_name: object) -> dict[str, str]:
        """The metrics shown for a cell as information, not gated there, with the reason."""
        gated = self.gated_for(gate_name)
        names = [*self.metrics, *self.information, *(m for ms in self.cell_metrics.values() for m in ms)]
        return {
            m: self.information.get(m) or f"not gated in this cell, which gates {', '.join(gated)}"
            for m in dict.fromkeys(names)
            if m not in gated
        }

    def effect_for(self, metric: str) -> float:
        """The minimum effect of ``metric``: its rule, else the counters' or the metrics' default."""
        if metric in self.min_effect_by_metric:
            return self.min_effect_by_metric[metric]
        return self.counter_min_effect if metric in self.counters else self.min_effect

    def used(self) -> SettingsUsed:
        """These settings as the comparison writes them (with ``alpha_per_test``)."""
        return SettingsUsed(
            metrics=self.metrics,
            counters=self.counters,
            min_effect=self.min_effect,
            counter_min_effect=self.counter_min_effect,
            min_effect_by_metric=dict(sorted(self.min_effect_by_metric.items())),
            alpha=self.alpha,
            confidence=self.confidence,
            bootstrap=self.bootstrap,
            seed=self.seed,
            min_samples=self.min_samples,
            comparisons=self.comparisons,
            alpha_per_test=self.alpha_per_test,
            correction=self.correction,
            test=self.test,
            changed_fails=self.changed_fails,
            cell_metrics={k: tuple(v) for k, v in sorted(self.cell_metrics.items())},
            information=dict(sorted(self.information.items())),
            together_shrink=self.together_shrink,
            crossed_reads=self.crossed_reads,
        )


def crossed_reads_ok(low: float, high: float) -> bool:
    """Whether ``[low, high]`` can be what a crossed pair reads of a change's size alone: a low
    factor from 0.1 to 1, a high one from 1 to 10."""
    return 0.1 <= low <= 1.0 <= high <= 10.0


def parse_percent(text: str, *, what: str) -> float:
    """``"5"``, ``"5%"`` or ``"+5%"`` -> 0.05; ``what`` names the input in the error."""
    raw = text.strip().removesuffix("%").strip().removeprefix("+")
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a percentage: write e.g. 5 or 5%") from None
    if not math.isfinite(value) or value < 0 or value >= 1000:
        raise UsageError(f"{what} {text!r}: use a percentage of 0 or more, below 1000")
    return value / 100.0


def parse_rule(text: str, *, what: str = "rule") -> tuple[str, float]:
    """``"total_s:5%"`` -> ``("total_s", 0.05)``: the minimum effect of one metric.

    ``what`` names the input in errors (``"--rule"`` on the command line).
    """
    name, sep, pct = text.rpartition(":")
    name = name.strip()
    if not sep or not name or not pct.strip():
        raise UsageError(f"{what} {text!r}: write METRIC:PERCENT, e.g. total_s:5%")
    try:
        metric_info(name)
    except UsageError as exc:
        raise UsageError(f"{what} {text!r}: {exc.message}") from None
    try:
        return name, parse_percent(pct, what="percentage")
    except UsageError:
        raise UsageError(
            f"{what} {text!r}: {pct.strip()!r} is not a percentage of 0 or more: write e.g. {name}:5%"
        ) from None


def check_gated_metric(name: str) -> str:
    """A metric that can be gated: known, and not informational (bytes, files...)."""
    info = metric_info(name)
    if info.informational:
        raise UsageError(
            f"metric {name!r} describes the work done, it is not a cost: gate a time such as total_s"
        )
    return name

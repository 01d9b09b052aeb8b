"""How a comparison decides (:class:`Settings`), the rules of minimum effect and the command-line options."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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

    @property
    def alpha_per_test(self) -> float:
        """The significance level of each test: ``alpha / comparisons``."""
        return self.alpha / max(self.comparisons, 1)

    def __post_init__(self) -> None:
        # a copy: the caller's dict cannot change a frozen Settings afterwards
        object.__setattr__(self, "min_effect_by_metric", dict(self.min_effect_by_metric))
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

    def effect_for(self, metric: str) -> float:
        """The minimum effect of ``metric``: its rule, else the counters' or the metrics' default."""
        if metric in self.min_effect_by_metric:
            return self.min_effect_by_metric[metric]
        return self.counter_min_effect if metric in self.counters else self.min_effect

    def as_dict(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics),
            "counters": list(self.counters),
            "min_effect": self.min_effect,
            "counter_min_effect": self.counter_min_effect,
            "min_effect_by_metric": dict(sorted(self.min_effect_by_metric.items())),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "min_samples": self.min_samples,
            "comparisons": self.comparisons,
            "alpha_per_test": self.alpha_per_test,
            "correction": self.correction,
            "test": self.test,
            "changed_fails": self.changed_fails,
        }


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


def add_compare_options(parser: Any) -> None:
    """The statistical options of a comparison (``compare`` and ``gate``).

    An option the parser already has (``gate`` has its own ``--seed``) is
    left as the parser defined it.
    """
    group = parser.add_argument_group("how base and head are compared")
    options: list[tuple[str, dict[str, Any]]] = [
        (
            "--metric",
            {
                "action": "append",
                "default": None,
                "metavar": "NAME",
                "help": "a gated metric (repeatable; default total_s): its regression fails the comparison",
            },
        ),
        (
            "--min-effect",
            {
                "default": "5%",
                "metavar": "PCT",
                "help": "smallest change that counts as a regression or improvement, e.g. 5 or 5%% "
                "(default 5%%)",
            },
        ),
        (
            "--rule",
            {
                "action": "append",
                "default": [],
                "metavar": "METRIC:PCT",
                "help": "the minimum effect of one metric, e.g. total_s:3%% or host.flushes:1%% (repeatable)",
            },
        ),
        (
            "--alpha",
            {
                "type": float,
                "default": Settings.alpha,
                "help": "family-wise significance level of the Mann-Whitney U tests that can fail the "
                "comparison (every cell x gated metric and structural counter), kept with Holm's "
                "step-down correction (default 0.01)",
            },
        ),
        (
            "--changed-passes",
            {
                "action": "store_true",
                "default": None,
                "help": "a change of a structural counter (verdict changed: flushes, write amplification, "
                "bytes written) is reported but does not fail (exit 0)",
            },
        ),
        (
            "--mix-starts",
            {
                "action": "store_true",
                "default": None,
                "help": "compare samples whose guests started differently (cold boot and snapshot restore); "
                "without it such a cell is an error (kind mixed-start)",
            },
        ),
        (
            "--seed",
            {
                "type": int,
                "default": Settings.seed,
                "help": "seed of the bootstrap: same input, same interval (default 0)",
            },
        ),
    ]
    for flag, kwargs in options:
        try:
            group.add_argument(flag, **kwargs)
        except argparse.ArgumentError:
            continue  # the parser has its own


def settings_from_args(args: argparse.Namespace) -> Settings:
    """:class:`Settings` from the options of :func:`add_compare_options`; bad values are UsageError.

    An option that is missing or None (a parser that leaves it to a spec) takes Settings' default.
    """
    metrics: list[str] = []
    for name in getattr(args, "metric", None) or ["total_s"]:
        try:
            metrics.append(check_gated_metric(name.strip()))
        except UsageError as exc:
            raise UsageError(f"--metric {name!r}: {exc.message}") from None
    rules = dict(parse_rule(text, what="--rule") for text in getattr(args, "rule", None) or [])
    min_effect = getattr(args, "min_effect", None)
    return Settings(
        metrics=tuple(dict.fromkeys(metrics)),
        min_effect=Settings.min_effect
        if min_effect is None
        else parse_percent(str(min_effect), what="--min-effect"),
        min_effect_by_metric=rules,
        alpha=Settings.alpha if getattr(args, "alpha", None) is None else args.alpha,
        seed=Settings.seed if getattr(args, "seed", None) is None else args.seed,
        changed_fails=not getattr(args, "changed_passes", None),
        mix_starts=bool(getattr(args, "mix_starts", None)),
    )

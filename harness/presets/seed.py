"""A seed's own figures (``NAME.seed.toml``), and its shape claims checked against ours.

``NAME.seed.toml`` holds the seed's figures as the seed text writes them:
``[[figure]]`` (a cell selector, a metric, the seed's value), ``[[ratio]]`` and
``[[order]]`` (the *shape* claims to check against ours), and ``[[bonnie]]``
rows of bonnie++'s table.  Loading names the file and the entry of a bad one;
checking is pure.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare.samplestats import Stats
from harness.errors import SpecError
from harness.presets.select import Where, parse_where
from harness.untrusted import toml_loads

# a ratio within this factor of 1 counts as "about the same"
SAME_TOLERANCE = 0.10


@dataclass(frozen=True)
class Figure:
    """One figure of a seed: the cell it belongs to, the metric, and the seed's value (if any)."""

    name: str
    where: Where
    metric: str
    seed: float | None = None
    seed_text: str = ""
    #: the seed's figure under its earlier QEMU versions (:attr:`SeedReference.qemu`), as written
    older: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Ratio:
    """A shape claim: figure ``of`` over figure ``to``; the seed's ratio or the expected direction."""

    name: str
    of: str
    to: str
    seed: float | None = None
    expect: str | None = None  # ">", "<" or "=" when the seed gives no figures
    claim: str = ""


@dataclass(frozen=True)
class Order:
    """A shape claim: these figures, smallest first."""

    name: str
    items: tuple[str, ...]
    claim: str = ""


@dataclass(frozen=True)
class BonnieRow:
    """A row of the seed's bonnie++ table: per test, (rate, %CP) as printed."""

    label: str
    where: Where
    size: str
    files: int
    values: Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class SeedReference:
    seed: str
    document: str
    setup: str
    notes: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    ratios: tuple[Ratio, ...] = ()
    orders: tuple[Order, ...] = ()
    bonnie: tuple[BonnieRow, ...] = ()
    #: the QEMU versions the seed compares, oldest first: a figure's ``seed`` is the last one's,
    #: its ``older`` the others' (empty: the seed names no version)
    qemu: tuple[str, ...] = ()

    def figure(self, name: str) -> Figure:
        for fig in self.figures:
            if fig.name == name:
                return fig
        raise KeyError(name)


def direction(ratio: float, tolerance: float = SAME_TOLERANCE) -> str:
    """``>`` above 1 by more than the tolerance, ``<`` below, else ``=``."""
    if ratio > 1 + tolerance:
        return ">"
    if ratio < 1 / (1 + tolerance):
        return "<"
    return "="


def load_reference(path: Path) -> SeedReference:
    """Read a ``NAME.seed.toml``; a bad entry names the file and the entry."""
    source = str(path)
    try:
        data = toml_loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"seed reference {source} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: {exc}: not valid TOML") from None

    qemu = data.get("qemu", [])
    if not isinstance(qemu, list) or not all(isinstance(v, str) and v for v in qemu):
        raise SpecError(
            f"{source}: qemu: list the seed's QEMU versions, oldest first: ['0.10.5', '0.11.0-rc1']"
        )
    figures = []
    for index, raw in enumerate(data.get("figure", [])):
        what = f"{source}: [[figure]] {index + 1}"
        if not raw.get("name") or not raw.get("metric"):
            raise SpecError(f"{what}: give a name and a metric")
        older = raw.get("older", {})
        if not isinstance(older, dict) or any(k not in qemu[:-1] for k in older):
            raise SpecError(
                f"{what}: older: map the seed's earlier QEMU versions ({', '.join(qemu[:-1]) or 'none'}) to its figures"
            )
        seed = raw.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | float)):
            raise SpecError(f"{what}: seed must be a number, as the seed text gives it")
        figures.append(
            Figure(
                name=str(raw["name"]),
                where=parse_where(raw.get("where"), what),
                metric=str(raw["metric"]),
                seed=None if seed is None else float(seed),
                seed_text=str(raw.get("seed_text", "" if seed is None else f"{seed:g}")),
                older={str(k): str(v) for k, v in older.items()},
            )
        )
    names = {f.name for f in figures}
    if len(names) != len(figures):
        raise SpecError(f"{source}: two figures have the same name")
    by_name = {f.name: f for f in figures}
    ratios = _ratios(data.get("ratio", []), source, by_name)
    orders = []
    for index, raw in enumerate(data.get("order", [])):
        items = tuple(raw.get("items", ()))
        bad = [i for i in items if i not in names]
        if len(items) < 2 or bad:
            raise SpecError(
                f"{source}: [[order]] {index + 1}: list two or more figure names ({bad or items})"
            )
        orders.append(Order(name=str(raw.get("name", "")), items=items, claim=str(raw.get("claim", ""))))
    rows = _bonnie_rows(data.get("bonnie", []), source)
    return SeedReference(
        seed=str(data.get("seed", "")),
        document=str(data.get("document", "")),
        setup=str(data.get("setup", "")),
        notes=tuple(str(n) for n in data.get("notes", ())),
        figures=tuple(figures),
        ratios=tuple(ratios),
        orders=tuple(orders),
        bonnie=tuple(rows),
        qemu=tuple(qemu),
    )


def _ratios(raw_ratios: Any, source: str, by_name: dict[str, Figure]) -> list[Ratio]:
    """The reference's ``[[ratio]]`` entries, each of two of its figures (``by_name``), with the
    seed's ratio (given, or of the figures' seed values) or the direction it expects."""
    ratios = []
    for index, raw in enumerate(raw_ratios):
        what = f"{source}: [[ratio]] {index + 1}"
        for key in ("of", "to"):
            if raw.get(key) not in by_name:
                raise SpecError(f"{what}: {key} = {raw.get(key)!r} names no figure")
        of, to = by_name[raw["of"]], by_name[raw["to"]]
        seed = raw.get("seed")
        if seed is None and of.seed is not None and to.seed:
            seed = of.seed / to.seed
        expect = raw.get("expect")
        if expect not in (None, ">", "<", "="):
            raise SpecError(f"{what}: expect {expect!r}: use >, < or =")
        if seed is None and expect is None:
            raise SpecError(f'{what}: the figures have no seed values: give expect = ">", "<" or "="')
        ratios.append(
            Ratio(
                name=str(raw.get("name", f"{of.name} / {to.name}")),
                of=of.name,
                to=to.name,
                seed=None if seed is None else float(seed),
                expect=expect,
                claim=str(raw.get("claim", "")),
            )
        )
    return ratios


def _bonnie_rows(raw_rows: Any, source: str) -> list[BonnieRow]:
    """The reference's ``[[bonnie]]`` rows: each bonnie++ test's rate and %CP as the seed prints them."""
    from harness.workloads.bonnie import TESTS

    rows = []
    keys = {t.key for t in TESTS}
    for index, raw in enumerate(raw_rows):
        what = f"{source}: [[bonnie]] {index + 1}"
        values: dict[str, tuple[str, str]] = {}
        for key, value in raw.items():
            if key in ("label", "where", "size", "files"):
                continue
            if key not in keys or not (isinstance(value, list) and len(value) == 2):
                raise SpecError(
                    f"{what}: {key}: use a bonnie++ test ({', '.join(sorted(keys))}) = [rate, %CP]"
                )
            values[key] = (str(value[0]), str(value[1]))
        rows.append(
            BonnieRow(
                label=str(raw.get("label", "")),
                where=parse_where(raw.get("where"), what),
                size=str(raw.get("size", "")),
                files=int(raw.get("files", 0)),
                values=values,
            )
        )
    return rows


# -- the seed's shape against ours --------------------------------------------------------------------


@dataclass(frozen=True)
class ShapeCheck:
    """One claim of a seed checked against our figures: ``holds``, ``changed`` or ``not measured``."""

    kind: str  # "ratio" or "order"
    name: str
    claim: str
    seed: str
    ours: str
    verdict: str
    seed_value: float | None = None
    our_value: float | None = None


Resolve = Callable[[Figure], Stats | None]


def _ratio_text(value: float) -> str:
    return f"x{value:.0f}" if value >= 100 else f"x{value:.3g}"


def check_ratio(ratio: Ratio, ref: SeedReference, resolve: Resolve) -> ShapeCheck:
    of, to = resolve(ref.figure(ratio.of)), resolve(ref.figure(ratio.to))
    expected = ratio.expect or direction(ratio.seed or 1.0)
    seed_text = (
        _ratio_text(ratio.seed)
        if ratio.seed is not None
        else {">": "above 1", "<": "below 1", "=": "about 1"}[expected]
    )
    if of is None or to is None or not of.n or not to.n or to.median == 0:
        return ShapeCheck("ratio", ratio.name, ratio.claim, seed_text, "-", "not measured", ratio.seed)
    ours = of.median / to.median
    verdict = "holds" if direction(ours) == expected else "changed"
    return ShapeCheck(
        "ratio", ratio.name, ratio.claim, seed_text, _ratio_text(ours), verdict, ratio.seed, ours
    )


def check_order(order: Order, ref: SeedReference, resolve: Resolve) -> ShapeCheck:
    found = {name: resolve(ref.figure(name)) for name in order.items}
    seed_text = " < ".join(order.items)
    if any(s is None or not s.n for s in found.values()):
        return ShapeCheck("order", order.name, order.claim, seed_text, "-", "not measured")
    medians = {name: stats.median for name, stats in found.items() if stats is not None}
    ranked = sorted(order.items, key=lambda n: medians[n])
    # figures within the tolerance of each other are tied: a tie does not contradict the order
    ours = ranked[0]
    for before, after in itertools.pairwise(ranked):
        ours += (" ≈ " if direction(medians[after] / medians[before]) == "=" else " < ") + after
    held = all(
        direction(medians[b] / medians[a]) != "<" for a, b in itertools.pairwise(order.items) if medians[a]
    )
    return ShapeCheck("order", order.name, order.claim, seed_text, ours, "holds" if held else "changed")


def check_shape(ref: SeedReference, resolve: Resolve) -> list[ShapeCheck]:
    return [check_ratio(r, ref, resolve) for r in ref.ratios] + [
        check_order(o, ref, resolve) for o in ref.orders
    ]

"""Where a comparison points its reader: a short name per cell, its history graphs, the command
that reproduces it, and what to do about an inconclusive cell.  Pure.

* **Short name** (:func:`short_name`): the cell's parts in words, the defaults left out:
  ``qcow2 writeback ide · dd 64M``.  Image and drive first (format, a preallocation other
  than ``off``, a cluster size other than 64 KiB, lazy refcounts, LUKS; cache mode, bus, an
  aio other than ``threads``), then the workload with its first parameter, then a cache state
  other than ``fresh`` and ``replay`` for a replay cell; an overlay says its chain after the
  image (``qcow2 extended_l2 over d1 32M none virtio-blk · fio raw``: depth and fill, read from
  the id).  The full id stays beside it.
* **History graph** (:func:`history_graph`): the asv pages' address of the metric's graph
  for the cell's format, cache mode and bus, as ``benchmarks/history`` names it:
  ``matrix.Dd.track_total_s?p-format='qcow2'&p-cache='writeback'&p-interface='ide'``
  (asv keeps a parameter's value as its ``repr``).  The history matrix measures fresh guest
  cells only: a replay or warm/cold cell has none, nor has an overlay (the history's linked
  images are a class of their own, with a chain and workload of their own).  With the pages' URL
  (:func:`graph_url`) it is a link.
* **Inconclusive** (:func:`inconclusive_sentence`): what it means and what to do, from the
  figures :mod:`harness.compare.power` gives (could see, rounds to decide).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar
from urllib.parse import quote

from harness.compare.model import ComparedCell, Figures, FlatCell, SensitivityRow
from harness.compare.power import MAX_ROUNDS
from harness.compare.verdict import Verdict
from harness.errors import UsageError
from harness.untrusted import inert_markdown

SEPARATOR = " · "
DEFAULT_CLUSTER_SIZE = 65536
# the history matrix's axes besides the workload (sweeps/history.toml): asv's parameters
HISTORY_AXES = ("format", "cache", "interface")
# a higher-is-better rate is kept inverted in the history (benchmarks/history/layout.py)
_INVERSES = {"MiB/s": "gib", "KiB/s": "gib", "1/s": "op"}
_RATE_SUFFIX = re.compile(r"(^|_)((mib|kib)_)?per_s$")
_SIZE = re.compile(r"^(\d+)([kmgt])$")
#: an overlay's chain in a cell id's image part (harness.backing.Backing.slug)
_CHAIN = re.compile(r"-over-d(?P<depth>\d+)-f(?P<fill>\d+(?:pct|[kmgt])?)-(?P<pattern>[a-z]+)-")
_PAGES_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?$")


@dataclass(frozen=True)
class Pointers:
    """What the caller adds to a comparison: the history pages' URL and the command line that
    reproduces it (argv, ``diskbench`` first)."""

    pages_url: str | None = None
    reproduce: tuple[str, ...] = field(default_factory=tuple)


def check_pages_url(url: str, *, flag: str = "--pages-url") -> str:
    """The published history pages' URL, or a UsageError naming the flag."""
    url = url.strip()
    if not _PAGES_URL.fullmatch(url):
        raise UsageError(
            f"{flag} {url!r}: give the http(s) URL of the published history pages, "
            "e.g. https://acme.github.io/diskbench/"
        )
    return url


# --- short names ----------------------------------------------------------------------------------


def workload_words(slug: str) -> str:
    """``dd-64m-2m-ext4`` -> ``dd 64M``: the workload and its first parameter."""
    name, _, rest = str(slug).partition("-")
    first = rest.split("-")[0] if rest else ""
    size = _SIZE.fullmatch(first)
    if size:
        first = size.group(1) + size.group(2).upper()
    return f"{name} {first}".strip()


def short_name(cell: FlatCell, cell_id: str = "") -> str:
    """The cell's parts in a few words (see the module's docstring); ``cell`` is the document's
    flat cell (:func:`harness.compare.rules.flatten_cell`), ``cell_id`` its id."""
    fmt = cell.format
    if not fmt or not cell.cache or not cell.workload:
        return cell_id or str(cell.axis("id") or "?")
    image = [str(fmt)]
    if cell.preallocation not in (None, "off"):
        image.append(str(cell.preallocation))
    cluster = cell.cluster_size
    if fmt == "qcow2" and isinstance(cluster, int) and cluster != DEFAULT_CLUSTER_SIZE:
        image.append(f"cluster {_binary(cluster)}")
    head = cell_id.split(".")[0]
    own, _, _ = head.partition("-over-")
    image += [
        word
        for part, word in (("lazy", "lazy refcounts"), ("luks", "luks"), ("l2ext", "extended_l2"))
        if f"-{part}-" in f"{own}-"
    ]
    image += _chain_words(head)
    drive = [str(cell.cache), str(cell.interface or "?")]
    if cell.aio not in (None, "threads"):
        drive.append(f"aio={cell.aio}")
    parts = [" ".join(image + drive), workload_words(str(cell.workload))]
    if cell.cache_state not in (None, "fresh"):
        parts.append(str(cell.cache_state))
    if cell.measure not in (None, "guest"):
        parts.append(str(cell.measure))
    return SEPARATOR.join(parts)


def _chain_words(head: str) -> list[str]:
    """``...-over-d1-f32m-sequential-qcow2-cs64k`` -> ``["over", "d1", "32M"]`` (``scattered`` after)."""
    chain = _CHAIN.search(f"{head}-")
    if chain is None:
        return []
    fill = chain["fill"]
    fill = f"{fill[:-3]}%" if fill.endswith("pct") else fill.upper()
    words = ["over", f"d{chain['depth']}", fill]
    return words if chain["pattern"] == "sequential" else [*words, chain["pattern"]]


def _binary(size: int) -> str:
    for suffix, unit in (("M", 1024**2), ("K", 1024)):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


# --- history graphs -------------------------------------------------------------------------------


def figure_name(metric: str) -> str:
    """The name the history suite keeps ``metric`` under: itself, or a higher-is-better rate
    turned into a cost (``mib_per_s`` -> ``s_per_gib``, as ``benchmarks/history/layout.py``)."""
    from harness.workloads import metric_info

    try:
        info = metric_info(metric)
    except UsageError:
        return metric
    if not info.higher_is_better or info.informational or info.unit not in _INVERSES:
        return metric
    if not _RATE_SUFFIX.search(metric):
        return metric
    stem = _RATE_SUFFIX.sub("", metric)
    per = _INVERSES[info.unit]
    return f"{stem}_s_per_{per}" if stem else f"s_per_{per}"


def benchmark_method(metric: str) -> str:
    """asv's method of a metric: ``phase.write_s`` -> ``track_phase_write_s``."""
    return "track_" + re.sub(r"[^a-z0-9]+", "_", figure_name(metric).lower()).strip("_")


def workload_class(slug: str) -> str:
    """The history suite's class of a workload: ``dd-64m-2m-ext4`` -> ``Dd``."""
    name = str(slug).partition("-")[0]
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name))


def history_graph(cell: FlatCell, metric: str, cell_id: str = "") -> str | None:
    """The fragment of the asv pages that shows ``metric`` of the history matrix's cell with this
    cell's format, cache mode and bus; None for a cell the matrix does not measure (``cell_id``
    says whether it is an overlay)."""
    if cell.measure not in (None, "guest") or cell.cache_state not in (None, "fresh"):
        return None
    if _CHAIN.search(f"{cell_id.split('.')[0]}-"):
        return None
    values = [cell.axis(axis) for axis in HISTORY_AXES]
    workload = cell.workload
    if not workload or not all(isinstance(v, str) and v for v in values):
        return None
    params = "&".join(
        f"p-{axis}={quote(repr(value), safe='')}" for axis, value in zip(HISTORY_AXES, values, strict=True)
    )
    return f"matrix.{workload_class(str(workload))}.{benchmark_method(metric)}?{params}"


def graph_url(pages_url: str, fragment: str) -> str:
    """The link to a graph of the pages at ``pages_url`` (a folder, or its ``index.html``)."""
    base = pages_url if pages_url.endswith(".html") else pages_url.rstrip("/") + "/"
    return f"{base}#{fragment}"


def with_pointers(cell: ComparedCell) -> ComparedCell:
    """A document cell with its ``title`` and ``history`` (metric -> graph fragment)."""
    history = {m.metric: history_graph(cell.cell, m.metric, cell.cell_id) for m in cell.figures if m.metric}
    return replace(
        cell,
        title=short_name(cell.cell, cell.cell_id),
        history={m: g for m, g in history.items() if g is not None},
    )


# --- the command and the inconclusive sentence ----------------------------------------------------


def command_line(argv: Sequence[str]) -> str:
    """The argv as one shell line (quoted where needed), on one line whatever it holds."""
    return shlex.join(str(a).replace("\n", " ") for a in argv)


#: why more rounds give an inconclusive metric no number (:func:`out_of_reach`)
FEW, EDGE, FAR, BETWEEN = "few", "edge", "far", "between"


def out_of_reach(m: Figures | None, *, gate: bool = True) -> tuple[str, str]:
    """Why more rounds give an inconclusive metric no number, as a kind and the words for it:
    no interval yet (:data:`FEW`: more rounds are what it needs), a change on the edge of the
    minimum effect (:data:`EDGE`; for a crossed pair, the edge as it reads it), a crossed pair's
    change clear of none whose sizes alone lie on both sides of the minimum (:data:`BETWEEN`), or
    one that would take more than :data:`~harness.compare.power.MAX_ROUNDS` (:data:`FAR`).
    ``gate``: a gate's metric (more rounds), else one of a comparison of records (more samples)."""
    if m is None or m.ci_low is None or m.ci_high is None or m.change_pct is None:
        counts = f" ({m.n_base} + {m.n_head})" if m is not None else ""
        more = "run more rounds" if gate else "record more samples (`--repeat`)"
        return FEW, f"has too few samples for an interval{counts}: {more}"
    effect = float(m.crossed_effect if m.crossed_effect is not None else m.min_effect)
    edge = math.log1p(effect) if effect > 0 else 0.0
    size = abs(math.log1p(m.change_pct / 100.0)) if m.change_pct > -100.0 else math.inf
    if edge and abs(size - edge) <= 0.25 * edge:
        return EDGE, "is not within reach of more rounds (its change sits on the minimum effect)"
    clear = m.ci_low_pct is not None and m.ci_high_pct is not None and (m.ci_low_pct > 0 or m.ci_high_pct < 0)
    if m.crossed_effect is not None and clear and size > edge:
        return BETWEEN, (
            "is not within reach of more rounds (measured crossed, its change stands for sizes alone "
            "on both sides of the minimum effect)"
        )
    return FAR, f"would need more than {MAX_ROUNDS} rounds at this spread"


def inconclusive_sentence(
    rows: Sequence[SensitivityRow],
    *,
    min_effect: float,
    names: Mapping[str, str] | None = None,
    gate: bool = True,
    cells: Sequence[ComparedCell] = (),
) -> str:
    """What an inconclusive verdict means and what to do, with the figures of the inconclusive
    metrics in ``rows`` (the summary's ``sensitivity``): one sentence of markdown, the cell's
    name (``names``: cell id -> short name) made inert.  ``gate``: the comparison of a gate (more
    rounds: ``--max-rounds``), else of records (more samples: ``--repeat``, then compare again).
    ``cells``: the comparison's, whose figures say why no row has a number of rounds
    (:func:`out_of_reach`); without them a row without a number is taken to be on the edge."""
    names = names or {}
    seen, most = inconclusive_figures(rows)
    text = (
        "Inconclusive means these rounds cannot yet tell a change of the minimum effect "
        f"({min_effect * 100:g}%) from none"
    )
    if seen is not None:
        text += f"; a regression of about {seen:.1f}% or more would have been caught 4 times in 5"
    if most is not None:
        rounds = int(most.rounds_to_decide or 0)
        who = inert_markdown(names.get(most.cell_id, most.name or most.cell_id))
        how = (
            f"e.g. the command below with `--max-rounds {rounds}` and the budget for them"
            if gate
            else f"record them (`--repeat {rounds}`) and compare again"
        )
        return (
            f"{text}. To decide, run more rounds: about {rounds} per side ({who}, has {most.rounds}), {how}."
        )
    figures = {(c.cell_id, m.metric): m for c in cells for m in c.metrics}
    kinds = {
        out_of_reach(figures[(r.cell_id, r.metric)], gate=gate)[0]
        if (r.cell_id, r.metric) in figures
        else EDGE
        for r in rows
        if r.verdict is Verdict.INCONCLUSIVE
    }
    if FEW in kinds:
        more = "run more rounds" if gate else "record more samples (`--repeat`) and compare again"
        return f"{text}. To decide, {more}: a metric without an interval has too few samples for one."
    if BETWEEN in kinds:
        return (
            "Inconclusive here means a change is clear, but not whether it reaches the minimum effect "
            f"({min_effect * 100:g}%) alone: measured crossed, it stands for sizes alone on both sides "
            "of it (the range beside its change), and more rounds would not move that range; read it "
            "as a change that may be as small as the range's lower end, or narrow this runner's "
            "`crossed_reads` with `benchmarks/calibrate_guest_pairs.py`."
        )
    if FAR in kinds:
        return (
            f"{text}. More rounds would hardly decide it (more than {MAX_ROUNDS} at this spread): read it "
            "as no change larger than it could see, or measure it where it is less noisy."
        )
    return (
        f"{text}. More rounds would not decide it (its change sits on the minimum effect): read it "
        "as a change about as large as the minimum effect, or set that metric's minimum with `--rule`."
    )


class Decidable(Protocol):
    """A gated metric's figures as the inconclusive sentence reads them."""

    @property
    def verdict(self) -> Verdict: ...

    @property
    def could_see_pct(self) -> float | None: ...

    @property
    def rounds_to_decide(self) -> int | None: ...


R = TypeVar("R", bound=Decidable)


def inconclusive_figures(rows: Sequence[R]) -> tuple[float | None, R | None]:
    """The figures of the inconclusive sentence, from the inconclusive metrics among ``rows``
    (``summary.sensitivity``'s): the largest regression they could have seen, and the row that
    needs the most rounds to decide (None without such figures)."""
    open_rows = [r for r in rows if r.verdict is Verdict.INCONCLUSIVE]
    seen = [
        float(r.could_see_pct) for r in open_rows if r.could_see_pct is not None and _number(r.could_see_pct)
    ]
    need = [r for r in open_rows if isinstance(r.rounds_to_decide, int)]
    most = max(need, key=lambda r: int(r.rounds_to_decide or 0)) if need else None
    return (max(seen) if seen else None), most


def _number(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)

"""The series of asv's history results: one value per commit, per machine, benchmark and parameters.

asv keeps one result file per machine and commit (``RESULTS/MACHINE/HASH8-ENV.json``, format 2:
``results[benchmark]`` is a row whose ``result`` column lists the values of every parameter
combination, in the order of ``itertools.product`` of the benchmark's ``params``) and one
``benchmarks.json`` with each benchmark's params, unit and pretty name.  This module reads
them into :class:`Series`; a null value (a failed or excluded cell) is NaN, a gap.
The machines stay apart (``HOST-kvm``, ``HOST-tcg``): a series never mixes two.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UsageError

ASV_UNITS = {"seconds": "s", "bytes": "B"}


@dataclass(frozen=True)
class Series:
    """One line of asv's graphs: a benchmark at one parameter combination on one machine."""

    machine: str
    benchmark: str
    param_names: tuple[str, ...]
    params: tuple[str, ...]
    metric: str
    unit: str
    commits: tuple[str, ...]
    values: tuple[float, ...]

    @property
    def cell(self) -> str:
        """``matrix.Dd`` at ``raw, none`` -> ``matrix dd format=raw cache=none``."""
        kind, _, rest = self.benchmark.partition(".")
        workload = rest.split(".")[0].lower()
        named = [f"{n}={v}" for n, v in zip(self.param_names, self.params, strict=False)]
        return " ".join([kind, workload, *named])


@dataclass(frozen=True)
class ResultFile:
    machine: str
    commit: str
    date: float
    results: Mapping[str, Any]
    columns: tuple[str, ...]


def _label(text: Any) -> str:
    """asv writes parameter values as their repr: ``'raw'`` -> ``raw``."""
    value = str(text)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path} cannot be read ({exc.strerror}): run `diskbench history` first") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON ({exc}): remove it, or run `diskbench history` again") from None


def result_files(results_dir: Path, machine: str | None = None) -> list[ResultFile]:
    """Every asv result file under ``results_dir`` (of one machine if named)."""
    if not results_dir.is_dir():
        raise UsageError(f"{results_dir} holds no asv results: run `diskbench history` first")
    out = []
    for machine_dir in sorted(p for p in results_dir.iterdir() if (p / "machine.json").is_file()):
        if machine is not None and machine_dir.name != machine:
            continue
        for path in sorted(machine_dir.glob("*.json")):
            if path.name == "machine.json":
                continue
            data = read_json(path)
            if not isinstance(data, dict) or "commit_hash" not in data or "results" not in data:
                raise UsageError(
                    f"{path} is not an asv result file: remove it, or run `diskbench history` again"
                )
            out.append(
                ResultFile(
                    machine=machine_dir.name,
                    commit=str(data["commit_hash"]),
                    date=float(data.get("date") or 0),
                    results=data["results"],
                    columns=tuple(data.get("result_columns") or ("result", "params")),
                )
            )
    return out


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def _row_values(row: Sequence[Any], columns: Sequence[str]) -> tuple[list[float], list[list[str]]]:
    cells = dict(zip(columns, row, strict=False))
    result = cells.get("result")
    params = cells.get("params") or []
    values = [_number(v) for v in result] if isinstance(result, list) else [_number(result)]
    return values, [[_label(v) for v in axis] for axis in params]


def metric_of(benchmark: str, info: Mapping[str, Any]) -> str:
    """The figure's name: ``matrix dd: phase.write_s`` -> ``phase.write_s`` (the suite's pretty name)."""
    pretty = str(info.get("pretty_name") or "")
    if ": " in pretty:
        return pretty.split(": ", 1)[1].split(" ")[0]
    return benchmark.rsplit(".", 1)[-1].removeprefix("track_")


def load_series(results_dir: Path, *, order: Sequence[str] = (), machine: str | None = None) -> list[Series]:
    """Every series of the results, its commits in ``order`` (full hashes, oldest first; commits
    not in it follow by their date)."""
    files = result_files(results_dir, machine)
    if not files:
        which = f"of machine {machine} " if machine else ""
        raise UsageError(f"{results_dir} holds no asv result {which}: run `diskbench history` first")
    bench_path = results_dir / "benchmarks.json"
    benchmarks = read_json(bench_path) if bench_path.is_file() else {}
    position = {commit: i for i, commit in enumerate(order)}
    files.sort(key=lambda f: (position.get(f.commit, len(position)), f.date))
    points: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, float]]] = {}
    axes: dict[str, list[list[str]]] = {}
    for file in files:
        for name, row in sorted(file.results.items()):
            if not isinstance(row, list):
                continue
            values, params = _row_values(row, file.columns)
            combos = list(itertools.product(*params)) if params else [()]
            if len(combos) != len(values):
                continue
            axes.setdefault(name, params)
            for combo, value in zip(combos, values, strict=True):
                points.setdefault((file.machine, name, tuple(combo)), []).append((file.commit, value))
    out = []
    for (machine_name, name, combo), series in sorted(points.items()):
        info = benchmarks.get(name) if isinstance(benchmarks, dict) else None
        info = info if isinstance(info, dict) else {}
        unit = str(info.get("unit") or "")
        out.append(
            Series(
                machine=machine_name,
                benchmark=name,
                param_names=tuple(str(n) for n in info.get("param_names") or ()),
                params=combo,
                metric=metric_of(name, info),
                unit=ASV_UNITS.get(unit, unit),
                commits=tuple(c for c, _ in series),
                values=tuple(v for _, v in series),
            )
        )
    return out

"""Every policy a platform would ship can be planned: the allowlist walked, one value at a time.

Each key the policy allowlist accepts ([image], [drive], [drive.options]) is set alone on the
repository's own ``policy.toml``, with each kind of value it allows, and the result goes through
what a gate, a sweep and history check before any sample (the default gate spec's cells and
images, every shipped sweep spec's plan, the history spec's matrix and the policy's own cells).
Each must either plan every cell or be refused as a policy that is invalid in itself; never be
refused, or lose a cell, because of a cell of the spec the value was not written for.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError, SpecError
from harness.gate.checks import side_cells
from harness.gate.spec import GATE_SPEC, load_gate_spec
from harness.spec import COMPAT, PREALLOCATION, Aio, Cache, Format, Interface
from harness.subject.binaries import QEMU_IMG
from harness.subject.policy import DRIVE_KEYS, DRIVE_OPTIONS, IMAGE_KEYS, KEY_TYPES, parse_policy
from harness.sweep import expand_spec, load_spec
from harness.sweep.limits import check_images

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from history import layout  # noqa: E402

#: the values walked for each [image] and [drive] key: every choice, and each TOML type it takes
KEY_VALUES: Mapping[str, tuple[Any, ...]] = {
    "format": tuple(f.value for f in Format),
    "preallocation": tuple(dict.fromkeys(v for values in PREALLOCATION.values() for v in values)),
    "size": ("4G", 4 * 1024**3),
    "cluster_size": ("512", "2M", 65536),
    "compat": COMPAT,
    "lazy_refcounts": (True, False),
    "extended_l2": (True, False),
    "cache": tuple(c.value for c in Cache),
    "aio": tuple(a.value for a in Aio),
    "interface": tuple(i.value for i in Interface),
}


def _option_values(name: str) -> tuple[Any, ...]:
    rule = DRIVE_OPTIONS[name]
    if rule.choices:
        # on/off options also take TOML's true/false
        return (*rule.choices, *((True, False) if "on" in rule.choices else ()))
    return (rule.minimum, rule.maximum)


def _walk() -> Iterator[tuple[str, str, Any]]:
    for key in (*IMAGE_KEYS, *DRIVE_KEYS):
        table = "image" if key in IMAGE_KEYS else "drive"
        yield from ((table, key, value) for value in KEY_VALUES[key])
    for name in DRIVE_OPTIONS:
        yield from (("drive.options", name, value) for value in _option_values(name))


WALK = list(_walk())


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else json.dumps(value)


def policy_text(table: str, key: str, value: Any) -> str:
    """The repository's policy with one key set to ``value`` (added where it is not there)."""
    data = tomllib.loads((REPO / "policy.toml").read_text())
    tables: dict[str, dict[str, Any]] = {
        "image": dict(data.get("image", {})),
        "drive": {k: v for k, v in data.get("drive", {}).items() if k != "options"},
        "drive.options": dict(data.get("drive", {}).get("options", {})),
    }
    tables[table][key] = value
    lines = [f"description = {json.dumps(data.get('description', ''))}"]
    for name, values in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{json.dumps(k)} = {_toml(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _id(item: tuple[str, str, Any]) -> str:
    table, key, value = item
    return f"{table}.{key}={value!r}"


@cache
def reference_plans() -> dict[str, tuple[int, frozenset[str]]]:
    """Each shipped sweep spec's plan under the repository's own policy: cells, excluded combinations."""
    policy = parse_policy((REPO / "policy.toml").read_text())
    plans = {}
    for path in sorted((REPO / "sweeps").glob("*.toml")):
        plan = expand_spec(load_spec(path), policy=policy)
        plans[path.name] = (
            len(plan.cells),
            frozenset(repr(sorted(ex.values.items())) for ex in plan.excluded),
        )
    return plans


def test_the_walk_covers_every_key_and_type_the_allowlist_accepts() -> None:
    """A key added to the allowlist is walked, or this fails until it is."""
    assert set(KEY_VALUES) == set(IMAGE_KEYS) | set(DRIVE_KEYS)
    for key, values in KEY_VALUES.items():
        assert {type(v) for v in values} == set(KEY_TYPES[key]), key
    walked = {(table, key) for table, key, _ in WALK}
    assert {("drive.options", name) for name in DRIVE_OPTIONS} <= walked


@pytest.mark.parametrize("item", WALK, ids=_id)
def test_a_policy_value_alone_plans_every_cell_or_is_invalid_in_itself(
    item: tuple[str, str, Any], tmp_path: Path
) -> None:
    table, key, value = item
    try:
        policy = parse_policy(policy_text(table, key, value), source="policy.toml")
    except SpecError as exc:
        # refused as a policy: its own cell cannot take it, or the value breaks QEMU's own rules
        assert exc.message.startswith("policy.toml: "), exc.message
        return
    # the default gate spec: every cell planned on the side of this policy, its images checked
    spec = load_gate_spec(GATE_SPEC)
    cells = side_cells(spec, "head", policy)
    assert list(cells) == [gc.name for gc in spec.cells]
    check_images(list(cells.values()), tmp_path, qemu_img=QEMU_IMG)
    # every shipped sweep spec: the same cells and exclusions as under the repository's policy,
    # unless the value reaches none of the spec's cells (which is said as such, exit 2)
    for name, (count, excluded) in reference_plans().items():
        try:
            plan = expand_spec(load_spec(REPO / "sweeps" / name), policy=policy)
        except HarnessError as exc:
            assert (name, key, value) in REACHES_NO_CELL, f"{name}: {exc.message}"
            assert "reaches no cell" in exc.message, exc.message
            continue
        assert (name, key, value) not in REACHES_NO_CELL
        assert len(plan.cells) == count, (name, [ex.reason for ex in plan.excluded])
        assert frozenset(repr(sorted(ex.values.items())) for ex in plan.excluded) == excluded, name
    # history: the matrix of its spec, cell by cell as the asv suite plans it, and the policy's own
    history = load_spec(REPO / "sweeps" / "history.toml")
    for group in layout.matrix_groups(history):
        for _, values in group.combinations():
            reference = layout.matrix_cell(
                history, parse_policy((REPO / "policy.toml").read_text()), group.workload, values
            )
            cell = layout.matrix_cell(history, policy, group.workload, values)
            assert (cell is None) == (reference is None), (group.workload, values)
    for group in layout.policy_groups(history):
        for _, values in group.combinations():
            layout.policy_cell(history, policy, group.workload, values)


#: (sweep spec, key, value) where the value can reach no cell of the spec: sweeps/default.toml
#: sets cache = "writeback" for every cell, and aio=native needs a direct cache mode
REACHES_NO_CELL = {("default.toml", "aio", "native")}

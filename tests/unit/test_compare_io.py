"""The IO path in the comparison: Holm's family, the verdict ``changed``, the subject diff up front."""

from __future__ import annotations

import random
from typing import Any

import pytest

from harness.compare import (
    Kind,
    Settings,
    Verdict,
    build_comparison,
    compare_family,
    compare_records,
    holm_adjust,
    judge_records,
    mann_whitney_u,
    needs_more_rounds,
    render_markdown,
    subject_diff,
)
from harness.compare.model import Side
from harness.record import CellInfo, MachineInfo, Record, Sample, SubjectInfo
from harness.spec import make_cell

MACHINE = {"hostname": "runner-1", "accel": "tcg", "qemu": "qemu-system-x86_64", "qemu_version": "7.2.22"}


def gauss(seed: int, n: int, mean: float, sd: float) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def samples(**figures: list[float]) -> list[Sample]:
    n = len(next(iter(figures.values())))
    return [
        Sample(index=i, status="ok", metrics={k.replace("__", "."): v[i] for k, v in figures.items()})
        for i in range(n)
    ]


def record(cell: dict[str, Any], side_samples: list[Sample], policy: dict[str, Any]) -> Record:
    return Record(
        cell=CellInfo(cell),
        samples=tuple(side_samples),
        machine=MachineInfo(MACHINE),
        subject=SubjectInfo(
            {"policy": policy, "guest": {"recipe_hash": "abc", "packages": {"fio": "3.33-3"}}}
        ),
    )


def policy(cache: str, **options: str) -> dict[str, Any]:
    return {
        "digest": cache,
        "source": f"/checkout-{cache}/policy.toml",
        "image": {"format": "qcow2"},
        "drive": {"cache": cache, "aio": "threads"},
        "drive_options": dict(options),
    }


# --- Holm ---------------------------------------------------------------------------------------


def test_holm_adjusts_step_down_and_keeps_the_order_given() -> None:
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([]) == []
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_holm_rejects_what_bonferroni_rejects_and_more() -> None:
    strong_b, strong_h = gauss(1, 8, 100, 2), gauss(2, 8, 130, 2)
    # p = 0.007 at n = 8 each, a +10% shift: above Bonferroni's 0.01/2, below Holm's second 0.01/1
    rng = random.Random(303)
    weak_b = [rng.gauss(100, 3) for _ in range(8)]
    weak_h = [rng.gauss(110, 3) for _ in range(8)]
    assert mann_whitney_u(weak_h, weak_b)[1] == pytest.approx(0.006993, abs=1e-5)
    groups = [
        (
            CellInfo(make_cell(workload="dd", dd_mib=64).as_dict()),
            samples(total_s=strong_b),
            samples(total_s=strong_h),
        ),
        (
            CellInfo(make_cell(workload="dd", dd_mib=64, cache="none").as_dict()),
            samples(total_s=weak_b),
            samples(total_s=weak_h),
        ),
    ]
    bonferroni = compare_family(
        groups, settings=Settings(correction="bonferroni", comparisons=2, counters=())
    )
    holm = compare_family(groups, settings=Settings(counters=()))
    assert [c.verdict for c in bonferroni] == [Verdict.REGRESSION, Verdict.INCONCLUSIVE]
    assert [c.verdict for c in holm] == [Verdict.REGRESSION, Verdict.REGRESSION]
    assert holm[1].metrics[0].p_adjusted == pytest.approx(0.006993, abs=1e-5)
    assert "Holm-adjusted p=0.007, family alpha 0.01" in holm[1].reason


# --- changed --------------------------------------------------------------------------------------


def flush_records(head_flushes: float, *, head_cache: str = "none") -> tuple[list[Any], list[Any]]:
    """One dd cell whose time and latency stay, and whose flush count goes to ``head_flushes``."""
    cell = make_cell(workload="dd", dd_mib=64, cache="none").as_dict()
    head_cell = make_cell(workload="dd", dd_mib=64, cache=head_cache).as_dict()
    base = samples(
        total_s=gauss(1, 10, 1.6, 0.01),
        dev__write_p90_ms=gauss(2, 10, 3.1, 0.02),
        host__flushes=[18.0, 19, 18, 18, 17, 18, 18, 19, 18, 18],
    )
    head = samples(
        total_s=gauss(3, 10, 1.6, 0.01),
        dev__write_p90_ms=gauss(4, 10, 3.1, 0.02),
        host__flushes=[head_flushes] * 10,
    )
    return [record(cell, base, policy("none"))], [record(head_cell, head, policy(head_cache))]


def test_a_change_only_in_the_counters_ends_as_changed_and_fails() -> None:
    base, head = flush_records(0.0)
    settings = Settings(metrics=("total_s", "dev.write_p90_ms"))
    family = judge_records(base, head, settings=settings)
    cells = family.cells
    assert [c.verdict for c in cells] == [Verdict.CHANGED]
    assert cells[0].kind is Kind.COUNTER
    assert cells[0].time_verdict is Verdict.UNCHANGED
    assert cells[0].reason.startswith("the IO changed: host.flushes -100.0% (18 → 0)")
    value = build_comparison(
        cells,
        settings=family.settings,
        base=Side(),
        head=Side(),
        machine=MachineInfo(MACHINE),
        created_at="x",
    )
    doc = value.to_json()
    assert doc["verdict"] == "changed"
    assert doc["summary"]["fails"] is True
    # Holm's family: the two gated metrics and the one counter the samples carry
    assert doc["settings"]["comparisons"] == 3
    assert doc["cells"][0]["time_verdict"] == "unchanged"
    first = render_markdown(value).splitlines()[0]
    assert first.startswith("## diskbench: CHANGED: host.flushes -100.0% in qcow2-off-cs64k-2g.none")
    # the spec may let it pass: still named, and said not to fail
    passes = Settings(metrics=("total_s",), changed_fails=False)
    value = build_comparison(
        compare_records(base, head, settings=passes),
        settings=passes,
        base=Side(),
        head=Side(),
        machine=MachineInfo(MACHINE),
        created_at="x",
    )
    doc = value.to_json()
    assert doc["verdict"] == "changed" and doc["summary"]["fails"] is False
    assert "(does not fail: changed_fails = false)" in render_markdown(value).splitlines()[0]


def test_a_counter_within_its_noise_is_not_a_change() -> None:
    base, head = flush_records(18.0)
    cells = compare_records(base, head, settings=Settings())
    assert cells[0].verdict is Verdict.UNCHANGED
    assert cells[0].counter_verdict is not Verdict.CHANGED


def test_a_counter_that_moved_but_is_not_yet_significant_asks_for_more_rounds() -> None:
    cell = CellInfo(make_cell(workload="dd", dd_mib=64).as_dict())
    base = samples(total_s=[1.0, 1.01, 0.99, 1.0], host__flushes=[18.0, 30, 10, 18])
    head = samples(total_s=[1.0, 1.01, 0.99, 1.0], host__flushes=[30.0, 20, 40, 25])
    (result,) = compare_family([(cell, base, head)], settings=Settings())
    assert result.verdict is Verdict.UNCHANGED
    assert result.counters[0].verdict is Verdict.INCONCLUSIVE
    assert needs_more_rounds(result)


# --- the subject diff -----------------------------------------------------------------------------


def test_the_subject_diff_names_policy_guest_and_qemu() -> None:
    base = Side(
        subject=SubjectInfo(
            {"policy": policy("none"), "guest": {"recipe_hash": "aaa", "packages": {"fio": "3.33-3"}}}
        ),
        machine=MachineInfo({"qemu_version": "7.2.22"}),
        qemu=None,
    )
    head = Side(
        subject=SubjectInfo(
            {
                "policy": policy("writethrough", **{"throttling.bps-write": "1000000"}),
                "guest": {"recipe_hash": "bbb", "packages": {"fio": "3.35-1", "libaio1": "0.3.113-4"}},
            }
        ),
        machine=MachineInfo({"qemu_version": "8.0.0"}),
        qemu="/build/qemu-system-x86_64",
    )
    lines = [f"{d.what}: {d.base} → {d.head}" for d in subject_diff(base, head)]
    assert lines == [
        "cache: none → writethrough",
        "drive option throttling.bps-write: (unset) → 1000000",
        "guest recipe: aaa → bbb",
        "package fio: 3.33-3 → 3.35-1",
        "package libaio1: (unset) → 0.3.113-4",
        "QEMU binary: (unset) → /build/qemu-system-x86_64",
        "QEMU version: 7.2.22 → 8.0.0",
    ]
    assert subject_diff(base, base) == []


def test_the_subject_diff_names_the_policys_overlay_options() -> None:
    def side(**overlay: Any) -> Side:
        subject = {"policy": {**policy("none"), **({"overlay": overlay} if overlay else {})}, "guest": {}}
        return Side(subject=SubjectInfo(subject), machine=MachineInfo({}), qemu=None)

    lines = [f"{d.what}: {d.base} → {d.head}" for d in subject_diff(side(), side(extended_l2=True))]
    assert lines == ["overlay extended_l2: (unset) → on"]
    lines = [
        f"{d.what}: {d.base} → {d.head}"
        for d in subject_diff(side(cluster_size="64K"), side(cluster_size="2M"))
    ]
    assert lines == ["overlay cluster_size: 64K → 2M"]


def test_a_gate_whose_head_changes_the_cache_mode_says_so_before_any_table() -> None:
    base, head = flush_records(0.0, head_cache="writethrough")
    # the gate compares by gate name; the ids differ between the sides
    settings = Settings(metrics=("total_s", "dev.write_p90_ms"))
    cell = CellInfo(head[0].cell.to_json() | {"gate_name": "policy-dd", "base_id": base[0].cell.id})
    (result,) = compare_family([(cell, base[0].samples, head[0].samples)], settings=settings)
    machine = MachineInfo(MACHINE)
    sides = {
        "base": Side(label="base", rev="main", subject=base[0].subject, machine=machine),
        "head": Side(label="head", rev="pr", subject=head[0].subject, machine=machine),
    }
    value = build_comparison([result], settings=settings, machine=machine, created_at="x", **sides)
    doc = value.to_json()
    text = render_markdown(value)
    lines = text.splitlines()
    assert lines[0].startswith("## diskbench: CHANGED: host.flushes -100.0% in policy-dd")
    table = lines.index("| cell | metric | base | head | change (95% CI) | verdict |")
    before = lines[:table]
    # under the tally, what each kind of cell could have seen; then the changed cell
    assert before[4].startswith("Could see: 1 guest cell ≥ ")
    assert before[6].startswith("- **qcow2 writethrough virtio-blk · dd 64M**: `host.flushes` **-100.0%** (")
    assert "- cache: none → writethrough" in before
    assert f"- cell `policy-dd`: base `{base[0].cell.id}` → head `{head[0].cell.id}`" in before
    # the cell's row shows the counter that changed; its fold gives both ids under the gate name
    row = lines[table + 2]
    assert row.startswith("| qcow2 writethrough virtio-blk · dd 64M | host.flushes | 18 | 0 | -100.0%")
    assert row.endswith("| changed (counter) |")
    assert (
        f"policy-dd: <code>{head[0].cell.id}</code> (base: <code>{base[0].cell.id}</code>)" in lines[table:]
    )
    assert doc["summary"]["subject_diff"] == [{"what": "cache", "base": "none", "head": "writethrough"}]

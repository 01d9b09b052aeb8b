"""Policy values that hold for some cells only: the cell keeps the fallback, and the gate says where.

``aio = "native"`` is valid for the policy's own cell (cache=none) and refused by QEMU for a
cell with cache=writeback; qcow2's ``l2-cache-size`` is refused for a raw image.  Such a cell
keeps ``aio=threads`` / QEMU's default on both sides alike, and the summary names the cells.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.cli import main
from harness.compare import (
    ComparedCell,
    Comparison,
    Settings,
    build_comparison,
    compare_cell,
    render_markdown,
)
from harness.compare.document import with_policy_reach
from harness.compare.model import Side
from harness.compare.text_table import render_text
from harness.errors import SpecError, UsageError
from harness.gate.checks import side_cells
from harness.gate.reach import policy_reach
from harness.gate.spec import GATE_SPEC, load_gate_spec, parse_gate_spec
from harness.record import CellInfo, MachineInfo, Sample
from harness.sample.guest_sampler import RunOptions, vm_config
from harness.spec import Aio, make_cell
from harness.subject.binaries import Binaries
from harness.subject.policy import Held, Policy, check_reach, held_options, options_for, parse_policy
from harness.sweep import describe_plan, expand_spec, load_spec

REPO = Path(__file__).resolve().parents[2]
OWN = (REPO / "policy.toml").read_text()
NATIVE = OWN.replace('aio = "threads"', 'aio = "native"')
L2 = OWN.replace("[drive.options]\n", '[drive.options]\n"l2-cache-size" = 33554432\n')
WRITEBACK_CELLS = ["raw-writeback-ide-fio", "qcow2-writeback-ide-dd", "raw-falloc-writeback-replay"]
DIRECT_CELLS = [
    "policy-fio",
    "raw-none-virtio-dd",
    "qcow2-none-ide-dd",
    "policy-overlay-fio",
    "policy-replay",
]


def policy(text: str, source: str = "policy.toml") -> Policy:
    return parse_policy(text, source=source)


def test_the_repositorys_policy_changed_to_native_parses() -> None:
    assert 'aio = "native"' in NATIVE and "l2-cache-size" in L2
    assert policy(NATIVE).drive["aio"] == "native"


def test_a_cell_with_a_cache_mode_that_is_not_direct_keeps_threads_and_says_why() -> None:
    native = policy(NATIVE)
    writeback = native.complete({"cache": "writeback", "workload": "dd"})
    assert writeback.cell.drive.aio is Aio.THREADS
    assert writeback.held == (
        Held(
            "aio",
            "native",
            "threads",
            "cache=writeback",
            "aio=native needs a direct cache mode (none or directsync)",
        ),
    )
    for cache in ("none", "directsync"):
        direct = native.complete({"cache": cache, "workload": "dd"})
        assert (direct.cell.drive.aio, direct.held) == (Aio.NATIVE, ())
    # spelled as QEMU does not, the same value
    shouted = policy(OWN.replace('aio = "threads"', 'aio = "NATIVE"'))
    assert shouted.complete({"cache": "writeback", "workload": "dd"}).held == writeback.held
    # the spec's own value wins, and is the spec's to get right
    with pytest.raises(SpecError, match="aio=native needs a direct cache mode, not cache=writeback"):
        native.complete({"cache": "writeback", "aio": "native", "workload": "dd"})


def test_qcow2_cache_options_reach_qcow2_drives_only_on_both_sides_alike(tmp_path: Path) -> None:
    l2 = policy(L2)
    raw = make_cell(format="raw", cache="none", workload="dd")
    qcow2 = make_cell(format="qcow2", cache="none", workload="dd")
    assert options_for(raw, l2.drive_options) == ()
    assert options_for(qcow2, l2.drive_options) == (("l2-cache-size", "33554432"),)
    (held,) = held_options(raw, l2.drive_options)
    assert (held.key, held.keeps, held.axis) == ("l2-cache-size", "QEMU's default", "format=raw")
    assert "an option of the qcow2 driver" in held.why
    # what the drive under test is given: the runner asks the rule, whatever side it runs
    opts = RunOptions(
        accel="tcg", accel_reason="t", work_dir=tmp_path, results_dir=tmp_path, run_id="x",
        binaries=Binaries.on_path(), drive_options=l2.drive_options,
    )  # fmt: skip

    guest = SimpleNamespace(kernel=tmp_path / "k", initrd=tmp_path / "i", payloads={}, tools=None)

    def disk_argv(cell: Any) -> str:
        return " ".join(vm_config(cell, guest, opts, tmp_path / "disk").drives[-1].argv())  # type: ignore[arg-type]

    assert "l2-cache-size=33554432" in disk_argv(qcow2)
    assert "l2-cache-size" not in disk_argv(raw)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[drive]\ncache = "writeback"\naio = "native"\n',
            "policy.toml: [drive] aio=native cannot apply to the policy's own cell (cache=writeback): "
            "aio=native needs a direct cache mode (none or directsync): use cache=none or "
            "cache=directsync, or aio=threads",
        ),
        (
            '[image]\nformat = "raw"\n[drive]\ncache = "none"\n[drive.options]\n"l2-cache-size" = 1024\n',
            "policy.toml: [drive.options] l2-cache-size=1024 cannot apply to the policy's own cell "
            "(format=raw): l2-cache-size is an option of the qcow2 driver, which a raw image does not "
            "have: drop it, or use format = 'qcow2'",
        ),
        (
            '[drive.options]\n"throttling.iops-size" = 4096\n',
            "policy.toml: [drive.options] throttling.iops-size needs an iops limit: set "
            "throttling.iops-total, -read or -write",
        ),
    ],
)
def test_a_policy_its_own_cell_cannot_take_is_invalid_in_itself(text: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        policy(text)
    assert info.value.message == message


def test_the_default_gate_plans_every_cell_under_native_each_with_the_aio_qemu_accepts() -> None:
    spec = load_gate_spec(GATE_SPEC)
    cells = side_cells(spec, "head", policy(NATIVE))
    native = [name for name, cell in cells.items() if cell.drive.aio is Aio.NATIVE]
    assert native == DIRECT_CELLS
    assert {name: cells[name].drive.cache.value for name in cells if name not in native} == {
        "raw-writeback-ide-fio": "writeback",
        "qcow2-writeback-ide-dd": "writeback",
        "raw-falloc-writeback-replay": "writeback",
        "qcow2-metadata-writethrough-replay": "writethrough",
    }
    # the cells the change did not reach are the same cells as under base's policy
    base = side_cells(spec, "base", policy(OWN))
    assert [n for n in cells if cells[n] == base[n]] == [
        *WRITEBACK_CELLS,
        "qcow2-metadata-writethrough-replay",
    ]


def test_a_value_no_cell_of_the_spec_takes_is_refused_in_one_line(tmp_path: Path) -> None:
    writeback = parse_gate_spec(
        '[[cells]]\nname = "a"\ncache = "writeback"\nworkload = "dd"\n'
        '[[cells]]\nname = "b"\ncache = "unsafe"\nworkload = "dd"\n',
        source="wb.toml",
    )
    with pytest.raises(UsageError) as info:
        side_cells(writeback, "head", policy(NATIVE))
    assert info.value.message == (
        "wb.toml: under the policy of head: policy.toml: aio=native reaches no cell of the gate spec "
        "(every cell has cache=unsafe or cache=writeback: aio=native needs a direct cache mode (none or "
        "directsync)): add a cell that takes it, or drop it from the policy"
    )
    held = policy(NATIVE).complete({"cache": "writeback", "workload": "dd"}).held
    check_reach(policy(NATIVE), [held, ()], "x")  # one cell takes it: nothing to say
    # a sweep the same: sweeps/default.toml sets cache=writeback for every cell
    (tmp_path / "native.toml").write_text(NATIVE)
    code = main(
        ["sweep", "--policy", str(tmp_path / "native.toml"), str(REPO / "sweeps/default.toml"), "--dry-run"]
    )
    assert code == 2


def test_a_sweeps_plan_says_which_cells_keep_the_fallback() -> None:
    plan = expand_spec(load_spec(REPO / "sweeps" / "history.toml"), policy=policy(NATIVE))
    writeback = [c for c in plan.cells if c.drive.cache.value == "writeback"]
    assert writeback and all(c.drive.aio is Aio.THREADS for c in writeback)
    assert all(c.drive.aio is Aio.NATIVE for c in plan.cells if c.drive.cache.value == "none")
    assert sorted(cell_id for cell_id, _ in plan.held) == sorted(c.id for c in writeback)
    text = describe_plan(plan, list(plan.cells), repeat=1)
    assert (
        f"  keeps threads, not the policy's aio=native, in the cache=writeback cells ({len(writeback)}): "
        "aio=native needs a direct cache mode (none or directsync)\n"
    ) in text


# -- what the gate's comparison says -------------------------------------------------------------


def _results(spec_cells: dict[str, Any], base_cells: dict[str, Any], slower: set[str]) -> list[ComparedCell]:
    """A synthetic comparison of every cell: head 25 % slower in ``slower``, alike elsewhere."""
    results = []
    for name, cell in spec_cells.items():
        rng = random.Random(name)
        base = [Sample(index=i, status="ok", metrics={"total_s": rng.gauss(10.0, 0.05)}) for i in range(8)]
        factor = 1.25 if name in slower else 1.0
        head = [
            Sample(index=i, status="ok", metrics={"total_s": rng.gauss(10.0 * factor, 0.05)})
            for i in range(8)
        ]
        doc = {**cell.as_dict(), "gate_name": name}
        if base_cells[name].id != cell.id:
            doc["base_id"] = base_cells[name].id
        results.append(compare_cell(CellInfo(doc), base, head, settings=Settings()))
    return results


def gate_document(slower: set[str]) -> Comparison:
    spec = load_gate_spec(GATE_SPEC)
    base, head = (
        policy(OWN),
        policy(NATIVE.replace("[drive.options]\n", '[drive.options]\n"l2-cache-size" = 33554432\n')),
    )
    results = _results(side_cells(spec, "head", head), side_cells(spec, "base", base), slower)
    doc = build_comparison(
        results,
        settings=Settings(),
        base=Side.from_json({"label": "base", "subject": {"policy": base.as_dict()}}),
        head=Side.from_json({"label": "head", "subject": {"policy": head.as_dict()}}),
        machine=MachineInfo({"accel": "tcg"}),
        created_at="2025-01-01T00:00:00+00:00",
    )
    return with_policy_reach(doc, results, policy_reach(spec, base, head))


def test_what_differs_says_where_the_change_applied_and_which_cells_kept_the_fallback() -> None:
    value = gate_document(slower=set())
    summary = value.to_json()["summary"]
    aio = next(e for e in summary["subject_diff"] if e["what"] == "aio")
    assert aio["reach"]["applied"] == DIRECT_CELLS
    assert aio["where"] == (
        "5 of 9 cells; the 3 cache=writeback cells and the cache=writethrough cell keep aio=threads"
    )
    l2 = next(e for e in summary["subject_diff"] if e["what"] == "drive option l2-cache-size")
    assert (l2["base"], l2["head"]) == ("(unset)", "33554432")
    assert l2["where"] == "6 of 9 cells; the 3 format=raw cells keep QEMU's default"
    assert summary["untouched"] == ["raw-writeback-ide-fio", "raw-falloc-writeback-replay"]
    held = {(h["name"], h["key"]): (h["keeps"], h["axis"], h["sides"]) for h in summary["policy_held"]}
    assert held[("raw-writeback-ide-fio", "aio")] == ("threads", "cache=writeback", ["head"])
    assert held[("qcow2-metadata-writethrough-replay", "aio")] == ("threads", "cache=writethrough", ["head"])
    assert held[("raw-none-virtio-dd", "l2-cache-size")] == ("QEMU's default", "format=raw", ["head"])
    assert len(held) == 4 + 3
    markdown = render_markdown(value)
    assert (
        "- aio: threads → native (5 of 9 cells; the 3 cache=writeback cells and the cache=writethrough "
        "cell keep aio=threads)\n"
    ) in markdown
    assert (
        "- head's aio=native → aio=threads in raw-writeback-ide-fio, qcow2-writeback-ide-dd, "
        "raw-falloc-writeback-replay (cache=writeback) and qcow2-metadata-writethrough-replay "
        "(cache=writethrough): aio=native needs a direct cache mode (none or directsync)\n"
    ) in markdown
    assert "policy values some cells cannot take" in render_text(value)


def test_the_axis_sentence_counts_only_the_cells_the_change_reached() -> None:
    # head slower in three cells native reached, and in a cell no change reached (noise)
    slower = {"policy-fio", "qcow2-none-ide-dd", "policy-replay", "raw-writeback-ide-fio"}
    doc = gate_document(slower).to_json()
    assert doc["summary"]["untouched"] == ["raw-writeback-ide-fio", "raw-falloc-writeback-replay"]
    assert doc["summary"]["counts"]["regression"] == 4
    # aio=native goes with cache=none in every cell of the default gate: both named, said so
    assert doc["summary"]["axis_sentence"] == (
        "Every regressed cell has cache=none and aio=native (3 of 5 such cells regressed, 0 of 2 others)."
        " The cells cannot tell cache=none and aio=native apart: they go together in every cell."
    )


def test_a_policy_that_gives_its_overlays_subclusters_reaches_the_default_gates_overlay_cell() -> None:
    head = policy(OWN + "\n[overlay]\nextended_l2 = true\n")
    spec = load_gate_spec(GATE_SPEC)
    reach = policy_reach(spec, policy(OWN), head)
    (key,) = reach.keys
    assert (key.what, key.applied) == ("overlay extended_l2", ("policy-overlay-fio",))
    assert key.where == "1 of 9 cells; the 8 no backing cells keep QEMU's default"
    cells = side_cells(spec, "head", head)
    assert cells["policy-overlay-fio"].image.extended_l2 and not cells["policy-fio"].image.extended_l2

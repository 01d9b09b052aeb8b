"""The history suite's linked images: the policy's overlay over a populated base, a class of its own."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

from harness.subject.policy import load_policy, parse_policy
from harness.sweep import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from history import layout  # noqa: E402

SPEC = load_spec(REPO / "sweeps" / "history.toml")


def test_the_linked_cell_is_the_policys_overlay_over_a_populated_base() -> None:
    (group,) = layout.linked_groups(SPEC)
    assert (group.class_name, group.param_names, group.params) == (
        "Fio",
        ("backing",),
        [["depth=1,fill=32M"]],
    )
    ((key, values),) = group.combinations()
    cell = layout.linked_cell(SPEC, load_policy(REPO / "policy.toml"), group.workload, values)
    assert cell is not None and key == ("depth=1,fill=32M",)
    assert (
        cell.backing is not None
        and cell.backing.depth == 1
        and cell.backing.fill_bytes(cell.image.size) == 32 << 20
    )
    # the policy's qcow2 and drive, the spec's fio parameters, fio's random jobs alone over the fill
    assert cell.id == (
        "qcow2-off-cs64k-2g-over-d1-f32m-sequential-qcow2-cs64k.none-threads-virtio-blk."
        "fio-raw-32m-500x-50f-random"
    )
    # not one of the matrix's or the policy's cells: it is run beside them
    plan = {
        c.id
        for g in layout.matrix_groups(SPEC)
        for _, v in g.combinations()
        if (c := layout.matrix_cell(SPEC, None, g.workload, v))
    }
    assert cell.id not in plan


def test_the_overlay_takes_the_policys_overlay_options() -> None:
    text = (REPO / "policy.toml").read_text() + "\n[overlay]\nextended_l2 = true\n"
    (group,) = layout.linked_groups(SPEC)
    ((_, values),) = group.combinations()
    cell = layout.linked_cell(SPEC, parse_policy(text, source="policy.toml"), group.workload, values)
    assert cell is not None and cell.image.extended_l2 and "-l2ext-" in cell.id
    # a policy of another format still has its overlay: format and preallocation are the cell's own
    raw = (REPO / "policy.toml").read_text().replace('format = "qcow2"', 'format = "raw"')
    raw = raw.replace('cluster_size = "64K"\n', "").replace('preallocation = "off"', 'preallocation = "full"')
    cell = layout.linked_cell(SPEC, parse_policy(raw, source="policy.toml"), group.workload, values)
    assert cell is not None and cell.image.format.value == "qcow2" and cell.image.preallocation == "off"


def test_a_matrix_without_fio_has_no_linked_images() -> None:
    small = load_spec(REPO / "sweeps" / "history-small.toml")
    assert layout.linked_groups(small) == []


def test_a_harness_without_backing_chains_gives_a_gap() -> None:
    """A measured commit's harness from before chains: make_cell has no ``backing`` (a TypeError)."""

    class Before:
        def cell(self, **values: object) -> object:
            raise TypeError("make_cell() got an unexpected keyword argument 'backing'")

    spec = parse_spec('[axes]\nformat = ["qcow2"]\n[params]\nworkload = "fio"\n')
    assert layout.linked_cell(spec, Before(), "fio", {"backing": "depth=1,fill=32M"}) is None
    data = {"linked": {"fio": {("depth=1,fill=32M",): None}}, "cells": {}}
    assert math.isnan(layout.lookup(data, "linked", "fio", ["depth=1,fill=32M"], "host.write_amplification"))


def test_the_linked_class_tracks_the_copy_on_write_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(layout.ENV_SPEC, str(REPO / "sweeps" / "history.toml"))
    linked = importlib.import_module("history.linked")
    cls = linked.Fio
    assert cls.params == [["depth=1,fill=32M"]] and cls.param_names == ["backing"]
    assert cls.__module__ == "history.linked"
    track = cls.track_host_write_amplification
    assert track.pretty_name.startswith("linked fio: host.write_amplification")
    data = {
        "linked": {"fio": {("depth=1,fill=32M",): "the-overlay"}},
        "matrix": {"fio": {("qcow2", "none", "virtio-blk"): "the-plain-cell"}},
        "cells": {
            "the-overlay": {"host.write_amplification": 4.2},
            "the-plain-cell": {"host.write_amplification": 1.0},
        },
    }
    assert cls().track_host_write_amplification(data, "depth=1,fill=32M") == 4.2
    assert hasattr(cls, "track_fio_raw_rand_write_qd1_clat_p50_ms")

"""Real guests under TCG on an overlay over a chain: QEMU opens the chain as its account, and the
copy-on-write shows in the host's written bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.record import load_record
from harness.spec import Cell, make_cell

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def run(cells: list[Cell], guest_cells: Callable[..., list[Path]]) -> dict[str, dict[str, Any]]:
    return {
        load_record(p).to_json()["cell"]["id"]: load_record(p).to_json()
        for p in guest_cells(cells, start="auto")
    }


def test_random_writes_over_a_full_base_copy_whole_clusters_without_subclusters(
    guest_cells: Callable[..., list[Path]],
) -> None:
    # 500 4 KiB writes at random over 128 MiB of a 256 MiB overlay over a fully written base
    axes: dict[str, Any] = dict(
        workload="fio", fio_jobs="random", fio_target="raw", fio_size_mib=128, fio_ios=500, size="256M"
    )
    off = make_cell(backing="depth=2,fill=100%", **axes)
    on = make_cell(backing="depth=2,fill=100%", extended_l2=True, **axes)
    records = run([off, on], guest_cells)
    samples = {cell: records[cell.id]["samples"][0] for cell in (off, on)}
    for cell, sample in samples.items():
        assert sample["status"] == "ok", sample.get("reason")
        assert records[cell.id]["cell"]["backing"]["depth"] == 2
        assert sample["host"]["check"]["verdict"] == "clean"
    # one chain for both: the overlay's options are not the base's
    assert [samples[c]["host"]["chain"]["key"] for c in (off, on)].count(
        samples[off]["host"]["chain"]["key"]
    ) == 2
    assert not samples[on]["host"]["chain"]["built"]
    amplification = {c: samples[c]["metrics"]["host.write_amplification"] for c in (off, on)}
    # a fresh 64K cluster per 4 KiB write: up to 16x; with 2K subclusters about what the guest wrote
    assert amplification[off] > 8, amplification
    assert amplification[on] < 1.5, amplification

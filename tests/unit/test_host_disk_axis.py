"""The host disk as an axis: a sweep spec's several disks, each disk's records apart, the report
with the disks side by side in one table (a preset's seed claims checked per disk)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from recordkit import tcg_record
from test_sweep import fake_session

from harness.errors import SpecError
from harness.host import hostdisk
from harness.progress import Progress
from harness.record import Record, Sample
from harness.report.blocks import Table, build_report
from harness.report.series import group_series, load_records
from harness.report.text import to_text
from harness.spec import make_cell
from harness.sweep import HOST_DISK_AXIS, expand_spec, parse_spec, run_sweep

HDD = hostdisk.profiles()["period-hdd"].identity("blkio")


def test_a_spec_names_its_host_disks_apart_from_the_cells_axes() -> None:
    spec = parse_spec(
        '[axes]\nhost_disk = ["native", "period-hdd"]\nformat = ["raw", "qcow2"]\n[params]\nworkload = "dd"\n'
    )
    assert spec.host_disk == ("native", "period-hdd")
    assert HOST_DISK_AXIS not in spec.axes
    assert len(expand_spec(spec).cells) == 2, "the disks do not multiply the cells: the run does"
    assert parse_spec('[params]\nhost_disk = "period-hdd"\n').host_disk == ("period-hdd",)
    assert parse_spec('[params]\nworkload = "dd"\n').host_disk == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[axes]\nhost_disk = ["native", "floppy"]\n',
            r"<spec>:2: host_disk 'floppy': no such host disk model: use one of native, period-hdd",
        ),
        ("[axes]\nhost_disk = []\n", r"<spec>:2: host_disk = \[\] has no value"),
        (
            '[axes]\nhost_disk = ["native", "period-hdd"]\nformat = ["raw"]\n[[exclude]]\nhost_disk = "native"\nreason = "x"\n',
            r"<spec>:5: host_disk in \[\[exclude\]\]: every host disk runs every cell",
        ),
    ],
)
def test_a_bad_host_disk_axis_names_the_line(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec(text)


def _cells() -> list[Any]:
    return [make_cell(format=f, workload="dd", dd_mib=16, size="256M") for f in ("raw", "qcow2")]


def test_a_models_records_go_below_the_sweeps_and_the_report_sets_the_disks_side_by_side(
    tmp_path: Path,
) -> None:
    cells = _cells()
    native = fake_session(tmp_path)
    hdd = fake_session(tmp_path)
    hdd.machine = hdd.machine.__class__({**hdd.machine.data, "host_disk": HDD})
    for session in (native, hdd):
        result = run_sweep(
            "s", cells, session, results_dir=tmp_path, repeat=1, progress=Progress(io.StringIO(), bar=False)
        )
        assert result.ran_samples == 2 and not result.set_aside, "one disk never sets the other's aside"
    sweep = tmp_path / "sweeps" / "s"
    want = sorted(f"{c.id}.json" for c in cells)
    assert sorted(p.name for p in sweep.glob("*.json")) == want, "the native disk's records as before"
    assert sorted(p.name for p in (sweep / "host-disk-period-hdd").glob("*.json")) == want
    records, _dirs = load_records([sweep])
    (series,) = group_series(records)
    table = next(b for b in build_report([series]) if isinstance(b, Table) and HOST_DISK_AXIS in b.header)
    at = table.header.index(HOST_DISK_AXIS)
    assert [r[at] for r in table.rows] == ["native", "period-hdd", "native", "period-hdd"]


def _record(cell: Any, host_disk: str | None, run_id: str) -> Record:
    machine = {"hostname": "h", "accel": "tcg", "qemu_version": "7.2.22"}
    record = tcg_record(
        cell.as_dict(),
        machine={**machine, **({"host_disk": host_disk} if host_disk else {})},
        subject={"guest": {"recipe_hash": "abc"}},
        run_id=run_id,
    )
    return record.with_sample(Sample(index=0, status="ok", metrics={"total_s": 1.0}))


def test_a_presets_disks_are_sections_of_their_own() -> None:
    from harness.presets import load_preset

    spec = load_preset("booth-2010").at_scale(0.1)
    cell = expand_spec(spec).cells[0]
    run_id = f"sweep-{spec.name}"
    both = group_series([_record(cell, None, run_id), _record(cell, HDD, run_id)])
    assert sorted(s.cells[0].values[HOST_DISK_AXIS] for s in both) == ["native", "period-hdd"]
    native, hdd = sorted(both, key=lambda s: s.disks)
    assert (native.on_disk, hdd.on_disk) == ("", " on host disk period-hdd")
    text = to_text(build_report(both))
    assert "(preset booth-2010, seed 001) on host disk period-hdd" in text
    assert "today on host disk period-hdd  verdict" in text, "the claims' column names the disk"
    assert text.count("no claim measured on host disk period-hdd;") == 1
    assert text.count("no claim measured;") == 1, "each disk's claims, once"
    # a sweep's are one series
    (one,) = group_series([_record(cell, None, "sweep-mine"), _record(cell, HDD, "sweep-mine")])
    assert [c.values[HOST_DISK_AXIS] for c in one.cells] == ["native", "period-hdd"]

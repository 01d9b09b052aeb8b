from __future__ import annotations

import pytest

from harness.errors import SpecError
from harness.spec import Cell, Format, expand, format_size, make_cell, parse_size


def test_defaults_make_a_qcow2_install_cell_with_stable_id() -> None:
    cell = make_cell()
    assert cell.image.format is Format.QCOW2
    assert cell.image.cluster_size == 65536
    assert cell.id == "qcow2-off-cs64k-2g.writeback-threads-virtio-blk.install-full"


def test_cell_round_trips_through_its_dict() -> None:
    cell = make_cell(
        format="qcow2",
        preallocation="metadata",
        cluster_size="2M",
        lazy_refcounts=True,
        cache="none",
        aio="native",
        interface="ide",
        workload="dd",
        dd_mib=64,
        size="1G",
    )
    assert Cell.from_dict(cell.as_dict()) == cell
    assert cell.as_dict()["id"] == cell.id


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "vmdk"}, "unknown format 'vmdk': use one of raw, qcow2"),
        ({"cache": "fast"}, "unknown cache mode 'fast': use one of none, writethrough"),
        ({"aio": "posix"}, "unknown aio 'posix': use one of threads, native, io_uring"),
        ({"interface": "floppy"}, "unknown interface 'floppy'"),
        ({"cluster_size": 1000}, "cluster_size 1000 is not allowed: use a power of two from 512 to 2M"),
        ({"cluster_size": "4M"}, "cluster_size '4M' is not allowed"),
        ({"format": "raw", "cluster_size": "64K"}, "cluster_size '64K' applies to qcow2 only"),
        (
            {"format": "raw", "preallocation": "metadata"},
            "preallocation 'metadata' is not allowed for raw: use one of off, falloc, full",
        ),
        ({"aio": "native", "cache": "writeback"}, "aio=native needs a direct cache mode"),
        ({"format": "raw", "lazy_refcounts": True}, "lazy_refcounts applies to qcow2 only"),
        ({"workload": "dd", "size": "256M", "dd_mib": 256}, "does not fit"),
    ],
)
def test_bad_values_name_the_value_and_what_is_allowed(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as info:
        make_cell(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_native_aio_is_fine_with_direct_cache_modes() -> None:
    assert make_cell(aio="native", cache="none").drive.aio.value == "native"
    assert make_cell(aio="native", cache="directsync").drive.cache.value == "directsync"


@pytest.mark.parametrize(("text", "size"), [("512", 512), ("64K", 65536), ("2M", 2097152), ("1g", 1 << 30)])
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size
    assert parse_size(format_size(size)) == size


def test_parse_size_rejects_garbage() -> None:
    with pytest.raises(SpecError, match="is not a size"):
        parse_size("lots")


def test_expand_skips_what_only_another_format_allows() -> None:
    cells, skipped = expand(
        {"format": ["raw", "qcow2"], "preallocation": ["off", "falloc", "metadata"]},
        skip_format_mismatch=True,
    )
    ids = [c.image.slug for c in cells]
    assert ids == [
        "raw-off-2g",
        "raw-falloc-2g",
        "qcow2-off-cs64k-2g",
        "qcow2-falloc-cs64k-2g",
        "qcow2-metadata-cs64k-2g",
    ]
    assert len(skipped) == 1 and "metadata" in skipped[0]


def test_expand_still_refuses_values_no_format_allows() -> None:
    with pytest.raises(SpecError, match="unknown format 'vhdx'"):
        expand({"format": ["raw", "vhdx"]}, skip_format_mismatch=True)
    with pytest.raises(SpecError, match="metadata"):
        expand({"format": ["raw"], "preallocation": ["metadata"]})


def test_a_replay_cell_has_an_id_and_a_record_key_of_its_own() -> None:
    from harness.spec import Cell, Measure

    guest = make_cell(format="raw", workload="dd", size="1G")
    replayed = make_cell(format="raw", workload="dd", size="1G", measure="replay")
    assert replayed.measure is Measure.REPLAY and replayed.id == f"{guest.id}.replay"
    assert "measure" not in guest.as_dict()  # a guest cell's record keeps its keys
    assert replayed.as_dict()["measure"] == "replay"
    assert Cell.from_dict(replayed.as_dict()) == replayed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"cache_state": "warm"}, "measure=replay replays a fresh image's requests"),
        ({"format": "qcow2", "encrypt": "luks"}, "measure=replay cannot open an encrypted image"),
        ({"measure": "emulate"}, "measure"),
    ],
)
def test_replay_cells_refuse_what_a_replay_cannot_do(extra: dict[str, str], message: str) -> None:
    values = {"format": "raw", "workload": "dd", "size": "1G", "measure": "replay", **extra}
    with pytest.raises(SpecError, match=message):
        make_cell(**values)

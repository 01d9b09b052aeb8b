"""A cell's backing chain and qcow2's extended L2 entries as cells, flags, specs and policies spell them."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backing import FILL_CHUNK, Backing, parse_backing
from harness.cli import main
from harness.errors import SpecError
from harness.spec import Cell, make_cell
from harness.subject.policy import parse_policy

MIB = 1024**2
GIB = 1024**3


def test_a_chain_spelled_with_its_defaults_and_back() -> None:
    chain = parse_backing("depth=2,fill=50%,pattern=scattered", 2 * GIB)
    assert chain == Backing(depth=2, fill_percent=50, pattern="scattered")
    assert chain.slug == "over-d2-f50pct-scattered-qcow2-cs64k"
    assert parse_backing(chain.spelled(), 2 * GIB) == chain
    assert parse_backing("fill=512M,format=raw", GIB).slug == "over-d1-f512m-sequential-raw"


def test_the_fill_is_laid_out_as_its_pattern_says() -> None:
    size = 64 * MIB
    sequential = parse_backing("fill=25%", size)
    assert sequential.extents(size) == [(0, 16 * MIB)]
    scattered = parse_backing("fill=25%,pattern=scattered", size)
    extents = scattered.extents(size)
    assert sum(length for _, length in extents) == 16 * MIB
    assert extents[:3] == [(0, FILL_CHUNK), (4 * FILL_CHUNK, FILL_CHUNK), (8 * FILL_CHUNK, FILL_CHUNK)]
    assert extents[-1][0] + FILL_CHUNK <= size
    assert parse_backing("fill=0%", size).extents(size) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("depth=0", "backing depth '0' is not allowed: use 1, 2 or 3"),
        ("depth=99", "backing depth '99' is not allowed: use 1, 2 or 3"),
        ("fill=3G", "backing fill '3G' is larger than the disk (2G): use at most 100% or 2G"),
        ("fill=150%", "backing fill '150%' is not a share of the disk"),
        ("pattern=zigzag", "backing pattern 'zigzag' is not allowed: use sequential or scattered"),
        ("depth=2,format=raw", "backing depth above 1 needs a qcow2 base"),
        ("cluster_size=4K,extended_l2=on", "backing extended_l2 needs a cluster_size of at least 16K"),
        ("colour=red", "backing 'colour=red' is not a key=value of the chain"),
    ],
)
def test_a_bad_chain_is_refused_naming_its_key(text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        make_cell(workload="dd", backing=text)
    assert caught.value.message.startswith(message)


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ({"format": "raw", "extended_l2": True}, "extended_l2 applies to qcow2 only: drop it for format raw"),
        ({"cluster_size": "4K", "extended_l2": True}, "extended_l2 needs a cluster_size of at least 16K"),
        ({"compat": "0.10", "extended_l2": True}, "extended_l2 needs qcow2 compat 1.1"),
        ({"format": "raw", "backing": "depth=1"}, "backing needs format qcow2"),
        ({"preallocation": "metadata", "backing": "depth=1"}, "backing with preallocation=metadata needs"),
    ],
)
def test_a_cell_that_cannot_have_the_option_is_refused(axes: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        make_cell(workload="dd", **axes)  # type: ignore[arg-type]
    assert caught.value.message.startswith(message)


def test_a_replay_cell_can_replay_over_a_chain() -> None:
    cell = make_cell(workload="fio", measure="replay", backing="depth=2,fill=50%")
    assert cell.id.startswith("qcow2-off-cs64k-2g-over-d2-f50pct-sequential-qcow2-cs64k.")
    assert cell.id.endswith(".replay")
    assert Cell.from_dict(cell.as_dict()) == cell


def test_the_chain_and_extended_l2_are_in_the_id_and_the_record_and_read_back() -> None:
    cell = make_cell(
        workload="fio", extended_l2=True, backing="depth=3,fill=1G,pattern=scattered,cluster_size=2M"
    )
    assert cell.id.startswith("qcow2-off-cs64k-l2ext-2g-over-d3-f1g-scattered-qcow2-cs2m.")
    record = cell.as_dict()
    assert record["image"]["extended_l2"] is True
    assert record["backing"] == {
        "depth": 3,
        "fill": "1G",
        "pattern": "scattered",
        "format": "qcow2",
        "cluster_size": 2 * MIB,
        "extended_l2": False,
    }
    assert Cell.from_dict(record) == cell
    assert "extended_l2=on" in cell.image.create_options()


def test_a_cell_without_either_keeps_its_record_and_id() -> None:
    cell = make_cell(workload="dd")
    assert cell.id == "qcow2-off-cs64k-2g.writeback-threads-virtio-blk.dd-256m-2m-ext4"
    assert cell.as_dict() == {
        "image": {
            "format": "qcow2",
            "preallocation": "off",
            "size": 2 * GIB,
            "cluster_size": 65536,
            "lazy_refcounts": False,
            "compat": "1.1",
            "encrypt": "none",
        },
        "drive": {"cache": "writeback", "aio": "threads", "interface": "virtio-blk"},
        "workload": cell.workload.as_dict(),
        "cache_state": "fresh",
        "id": cell.id,
    }
    assert "extended_l2=on" not in cell.image.create_options()
    fio = make_cell(workload="fio")
    assert fio.id == "qcow2-off-cs64k-2g.writeback-threads-virtio-blk.fio-both-64m-2000x-200f"
    assert "fio_jobs" not in fio.as_dict()["workload"]
    assert "diskbench.fio_jobs=all" not in fio.workload.kernel_args()
    assert (
        make_cell(workload="fio", fio_jobs="random").workload.kernel_args()[-1] == "diskbench.fio_jobs=random"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--backing", "depth=0"], "diskbench: error: backing depth '0' is not allowed: use 1, 2 or 3\n"),
        (["--backing", "depth=99"], "diskbench: error: backing depth '99' is not allowed: use 1, 2 or 3\n"),
        (
            ["--backing", "fill=3G", "--size", "1G"],
            "diskbench: error: backing fill '3G' is larger than the disk (1G): use at most 100% or 1G\n",
        ),
        (
            ["--format", "raw", "--extended-l2"],
            "diskbench: error: extended_l2 applies to qcow2 only: drop it for format raw\n",
        ),
    ],
)
def test_bad_input_on_the_command_line_is_exit_2_in_one_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--workload", "dd", "--dry-run", *flags]) == 2
    assert capsys.readouterr().err == message


def test_run_lists_a_chain_and_says_how_to_run_it_again(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.run import run_argv

    flags = ["--backing", "depth=1,fill=50%", "--backing", "depth=2", "--extended-l2"]
    assert main(["run", "--workload", "fio", "--dry-run", "--fio-jobs", "random", *flags]) == 0
    out = capsys.readouterr().out
    assert "qcow2-off-cs64k-l2ext-2g-over-d1-f50pct-sequential-qcow2-cs64k." in out
    assert "qcow2-off-cs64k-l2ext-2g-over-d2-f100pct-sequential-qcow2-cs64k." in out
    cells = [make_cell(workload="fio", extended_l2=True, backing=text) for text in ("fill=50%", "depth=2")]
    argv = run_argv(cells, repeat=2)
    assert argv.count("--backing") == 2 and "--extended-l2" in argv
    assert "depth=1,fill=50%,pattern=sequential,format=qcow2,cluster_size=64K,extended_l2=off" in argv


def test_a_policy_sets_extended_l2_for_its_images_and_its_overlays() -> None:
    policy = parse_policy('[image]\nformat = "qcow2"\n[overlay]\nextended_l2 = true\ncluster_size = "128K"\n')
    over = policy.cell(workload="dd", backing="depth=1")
    assert over.image.extended_l2 and over.image.cluster_size == 128 * 1024
    plain = policy.cell(workload="dd")
    assert not plain.image.extended_l2 and plain.image.cluster_size == 65536
    assert policy.as_dict()["overlay"] == {"extended_l2": True, "cluster_size": "128K"}
    # a policy without [overlay] keeps the digest it had
    assert (
        parse_policy('[image]\nformat = "qcow2"\n').digest
        == parse_policy('[image]\nformat = "qcow2"\n[overlay]\n').digest
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[image]\nformat = "raw"\nextended_l2 = true\n', "extended_l2 applies to qcow2 only"),
        ("[overlay]\nextended_l2 = 1\n", "[overlay] extended_l2 = 1: use true or false"),
        ("[overlay]\npreallocation = 'full'\n", "unknown [overlay] key 'preallocation'"),
        (
            '[overlay]\ncluster_size = "4K"\nextended_l2 = true\n',
            "[overlay] extended_l2 needs a cluster_size",
        ),
    ],
)
def test_a_policy_that_cannot_take_extended_l2_is_refused(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        parse_policy(text)
    assert caught.value.message.startswith(f"policy.toml: {message}")

"""Bad input: exit 2, one line naming the value and what is allowed, nothing created."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--format", "vmdk"], "unknown format 'vmdk': use one of raw, qcow2"),
        (["--cache", "fast"], "unknown cache mode 'fast': use one of none, writethrough, writeback"),
        (["--aio", "posix"], "unknown aio 'posix'"),
        (["--interface", "floppy"], "unknown interface 'floppy'"),
        (["--cluster-size", "1000"], "cluster_size '1000' is not allowed: use a power of two from 512 to 2M"),
        (["--cluster-size", "4M"], "cluster_size '4M' is not allowed"),
        (["--format", "raw", "--cluster-size", "64K"], "cluster_size '64K' applies to qcow2 only"),
        (
            ["--format", "raw", "--preallocation", "metadata"],
            "preallocation 'metadata' is not allowed for raw",
        ),
        (["--aio", "native", "--cache", "writeback"], "aio=native needs a direct cache mode"),
        (["--repeat", "0"], "--repeat 0: use 1 or more"),
        (
            ["--workload", "fio", "--fio-target", "bogus"],
            "unknown fio target 'bogus': use one of both, raw, file",
        ),
        (["--workload", "fio", "--fio-ios", "0"], "fio_ios 0: use a whole number from 1 to 10000000"),
        (["--workload", "fio", "--fio-fsync-ios", "-1"], "fio_fsync_ios -1: use a whole number"),
        (["--workload", "fio", "--size", "256M", "--fio-size-mib", "300"], "fio size 300 MiB does not fit"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    work = tmp_path / "work"
    results = tmp_path / "results"
    rc = main(["run", *flags, "--work-dir", str(work), "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("diskbench: error: ")
    assert not work.exists() and not results.exists()


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: diskbench" in capsys.readouterr().out


def test_show_of_a_truncated_record_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "cell.json"
    bad.write_text('{"schema": "diskbench-record", "vers')
    assert main(["show", str(bad)]) == 2
    assert "is not valid JSON (truncated?" in capsys.readouterr().err


def test_fio_without_fio_on_the_tools_drive_is_bad_input(tmp_path: Path) -> None:
    """A recipe without [tools] fio: one line before anything is built, not a failed sample per cell."""
    import shutil

    from harness.errors import ExitCode, SpecError
    from harness.paths import IMAGES_DIR
    from harness.spec import make_cell
    from harness.sweep.preflight import check_tools

    fio, dd = make_cell(workload="fio", size="1G"), make_cell(workload="dd", size="1G")
    check_tools([fio])  # the shipped recipe has fio
    check_tools([dd], recipe_dir=tmp_path / "none")  # no fio cell: the recipe is not even read
    images = tmp_path / "images"
    shutil.copytree(IMAGES_DIR, images)
    toml = images / "recipe.toml"
    head, rest = toml.read_text().split("\n[tools]\n")
    toml.write_text(head + "\n[payload]\n" + rest.split("\n[payload]\n")[1])
    with pytest.raises(SpecError) as caught:
        check_tools([dd, fio], recipe_dir=images)
    assert caught.value.exit_code == ExitCode.USAGE
    assert "the fio workload needs fio on the guest's tools drive" in caught.value.message
    assert '[tools] files list none: add "/usr/bin/fio"' in caught.value.message

"""Numeric flags and image sizes are checked before anything is created: one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.sweep.limits import host_cores

RUN = ["run", "--workload", "dd", "--dd-mib", "16", "--repeat", "1", "--accel", "tcg"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mem-mib", "0"], "--mem-mib 0 is not allowed: use 128 (the least the guest boots with) to "),
        (["--mem-mib", "99999999"], "--mem-mib 99999999 is not allowed"),
        (["--smp", "9999"], f"--smp 9999 is not allowed: use 1 to {host_cores()} (this host's cores)"),
        (["--smp", "0"], "--smp 0 is not allowed"),
        (["--workload-timeout-s", "nan"], "--workload-timeout-s nan is not allowed: use a finite number"),
        (["--workload-timeout-s", "inf"], "--workload-timeout-s inf is not allowed"),
        (["--boot-timeout-s", "0"], "--boot-timeout-s 0.0 is not allowed"),
        (["--size", "99999999T"], "size 99999999t is not allowed: QEMU's images hold at most"),
        (["--size", "65G"], "size 65g is over this runner's cap of 64g (--max-disk-size)"),
        (
            ["--size", "2G", "--preallocation", "full", "--max-disk-size", "1G"],
            "size 2g is over this runner's cap of 1g (--max-disk-size)",
        ),
    ],
)
def test_a_bad_number_is_one_line_exit_2_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    work, results = tmp_path / "work", tmp_path / "results"
    rc = main([*RUN, *flags, "--work-dir", str(work), "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"diskbench: error: {message}"), err
    assert err.count("\n") == 1
    assert not work.exists() and not results.exists()


def test_a_spec_size_qemu_img_refuses_is_exit_2_before_anything_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "big.toml"
    spec.write_text(
        '[axes]\nformat = ["qcow2"]\n\n[params]\nworkload = "dd"\nsize = "1T"\ncluster_size = "512"\n'
    )
    work, results = tmp_path / "work", tmp_path / "results"
    # over the runner's default cap of 64G: raised, so that qemu-img is the one that refuses
    rc = main(
        ["sweep", str(spec), "--work-dir", str(work), "--results-dir", str(results), "--max-disk-size", "2T"]
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert (
        "size 1t of qcow2 is not allowed: qemu-img says: The image size is too large (try using a larger cluster size)"
        in err
    )
    assert not work.exists() and not results.exists()

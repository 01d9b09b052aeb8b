"""The package installed from its wheel works outside a checkout: it finds its own data.

The wheel is built from the checkout's files (tracked and new ones, never ``build/`` leftovers)
without network, installed into a fresh venv that sees no checkout, and its ``diskbench`` is run
from a directory outside the checkout: ``sweep --preset list`` (the presets), ``show`` (the record
schema), ``report`` (a preset's seed figures) and ``compare``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from gitrepo import copy_worktree

from harness.paths import REPO_ROOT
from harness.presets import load_preset
from harness.record import Record, Sample, new_record, write_record
from harness.spec import make_cell
from harness.sweep import expand_spec

pytestmark = pytest.mark.integration

# a preset's sweep of made-up samples: seed 001's write times, sparse qcow2 twice sparse raw
BOOTH_WRITE = {
    "raw-off": [16.0, 15.0, 15.5],
    "raw-falloc": [14.0, 14.5, 15.0],
    "qcow2-off": [30.0, 31.0, 29.0],
    "qcow2-metadata": [15.0, 14.0, 14.5],
}


def _can_build_wheels() -> bool:
    """setuptools builds wheels itself from 70.1 on; before, only with the ``wheel`` package."""
    return any(importlib.util.find_spec(name) for name in ("setuptools.command.bdist_wheel", "wheel"))


def _record(cell: dict[str, Any], run_id: str, totals: list[dict[str, float]]) -> Record:
    record = new_record(
        cell=cell,
        machine={"hostname": "h", "accel": "tcg", "qemu_version": "7.2.22", "qemu_img_version": "7.2.22"},
        subject={},
        vm={"accel": "tcg", "mem_mib": 256, "smp": 1},
        run_id=run_id,
    )
    return replace(
        record,
        samples=tuple(Sample(index=i, status="ok", metrics=metrics) for i, metrics in enumerate(totals)),
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with diskbench installed from a wheel of this checkout; the dependencies come
    from this interpreter's site-packages through a ``.pth`` file (no network)."""
    if not _can_build_wheels():
        pytest.skip("this venv's setuptools cannot build a wheel offline: run scripts/setup.sh (dev extra)")
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"
    copy_worktree(source)
    wheels = base / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run(
        [
            *pip,
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        cwd=base,
    )
    (wheel,) = wheels.glob("diskbench-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True)  # fmt: skip
    (site,) = (venv / "lib").glob("python3*/site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "zz-dependencies.pth").write_text("".join(f"{p}\n" for p in deps))
    return venv


def _run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_installed_package_reads_its_own_data_outside_a_checkout(installed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert not outside.resolve().is_relative_to(REPO_ROOT)
    python = str(installed / "bin" / "python")
    where = _run(
        installed,
        python,
        "-c",
        "import sys, harness; from harness.gate import GATE_SPEC; from harness.presets import PRESETS_DIR; "
        "from harness.record.schema import RECORD_SCHEMA_PATH; "
        "print(harness.__file__, GATE_SPEC, PRESETS_DIR, RECORD_SCHEMA_PATH, *sys.path, sep='\\n')",
        cwd=outside,
    )
    assert where.returncode == 0, where.stderr
    (
        package,
        *data,
    ) = where.stdout.splitlines()[:4]
    site = Path(package).parent.parent
    assert site.is_relative_to(installed) and site.name == "site-packages"
    assert all(Path(p).is_relative_to(site / "harness" / "data") and Path(p).exists() for p in data)
    assert not any(Path(p).resolve() == REPO_ROOT for p in where.stdout.splitlines()[4:] if p)

    diskbench = str(installed / "bin" / "diskbench")
    listed = _run(installed, diskbench, "sweep", "--preset", "list", cwd=outside)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines() if line and not line.startswith(" ")]
    assert names == [
        "booth-2010",
        "cluster-size",
        "kvm-wiki-install",
        "mkfs-sparse",
        "preallocation",
        "subclusters",
    ]
    assert "diskbench sweep --preset booth-2010 --scale" in listed.stdout

    # a preset's records, as a sweep of booth-2010 at scale 0.25 leaves them
    sweep = outside / "results" / "sweeps" / "booth-2010-scale0.25"
    for cell in expand_spec(load_preset("booth-2010").at_scale(0.25)).cells:
        times = BOOTH_WRITE[f"{cell.image.format.value}-{cell.image.preallocation}"]
        metrics = [{"phase.write_s": t, "mib_per_s": 64 / t} for t in times]
        write_record(
            sweep / f"{cell.id}.json", _record(cell.as_dict(), "sweep-booth-2010-scale0.25", metrics)
        )
    shown = _run(installed, diskbench, "show", str(sweep), "--all", cwd=outside)
    assert shown.returncode == 0, shown.stderr
    assert "raw-off" in shown.stdout and "15.5 s ± 3.2%" in shown.stdout

    report = _run(installed, diskbench, "report", str(sweep), "--html", "out/r.html", cwd=outside)
    assert report.returncode == 0, report.stderr
    assert "15.3 seconds (truncate --size 300M)" in report.stdout  # the seed's figure, from the wheel
    assert "4 of 4 measured claims of seed 001 hold today" in report.stdout
    assert (outside / "out" / "r.html").read_text().startswith("<!DOCTYPE html>")

    # a record the schema refuses: one line naming the file and the field, exit 2
    bad = outside / "bad.json"
    bad.write_text(json.dumps({"schema": "diskbench-record", "version": 1, "cell": {}, "machine": {},
                               "samples": "oops"}))  # fmt: skip
    refused = _run(installed, diskbench, "show", str(bad), cwd=outside)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "bad.json" in refused.stderr and "samples" in refused.stderr

    cell = make_cell(workload="dd", dd_mib=64).as_dict()
    for side, scale in (("base", 1.0), ("head", 1.3)):
        totals = [{"total_s": scale * (10 + 0.05 * i)} for i in range(8)]
        write_record(outside / side / f"{cell['id']}.json", _record(cell, side, totals))
    compared = _run(installed, diskbench, "compare", "base", "head", "--out", "cmp", cwd=outside)
    assert compared.returncode == 1, compared.stderr
    assert "REGRESSION" in compared.stdout
    assert json.loads((outside / "cmp" / "comparison.json").read_text())["verdict"] == "regression"

    # nothing was written next to the installed package (its default work and results dirs)
    assert not (site / "work").exists() and not (site / "results").exists()

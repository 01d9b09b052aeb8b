"""A real second QEMU: Debian's 10.0.2 (bookworm-backports) fetched by ``diskbench qemu get``, its
qemu-img run, and one short dd guest run under it.

The build is fetched once into the QEMU cache (``/var/cache/diskbench/qemu`` as root, about 16 MB
of packages from the package registry) and reused by every later run; nothing else is reached.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.host.hostinfo import tool_version
from harness.host.proc import run
from harness.subject.qemu_build import QemuBuild, load_build

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("apt-get") is None, reason="fetches Debian's packages with apt"),
]


@pytest.fixture(scope="module")
def build_10() -> QemuBuild:
    """``diskbench qemu get 10.0``: fetched, or found in the cache and checked."""
    import contextlib
    import io

    from harness.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["qemu", "get", "10.0"]) == 0
    prefix = Path(out.getvalue().strip().splitlines()[-1])
    return load_build(prefix)


def test_qemu_get_10_0_gives_a_checked_build_of_10_0_2(build_10: QemuBuild) -> None:
    assert build_10.version == "10.0.2"
    assert build_10.debian_version.startswith("1:10.0.2+")
    assert dict(build_10.packages)["qemu-utils"] == build_10.debian_version
    build_10.check()
    # run as QEMU's account, as every run of it will be
    line = tool_version(str(build_10.binary("qemu-img")))
    assert line == f"qemu-img version 10.0.2 (Debian {build_10.debian_version})"


def test_the_builds_own_firmware_comes_first(build_10: QemuBuild) -> None:
    result = run(
        [str(build_10.binary("qemu-system-x86_64")), *build_10.qemu_args(), "-L", "help"], timeout_s=60
    )
    dirs = result.stdout.split()
    assert dirs[: len(build_10.data_dirs)] == [str(d) for d in build_10.data_dirs]
    assert (build_10.prefix / "usr/share/seabios/bios-256k.bin").is_file()


@pytest.mark.guest
def test_a_dd_cell_runs_under_10_0_2_and_says_so(build_10: QemuBuild, tmp_path: Path, disk_dir: Path) -> None:
    from harness.cli import main
    from harness.record import find_records

    results = tmp_path / "results"
    argv = ["run", "--qemu", "10.0", "--workload", "dd", "--dd-mib", "8", "--size", "256M", "--repeat", "1"]
    argv += ["--accel", "tcg", "--results-dir", str(results), "--work-dir", str(disk_dir)]
    assert main(argv) == 0
    (record,) = find_records([results / "records"], recursive=True)
    assert [s.status for s in record.samples] == ["ok"]
    machine = record.machine.data
    assert machine["qemu"] == str(build_10.binary("qemu-system-x86_64"))
    assert machine["qemu_version"] == "10.0.2"
    assert machine["qemu_img_version"] == "10.0.2"
    assert machine["qemu_debian_version"] == build_10.debian_version
    assert machine["qemu_sha256"] == dict(build_10.digests)["qemu-system-x86_64"]
    assert machine["qemu_build"] == str(build_10.prefix)
    assert "-L" in (record.samples[0].argv or [])


@pytest.mark.guest
def test_a_run_puts_the_runners_qemu_and_10_0_side_by_side(
    build_10: QemuBuild, tmp_path: Path, disk_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main
    from harness.record import find_records

    results = tmp_path / "results"
    argv = ["run", "--qemu", "runner,10.0", "--workload", "dd", "--dd-mib", "8", "--size", "256M"]
    argv += ["--repeat", "1", "--accel", "tcg", "--results-dir", str(results), "--work-dir", str(disk_dir)]
    assert main(argv) == 0, capsys.readouterr().err[-3000:]
    (run_dir,) = (results / "records").iterdir()
    assert sorted(p.name for p in run_dir.iterdir()) == ["qemu-10.0", "qemu-runner"]
    (runner,) = find_records([run_dir / "qemu-runner"])
    (ten,) = find_records([run_dir / "qemu-10.0"])
    assert runner.cell_id == ten.cell_id and runner.ok and ten.ok
    assert ten.machine.get("qemu_version") == "10.0.2" and ten.machine.get("qemu_img_version") == "10.0.2"
    assert ten.samples[0].figure("host.create_s") is not None, "the build's own qemu-img created its image"
    assert runner.machine.get("qemu") == "qemu-system-x86_64"
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert f"QEMU builds side by side: {runner.machine.get('qemu_version')}, 10.0.2" in out


GATE_SPEC = """
name = "qemu-pin-gate"
rounds = 4
max_rounds = 4
budget_min = 10
metrics = ["total_s"]

[params]
dd_mib = 8

[[cells]]
name = "policy-dd"
workload = "dd"
size = "256M"
"""


@pytest.mark.guest
def test_a_gate_whose_head_moves_the_pin_runs_both_builds(
    build_10: QemuBuild, tmp_path: Path, disk_dir: Path
) -> None:
    """Head only moves the policy's pin from the runner's QEMU (7.2 here) to 10.0."""
    from gatekit import tcg_gate
    from gitrepo import clone_project, git

    from harness.compare.comparison import load_comparison
    from harness.gate import parse_gate_spec

    repo = clone_project(tmp_path / "repo")
    policy = repo / "policy.toml"
    policy.write_text(policy.read_text() + '\n[qemu]\nversion = "10.0"\n')
    git(repo, "commit", "-q", "-am", "policy: QEMU 10.0")
    spec = parse_gate_spec(GATE_SPEC, source="qemu-pin-gate.toml")
    result = tcg_gate(repo, spec, "HEAD~1", "HEAD", disk_dir=disk_dir, out_dir=tmp_path / "out", seed=7)
    doc = load_comparison(tmp_path / "out" / "comparison.json").to_json()
    assert doc["head"]["machine"]["qemu_version"] == "10.0.2"
    assert doc["head"]["machine"]["qemu_debian_version"] == build_10.debian_version
    assert doc["base"]["machine"]["qemu_version"] != "10.0.2"  # the runner's
    diff = {d["what"]: (d["base"], d["head"]) for d in doc["summary"]["subject_diff"]}
    assert diff["QEMU pin"] == ("runner", "10.0")
    base_build, head_build = diff["QEMU build"]
    assert base_build.startswith(f"Debian {doc['base']['machine']['qemu_debian_version']}")
    assert head_build.startswith(f"Debian {build_10.debian_version}")
    # the summary's markdown escapes the Debian versions' tildes
    assert f"- QEMU build: {base_build} → {head_build}".replace("~", "\\~") in result.markdown
    (cell,) = doc["cells"]
    assert cell["verdict"] in ("regression", "improvement", "unchanged", "inconclusive")
    assert cell["rounds"] == 4
    total = next(m for m in cell["metrics"] if m["metric"] == "total_s")
    assert total["ratio"] > 0 and total["ci_low"] is not None  # a figure with its interval

"""The pure parts of history: machine names, ranges, configs, figures, overrides, page assets."""

from __future__ import annotations

import json
import math
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git, new_repo

from harness.cli import main
from harness.errors import UsageError
from harness.history import asvrun as history
from harness.history import pages
from harness.record import CellInfo, MachineInfo, Record, Sample
from harness.sweep import parse_spec
from harness.workloads import Metric, metric_info

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from history import layout, run  # noqa: E402

CONFIGS = (REPO / "asv.conf.json", REPO / "benchmarks" / "qemu" / "asv.conf.json")


# -- machine names --------------------------------------------------------------------


def test_the_machine_name_carries_the_accelerator() -> None:
    assert history.machine_name("runner7", "kvm") == "runner7-kvm"
    assert history.machine_name("vm", "tcg") == "vm-tcg"
    assert history.accel_of_machine("my-host-tcg") == "tcg"
    assert history.accel_of_machine("vm") is None
    assert history.accel_of_machine("vm-tcgx") is None
    with pytest.raises(UsageError, match="auto"):
        history.machine_name("vm", "auto")


def test_a_machine_name_of_the_other_accelerator_is_refused() -> None:
    assert history.check_machine("vm-tcg", "tcg") == "vm-tcg"
    with pytest.raises(
        UsageError, match=r"--machine vm-kvm says kvm, but this host runs guests under tcg: use vm-tcg"
    ):
        history.check_machine("vm-kvm", "tcg")
    with pytest.raises(UsageError, match=r"end the name in -kvm or -tcg .* e\.g\. bench-kvm"):
        history.check_machine("bench", "kvm")


def test_a_host_disk_model_is_part_of_the_machine_name_and_never_mixes_with_native() -> None:
    assert history.machine_name("vm", "tcg", "period-hdd") == "vm-period-hdd-tcg"
    assert history.machine_name("vm", "tcg", "native") == "vm-tcg"
    assert history.check_machine("vm-period-hdd-tcg", "tcg", "period-hdd") == "vm-period-hdd-tcg"
    with pytest.raises(
        UsageError, match=r"names the host disk native, .* model period-hdd: use vm-period-hdd-tcg"
    ):
        history.check_machine("vm-tcg", "tcg", "period-hdd")
    with pytest.raises(UsageError, match=r"names the host disk period-hdd, .* the native disk: use vm-tcg"):
        history.check_machine("vm-period-hdd-tcg", "tcg")
    with pytest.raises(UsageError, match=r"e\.g\. bench-period-hdd-kvm"):
        history.check_machine("bench", "kvm", "period-hdd")


def test_history_refuses_an_unknown_host_disk_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--host-disk", "floppy"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "floppy" in err and "period-hdd" in err


def test_the_suite_reads_the_same_suffix_and_refuses_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("vm-tcg", "vm-kvm", "vm", "a-b-kvm"):
        assert layout.accel_of_machine(name) == history.accel_of_machine(name)
    with pytest.raises(run.HistoryRefused, match="DISKBENCH_ASV_MACHINE is not set"):
        run.machine_accel({})
    with pytest.raises(run.HistoryRefused, match="does not end in -kvm or -tcg"):
        run.machine_accel({"DISKBENCH_ASV_MACHINE": "vm"})
    assert run.machine_accel({"DISKBENCH_ASV_MACHINE": "vm-kvm"}) == ("vm-kvm", "kvm")


def test_the_subject_must_be_the_commit_asv_measures(tmp_path: Path) -> None:
    with pytest.raises(run.HistoryRefused, match="no subject in"):
        run.load_subject({"ASV_ENV_DIR": str(tmp_path)})
    subject = tmp_path / "diskbench-subject"
    subject.mkdir()
    (subject / "subject.json").write_text(json.dumps({"commit": "a" * 40, "policy": "policy.toml"}))
    directory, data = run.load_subject({"ASV_ENV_DIR": str(tmp_path), "ASV_COMMIT": "a" * 40})
    assert directory == subject and data["policy"] == "policy.toml"
    with pytest.raises(run.HistoryRefused, match=f"of commit {'a' * 40}, asv measures {'b' * 40}"):
        run.load_subject({"ASV_ENV_DIR": str(tmp_path), "ASV_COMMIT": "b" * 40})


# -- ranges and commits -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["main", "..main", "main..", "a...b", "a b..c", "-x..y"])
def test_a_range_must_be_a_dot_dot_b(text: str) -> None:
    with pytest.raises(UsageError, match=r"is not A\.\.B"):
        history.parse_range(text)


def test_a_range_splits_in_two() -> None:
    assert history.parse_range("main~5..main") == ("main~5", "main")
    assert history.parse_range("v1.0..HEAD") == ("v1.0", "HEAD")


def make_repo(path: Path, commits: int) -> list[str]:
    new_repo(path)
    hashes = []
    for n in range(commits):
        (path / "f").write_text(str(n))
        git(path, "add", "f")
        git(path, "commit", "-q", "-m", f"c{n}")
        hashes.append(git(path, "rev-parse", "HEAD"))
    return hashes


def test_commits_come_oldest_first(tmp_path: Path) -> None:
    hashes = make_repo(tmp_path, 4)
    assert history.select_commits(tmp_path, "main", commits=3, range_=None) == hashes[1:]
    assert history.select_commits(tmp_path, "main", commits=None, range_=None) == hashes[-1:]
    assert history.select_commits(tmp_path, "main", commits=None, range_="main~2..main") == hashes[2:]
    with pytest.raises(UsageError, match="selects no commit"):
        history.select_commits(tmp_path, "main", commits=None, range_="main..main")
    with pytest.raises(UsageError, match=r"--range nope\.\.main: git cannot read it"):
        history.select_commits(tmp_path, "main", commits=None, range_="nope..main")
    with pytest.raises(UsageError, match="--commits 0: use 1 or more"):
        history.select_commits(tmp_path, "main", commits=0, range_=None)


def test_a_bad_range_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_repo(tmp_path / "repo", 2)
    conf = tmp_path / "repo" / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, "repo": ".", "branches": ["main"]}))
    assert main(["history", "--config", str(conf), "--range", "nope..main"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("diskbench: error: --range nope..main: git cannot read it")
    assert main(["history", "--config", str(conf), "--range", "main"]) == 2
    assert "is not A..B" in capsys.readouterr().err


def test_a_missing_config_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--config", str(tmp_path / "nope.json"), "--publish-only"]) == 2
    assert "does not exist" in capsys.readouterr().err


# -- the asv configs ----------------------------------------------------------------------


def test_configs_parse_with_their_comments() -> None:
    conf = history.load_asv_config(CONFIGS[0])
    assert conf.repo == "." and conf.branch == "main" and conf.repo_path == REPO
    assert conf.results_dir == REPO / "results" / "asv"
    qemu = history.load_asv_config(CONFIGS[1])
    assert qemu.repo_path is None and qemu.branch == "master"
    assert qemu.results_dir == REPO / "results" / "asv-qemu"
    assert qemu.html_dir == REPO / "html" / "qemu"
    with pytest.raises(UsageError, match=r"x.json:2: not valid JSON"):
        history.parse_asv_config('{"repo": ".",\n,}', source="x.json")
    with pytest.raises(UsageError, match="no 'repo'"):
        history.parse_asv_config("// just a comment\n{}", source="x.json")


@pytest.mark.parametrize("path", CONFIGS, ids=["diskbench", "qemu"])
def test_asv_itself_reads_the_configs_and_every_command_is_runnable(path: Path) -> None:
    """asv looks up a command's program in the environment's bin/ only: others need a path."""
    from asv.config import Config
    from asv.util import interpolate_command

    conf = Config.load(str(path))
    assert conf.benchmark_dir and conf.install_command and conf.build_command
    variables = {
        k: f"/x/{k}" for k in ("env_dir", "build_dir", "build_cache_dir", "conf_dir", "wheel_file", "project")
    }
    variables["commit"] = "a" * 40
    for command in [*conf.build_command, *conf.install_command, *conf.uninstall_command]:
        argv, _env, _codes, _cwd = interpolate_command(command, variables)
        assert argv[0] in ("python",) or "/" in argv[0], command
        if argv[0] == "python" and argv[1].endswith("asv_subject.py"):
            script = Path(argv[1].replace("/x/conf_dir", str(path.parent)))
            assert script.resolve() == REPO / "benchmarks" / "asv_subject.py"
    benchmark_dir = (path.parent / conf.benchmark_dir).resolve()
    assert benchmark_dir == REPO / "benchmarks" / "history"


def test_the_qemu_build_is_lean_and_makes_two_targets() -> None:
    from asv.config import Config

    (build, collect) = Config.load(str(CONFIGS[1])).build_command
    script = shlex.split(build)[-1]
    assert "--target-list=x86_64-softmmu" in script
    assert "--enable-seccomp" in script, "the harness runs QEMU with -sandbox on"
    assert "--without-default-features" in script and "--enable-tools" in script
    assert script.endswith("make -j$(nproc) qemu-system-x86_64 qemu-img")
    assert "collect-qemu" in collect and "{build_cache_dir}" in collect


def test_a_derived_config_is_absolute_and_keeps_its_helper(tmp_path: Path) -> None:
    conf = history.load_asv_config(CONFIGS[1])
    data = history.derive_config(conf, repo=tmp_path)
    assert data["repo"] == str(tmp_path.resolve())
    for key in history.PATH_KEYS:
        assert Path(data[key]).is_absolute(), key
    assert data["benchmark_dir"] == str(REPO / "benchmarks" / "history")
    assert all("{conf_dir}" not in c for c in data["install_command"] + data["build_command"])
    assert f"{REPO / 'benchmarks' / 'qemu'}/../asv_subject.py install" in " ".join(data["install_command"])


# -- figures -----------------------------------------------------------------------------------


def test_higher_is_better_figures_are_stored_as_their_inverse() -> None:
    fig = layout.figure_of(metric_info("mib_per_s"))
    assert (fig.name, fig.unit, fig.method) == ("s_per_gib", "seconds", "track_s_per_gib")
    assert fig.value(64.0) == 16.0  # 64 MiB/s: 16 s per GiB
    assert math.isnan(fig.value(0.0))
    assert "up is worse" in fig.pretty
    kib = layout.figure_of(Metric("bonnie.seq_output_block_kib_per_s", "KiB/s", True, "x"))
    assert kib.name == "bonnie.seq_output_block_s_per_gib" and kib.value(1024.0**2) == 1.0
    ops = layout.figure_of(Metric("bonnie.seq_create_per_s", "1/s", True, "x"))
    assert ops.name == "bonnie.seq_create_s_per_op" and ops.value(4.0) == 0.25
    with pytest.raises(ValueError, match="cannot invert"):
        layout.figure_of(Metric("odd_per_s", "furlongs/s", True, "x"))


def test_lower_is_better_figures_are_kept_with_asv_units() -> None:
    total = layout.figure_of(metric_info("total_s"))
    assert (total.name, total.unit, total.factor) == ("total_s", "seconds", None)
    assert layout.figure_of(metric_info("host.written_bytes")).unit == "bytes"
    wa = layout.figure_of(metric_info("host.write_amplification"))
    assert (wa.method, wa.unit) == ("track_host_write_amplification", "ratio")
    assert layout.figure_of(metric_info("files")).informational


def test_every_workload_has_its_phases_and_host_figures() -> None:
    dd = {f.name for f in layout.workload_figures("dd")}
    assert {"total_s", "phase.write_s", "phase.mkfs_s", "host.boot_s", "s_per_gib", "host.flushes"} <= dd
    assert "mib_per_s" not in dd
    install = {f.name for f in layout.workload_figures("install")}
    assert {"phase.unpack_s", "phase.extract_s", "packages", "host.write_amplification"} <= install
    bonnie = {f.name for f in layout.workload_figures("bonnie")}
    assert "bonnie.seq_output_block_s_per_gib" in bonnie
    for wl in ("dd", "install", "bonnie", "mkfs"):
        methods = [f.method for f in layout.workload_figures(wl)]
        assert len(methods) == len(set(methods)), wl


def record(samples: list[dict[str, Any]]) -> Record:
    return Record(
        cell=CellInfo({"id": "c", "workload": {"name": "dd"}}),
        machine=MachineInfo(),
        samples=tuple(Sample.from_json(s) for s in samples),
    )


def test_the_io_path_is_tracked_beside_total_s() -> None:
    """dev.* percentiles of every guest workload; fio's completion latencies per job of its target."""
    from harness.sweep import expand_spec, load_spec

    dd = {f.name: f for f in layout.workload_figures("dd")}
    for name in ("dev.write_p50_ms", "dev.write_p99_ms", "dev.read_p90_ms", "dev.flush_mean_ms", "dev.io_s"):
        assert name in dd, name
    assert dd["dev.write_p99_ms"].unit == "ms" and dd["dev.io_s"].unit == "seconds"
    raw = {f.name for f in layout.workload_figures("fio", {"fio_target": "raw"})}
    assert {"fio.raw-rand-write-qd1.clat_p99_ms", "fio.raw-fsync-write.clat_mean_ms", "total_s"} <= raw
    assert not any(n.startswith("fio.file-") for n in raw)
    both = {f.name for f in layout.workload_figures("fio")}
    assert "fio.file-seq-read.clat_p50_ms" in both and "fio.raw-seq-read.clat_p50_ms" in both
    methods = [f.method for f in layout.workload_figures("fio")]
    assert len(methods) == len(set(methods))
    assert "track_fio_raw_rand_read_qd32_clat_p99_ms" in methods
    spec = load_spec(REPO / "sweeps" / "history.toml")
    fio_cells = [c for c in expand_spec(spec).cells if c.workload.name == "fio"]
    assert len(fio_cells) == 2, "fio on the direct-IO virtio-blk cells only"
    assert spec.params["fio_target"] == "raw"


def test_figures_are_medians_and_a_failed_cell_is_all_nan() -> None:
    figures = [layout.figure_of(metric_info(n)) for n in ("total_s", "mib_per_s", "phase.write_s")]
    ok = [
        {"status": "ok", "metrics": {"total_s": 2.0, "mib_per_s": 64.0, "phase.write_s": 1.0}},
        {"status": "ok", "metrics": {"total_s": 4.0, "mib_per_s": 32.0}},
        {"status": "ok", "metrics": {"total_s": 3.0, "mib_per_s": 128.0, "phase.write_s": 1.0}},
    ]
    got = layout.cell_figures(record(ok), figures)
    assert got["total_s"] == 3.0 and got["s_per_gib"] == 16.0
    assert math.isnan(got["phase.write_s"]), "a figure missing from a sample is no number"
    failed = [*ok, {"status": "error", "reason": "boot timeout", "metrics": {}}]
    assert all(math.isnan(v) for v in layout.cell_figures(record(failed), figures).values())
    assert all(math.isnan(v) for v in layout.cell_figures(record([]), figures).values())


# -- the matrix and its overrides -------------------------------------------------------------


def test_the_spec_and_repeats_can_be_overridden(tmp_path: Path) -> None:
    assert layout.spec_path({}) == REPO / "sweeps" / "history.toml"
    assert layout.spec_path({"DISKBENCH_HISTORY_SPEC": str(tmp_path / "t.toml")}) == tmp_path / "t.toml"
    spec = parse_spec('repeat = 2\n[params]\nworkload = "dd"\n')
    assert layout.repeat_of(spec, {}) == 2
    assert layout.repeat_of(spec, {"DISKBENCH_HISTORY_REPEAT": "1"}) == 1
    for bad in ("0", "two", "-1"):
        with pytest.raises(UsageError, match="DISKBENCH_HISTORY_REPEAT"):
            layout.repeat_of(spec, {"DISKBENCH_HISTORY_REPEAT": bad})


def test_the_default_matrix_is_format_cache_interface_per_workload() -> None:
    from harness.subject.policy import load_policy
    from harness.sweep import load_spec

    spec = load_spec(REPO / "sweeps" / "history.toml")
    policy = load_policy(REPO / "policy.toml")
    groups = layout.matrix_groups(spec)
    assert [g.class_name for g in groups] == ["Install", "Dd", "Fio", "Bonnie"]
    bonnie = {
        key: layout.matrix_cell(spec, policy, "bonnie", values) for key, values in groups[3].combinations()
    }
    ran = {key: cell for key, cell in bonnie.items() if cell is not None}
    assert sorted(ran) == [("qcow2", "none", "virtio-blk"), ("raw", "none", "virtio-blk")]
    assert all(c.workload.bonnie_char == "on" and c.workload.bonnie_files == 1 for c in ran.values())
    names = {f.name for f in layout.workload_figures("bonnie", spec.params)}
    for test in ("seq_output_block", "rewrite", "seq_output_char", "seq_input_char", "seq_input_block"):
        assert f"bonnie.{test}_s_per_gib" in names, test
    assert {
        "bonnie.seq_create_s_per_op",
        "bonnie.seq_delete_s_per_op",
        "bonnie.random_delete_s_per_op",
    } <= names
    assert groups[1].param_names == ("format", "cache", "interface")
    assert groups[1].params == [["raw", "qcow2"], ["none", "writeback"], ["virtio-blk", "ide"]]
    cells = {key: layout.matrix_cell(spec, policy, "dd", values) for key, values in groups[1].combinations()}
    assert len(cells) == 8 and all(c is not None for c in cells.values())
    qcow2 = cells[("qcow2", "none", "virtio-blk")]
    assert qcow2 is not None and qcow2.image.preallocation == policy.image["preallocation"]
    (policy_group,) = [g for g in layout.policy_groups(spec) if g.workload == "dd"]
    ((key, values),) = policy_group.combinations()
    assert key == ()
    assert layout.policy_cell(spec, policy, "dd", values) == qcow2, "the policy's cell is a matrix cell"


def test_the_policys_classes_take_the_workloads_own_axes_as_the_registry_declares_them() -> None:
    spec = parse_spec(
        '[axes]\nfio_ios = [500, 2000]\ncache = ["none", "writeback"]\ndd_mib = [64]\n'
        '[params]\nworkload = "fio"\nfs = "ext2"\nformat = "raw"\n'
    )
    (group,) = layout.policy_groups(spec)
    # the disk's axes belong to the matrix; the workload's (any workload's) to the policy's cell
    assert group.param_names == ("fio_ios", "dd_mib")
    cell = layout.policy_cell(spec, None, "fio", {"fio_ios": 500, "dd_mib": 64})
    assert (cell.workload.fs, cell.workload.fio_ios, cell.image.format) == ("ext2", 500, "qcow2")


def test_an_excluded_combination_is_a_gap() -> None:
    spec = parse_spec(
        '[axes]\nformat = ["raw", "qcow2"]\ncache = ["none", "writeback"]\n[params]\nworkload = "dd"\n'
        '[[exclude]]\nformat = "raw"\ncache = "none"\nreason = "r"\n'
    )
    (group,) = layout.matrix_groups(spec)
    cells = {key: layout.matrix_cell(spec, None, "dd", values) for key, values in group.combinations()}
    assert cells[("raw", "none")] is None and cells[("raw", "writeback")] is not None
    data = {"matrix": {"dd": {k: (c.id if c else None) for k, c in cells.items()}}, "cells": {}}
    data["cells"] = {c.id: {"total_s": 1.5} for c in cells.values() if c}
    assert layout.lookup(data, "matrix", "dd", ["raw", "writeback"], "total_s") == 1.5
    assert math.isnan(layout.lookup(data, "matrix", "dd", ["raw", "none"], "total_s"))
    assert math.isnan(layout.lookup(data, "matrix", "dd", ["raw", "writeback"], "phase.write_s"))


def test_benchmark_classes_carry_units_params_and_a_version() -> None:
    spec = parse_spec('[axes]\nformat = ["raw", "qcow2"]\n[params]\nworkload = "dd"\n')
    (group,) = layout.matrix_groups(spec)
    cls = layout.benchmark_class(group, "matrix", "history.matrix")
    assert cls.__name__ == "Dd" and cls.params == [["raw", "qcow2"]] and cls.param_names == ["format"]
    track = cls.track_s_per_gib
    assert track.unit == "seconds" and track.version == layout.SUITE_VERSION
    cell = layout.matrix_cell(spec, None, "dd", {"format": "raw"})
    assert cell is not None
    data = {"matrix": {"dd": {("raw",): cell.id}}, "cells": {cell.id: {"s_per_gib": 16.0}}}
    assert cls().track_s_per_gib(data, "raw") == 16.0
    assert math.isnan(cls().track_s_per_gib(data, "qcow2"))


# -- page assets -------------------------------------------------------------------------------


def test_cdn_loads_become_local_with_their_own_integrity() -> None:
    asset = pages.ASSETS[0]
    html = (
        f'<script src="{asset.url}" integrity="sha256-OLD" crossorigin="anonymous"></script>\n'
        '<script src="https://example.invalid/other.js"></script>\n'
        '<a href="https://github.com/airspeed-velocity/asv/">asv</a>\n'
        '<script src="asv.js"></script>\n'
    )
    text, left = pages.rewrite(html, pages.ASSETS, {asset.local: "sha384-NEW"})
    assert f'src="{asset.local}" integrity="sha384-NEW"' in text
    assert asset.url not in text
    assert left == ["https://example.invalid/other.js"], "a link is not a load; an unknown script is"


def test_asset_integrity_is_checked() -> None:
    package = pages.Package("x", "1", pages.digest_of(b"").replace("sha384", "sha512"))
    with pytest.raises(Exception, match="refusing it"):
        pages.check_integrity(b"tampered", package)


# -- asv's failures and the suite's failed cells ------------------------------------------------


def test_a_failing_asv_is_exit_3_naming_its_log(tmp_path: Path) -> None:
    from harness.errors import ExitCode, InfraError

    log = tmp_path / "logs" / "history.log"
    fake_asv = [sys.executable, "-c", "import sys; print('asv: setup_cache failed'); sys.exit(2)"]
    with pytest.raises(InfraError) as caught:
        history._asv(fake_asv, ["run"], log, "asv run")
    assert caught.value.message == f"asv run failed with exit code 2: see {log}"
    assert caught.value.exit_code == ExitCode.INFRA
    assert "asv: setup_cache failed" in log.read_text(), "the log keeps asv's output"


def test_failed_cells_are_named_per_commit(tmp_path: Path) -> None:
    from harness.record import new_record, write_record

    def write(commit: str, cell_id: str, statuses: list[str]) -> None:
        rec = new_record(cell={"id": cell_id}, machine={}, subject={}, vm={}, run_id="history")
        rec = replace(rec, samples=tuple(Sample.from_json({"status": s}) for s in statuses))
        write_record(tmp_path / "vm-tcg" / commit / "sweeps" / "history" / f"{cell_id}.json", rec)

    write("a" * 40, "raw.dd", ["ok", "ok"])
    write("a" * 40, "qcow2.dd", ["ok", "error"])
    write("b" * 40, "raw.dd", ["ok"])
    assert history.failed_cells(tmp_path, "vm-tcg", ["a" * 40, "b" * 40, "c" * 40]) == {
        "a" * 40: ("qcow2.dd",)
    }


def test_the_install_step_copies_the_commits_subject(tmp_path: Path) -> None:
    import asv_subject

    source = tmp_path / "checkout"
    (source / "images" / "workloads").mkdir(parents=True)
    (source / "images" / "workloads" / "dd.sh").write_text("# dd\n")
    (source / "policy.toml").write_text('[drive]\ncache = "none"\n')
    build = tmp_path / "build"
    build.mkdir()
    for name in asv_subject.QEMU_BINARIES:
        (build / name).write_text("#!/bin/sh\n")
    (build / "pc-bios").mkdir()
    (build / "pc-bios" / "bios-256k.bin").write_text("fw")
    asv_subject.main(["collect-qemu", "--build-dir", str(build), "--out", str(tmp_path / "cache")])
    argv = ["install", "--commit", "c" * 40, "--source", str(source), "--env-dir", str(tmp_path / "env")]
    asv_subject.main([*argv, "--qemu-dir", str(tmp_path / "cache"), "--no-guest"])
    subject = tmp_path / "env" / "diskbench-subject"
    data = json.loads((subject / "subject.json").read_text())
    assert data["commit"] == "c" * 40 and data["policy"] == "policy.toml" and data["recipe"] == "images"
    assert (subject / "images" / "workloads" / "dd.sh").read_text() == "# dd\n"
    assert data["qemu"] == str(subject / "qemu" / "qemu-system-x86_64")
    assert (subject / "qemu" / "pc-bios" / "bios-256k.bin").read_text() == "fw"
    with pytest.raises(SystemExit, match="was not built"):
        asv_subject.main(["collect-qemu", "--build-dir", str(source), "--out", str(tmp_path / "x")])


def test_the_small_matrix_is_one_dd_cell_the_policys_own_with_one_sample() -> None:
    from harness.subject.policy import load_policy
    from harness.sweep import expand_spec, load_spec

    spec = load_spec(REPO / "sweeps" / "history-small.toml")
    policy = load_policy(REPO / "policy.toml")
    (cell,) = expand_spec(spec, policy=policy).cells
    assert spec.repeat == 1 and cell.workload.name == "dd"
    (group,) = layout.policy_groups(spec)
    ((_key, values),) = group.combinations()
    assert layout.policy_cell(spec, policy, "dd", values) == cell

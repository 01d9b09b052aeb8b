"""The storage policy: defaults for unset cell values, extra -drive options, bad input named."""

from __future__ import annotations

import os
import re
import stat
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tcgopts import tcg_options

from harness.cli import build_parser, main
from harness.cli.common import resolve_binaries
from harness.errors import SpecError
from harness.record import Sample, new_record, write_record
from harness.sample.guest_sampler import RunOptions, vm_config
from harness.sample.vm import Drive
from harness.spec import Aio, Cache, Format, Interface, make_cell
from harness.subject.binaries import Binaries
from harness.subject.policy import Policy, load_policy, parse_policy
from harness.sweep import expand_spec, parse_spec

REPO = Path(__file__).resolve().parents[2]
SOURCE = "site/policy.toml"

# a platform's policy: qcow2 with every format-specific option set, and a throttle
SITE = """\
description = "a site's qcow2 on nvme"

[image]
format = "qcow2"
preallocation = "metadata"
cluster_size = "1M"
lazy_refcounts = true
compat = "1.1"
size = "4G"

[drive]
cache = "none"
aio = "native"
interface = "nvme"

[drive.options]
"throttling.bps-write" = 1048576
discard = "unmap"
"""


def site() -> Policy:
    return parse_policy(SITE, source=SOURCE)


def test_the_repositorys_policy_parses_and_gives_its_cell() -> None:
    policy = load_policy(REPO / "policy.toml")
    assert policy.source == str(REPO / "policy.toml")
    assert policy.format is Format.QCOW2
    assert policy.description
    assert policy.drive_options == ()
    cell = policy.cell(workload="dd", dd_mib=64)
    assert cell.image.format is Format.QCOW2
    assert cell.image.preallocation == "off"
    assert cell.image.cluster_size == 65536
    assert cell.image.size == 2 * 1024**3
    assert (cell.drive.cache, cell.drive.aio, cell.drive.interface) == (
        Cache.NONE,
        Aio.THREADS,
        Interface.VIRTIO_BLK,
    )


def test_format_specific_image_keys_apply_only_to_cells_of_the_policys_format() -> None:
    policy = site()
    raw = policy.defaults_for({"format": "raw"})
    for key in ("preallocation", "cluster_size", "lazy_refcounts", "compat"):
        assert key not in raw, key
    assert raw["size"] == "4G"
    assert (raw["cache"], raw["aio"], raw["interface"]) == ("none", "native", "nvme")
    qcow2 = policy.defaults_for({"format": "QCOW2"})
    assert qcow2["preallocation"] == "metadata"
    assert qcow2["cluster_size"] == "1M"

    raw_cell = policy.cell(format="raw", workload="dd")
    assert raw_cell.image.format is Format.RAW
    assert raw_cell.image.preallocation == "off"
    assert raw_cell.image.cluster_size is None
    assert raw_cell.image.size == 4 * 1024**3
    assert (raw_cell.drive.cache, raw_cell.drive.aio, raw_cell.drive.interface) == (
        Cache.NONE,
        Aio.NATIVE,
        Interface.NVME,
    )
    own = policy.cell(workload="dd")
    assert own.image.format is Format.QCOW2
    assert (own.image.preallocation, own.image.cluster_size, own.image.lazy_refcounts) == (
        "metadata",
        1024**2,
        True,
    )


def test_the_specs_values_win_over_the_policys() -> None:
    cell = site().cell(
        format="qcow2",
        preallocation="falloc",
        cluster_size="64K",
        size="2G",
        cache="writeback",
        aio="threads",
        interface="ide",
        workload="dd",
    )
    assert cell == make_cell(
        format="qcow2",
        preallocation="falloc",
        cluster_size="64K",
        lazy_refcounts=True,
        size="2G",
        cache="writeback",
        aio="threads",
        interface="ide",
        workload="dd",
    )


@pytest.mark.parametrize(
    "options",
    [
        '[drive.options]\n"throttling.bps-write" = 1048576\ndiscard = true\n',
        "[drive.options]\nthrottling.bps-write = 1048576\ndiscard = true\n",
        "[drive.options]\ndiscard = true\n[drive.options.throttling]\nbps-write = 1048576\n",
        '[drive]\noptions = { throttling = { "bps-write" = 1048576 }, discard = true }\n',
    ],
    ids=["quoted-dotted", "dotted", "nested-table", "inline"],
)
def test_drive_options_flatten_alike_in_every_spelling(options: str) -> None:
    policy = parse_policy(options, source=SOURCE)
    assert dict(policy.drive_options) == {"throttling.bps-write": "1048576", "discard": "on"}
    flat = parse_policy('[drive.options]\n"throttling.bps-write" = 1048576\ndiscard = true\n')
    assert policy.digest == flat.digest


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[drive.options]\n"detect-zeroes" = "unmap,file=/etc/passwd"',
            "detect-zeroes = 'unmap,file=/etc/passwd': use one of off, on, unmap",
        ),
        (
            '[drive.options]\ndiscard = "unmap file"',
            "discard = 'unmap file': use one of ignore, unmap, off, on",
        ),
        ('[drive.options]\nfile = "/var/tmp/other.img"', "'file' is not a -drive option a policy may set"),
        (
            '[drive.options]\n"file.filename" = "/var/tmp/other.img"',
            "'file.filename' is not a -drive option a policy may set",
        ),
        ('[drive.options]\n"file.aio" = "native"', "'file.aio' is not a -drive option a policy may set"),
        ('[drive.options]\n"cache.direct" = false', "'cache.direct' is not a -drive option a policy may set"),
        ("[drive.options]\nformat = 'raw'", "'format' is not a -drive option a policy may set"),
        ("[drive.options]\nid = 'disk1'", "'id' is not a -drive option a policy may set"),
        ("[drive.options]\nsnapshot = true", "'snapshot' is not a -drive option a policy may set"),
        ('[drive.options]\n"throttling.bps-write" = 1.5', "throttling.bps-write = 1.5: use a number"),
        ('[drive.options]\n"Throttling.BPS" = 1', "'Throttling.BPS' is not a -drive option a policy may set"),
        ("[drive.options]\nwerror = [1, 2]", "werror = [1, 2]: use a number, a string or true/false"),
        (
            '[drive.options]\n"throttling.bps-write" = 1\n[drive.options.throttling]\nbps-write = 2',
            "'throttling.bps-write' is given twice",
        ),
        ("[drive]\noptions = 'discard=unmap'", "[drive.options] must be a table"),
        ("[disk]\nformat = 'raw'", "unknown table 'disk'"),
        ("name = 'site'", "unknown key 'name'"),
        ("[image]\nformt = 'raw'", "unknown [image] key 'formt'"),
        ("[drive]\nbus = 'ide'", "unknown [drive] key 'bus'"),
        ("[image]\nformat = 'vmdk'", "[image] format 'vmdk' is not a format: use one of raw, qcow2"),
        ("[image]\nlazy_refcounts = 'off'", "[image] lazy_refcounts = 'off': use true or false"),
        ("[image]\ncluster_size = 65536.0", "[image] cluster_size = 65536.0: use a string or a number"),
        ("[image]\nsize = true", "[image] size = True: use a string or a number"),
        ("[drive]\ncache = 1", "[drive] cache = 1: use a string"),
        ("[image]\nformat = 'raw'\ncluster_size = '64K'", "cluster_size '64K' applies to qcow2 only"),
        ("[drive]\ncache = 'writeback'\naio = 'native'", "aio=native needs a direct cache mode"),
        ("[drive]\ncache = 'fast'", "unknown cache mode 'fast'"),
        ("description = 3", "description must be a string"),
        ("[image\nformat = 'raw'", "not valid TOML"),
    ],
)
def test_bad_policy_is_a_spec_error_naming_the_file_and_the_key(text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_policy(text, source=SOURCE)
    assert caught.value.message.startswith(f"{SOURCE}: ")
    assert message in caught.value.message


def test_a_bad_policy_file_is_named_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[drive.options]\nfile = '/dev/sda'\n")
    with pytest.raises(
        SpecError, match=rf"^{re.escape(str(path))}: \[drive.options\] 'file' is not a -drive"
    ):
        load_policy(path)
    with pytest.raises(SpecError, match=r"does not exist: pass a policy.toml"):
        load_policy(tmp_path / "nonexistent.toml")


def test_digest_changes_with_a_drive_option_and_not_with_comments() -> None:
    base = site()
    commented = parse_policy(
        "# a comment before\n" + SITE.replace('discard = "unmap"', 'discard = "unmap"   # saves space'),
        source="elsewhere/policy.toml",
    )
    assert commented.digest == base.digest
    added = parse_policy(SITE + '"detect-zeroes" = "unmap"\n', source=SOURCE)
    assert added.digest != base.digest
    changed = parse_policy(SITE.replace("1048576", "2097152"), source=SOURCE)
    assert changed.digest != base.digest
    reordered = parse_policy(
        SITE.replace(
            '"throttling.bps-write" = 1048576\ndiscard = "unmap"',
            'discard = "unmap"\n"throttling.bps-write" = 1048576',
        ),
        source=SOURCE,
    )
    assert reordered.drive_options != base.drive_options
    assert reordered.digest == base.digest, "the order of options changes nothing QEMU is given"
    assert len(base.digest) == 12
    assert base.as_dict()["drive_options"] == {"throttling.bps-write": "1048576", "discard": "unmap"}


def test_drive_options_reach_the_drive_argv() -> None:
    options = site().drive_options
    drive = Drive(node="disk0", path=Path("/work/disk.qcow2"), format="qcow2", options=options)
    argv = drive.argv()
    assert argv[0] == "-drive"
    parts = argv[1].split(",")
    assert "throttling.bps-write=1048576" in parts
    assert "discard=unmap" in parts
    assert parts[:4] == ["if=none", "id=disk0", "file=/work/disk.qcow2", "format=qcow2"]


@dataclass
class FakeGuest:
    kernel: Path = Path("/guest/vmlinux")
    initrd: Path = Path("/guest/initrd")
    payloads: dict[str, Path] = field(default_factory=dict)
    tools: Path | None = None
    recipe_hash: str = "0" * 12
    kernel_version: str = "6.1"


def test_run_options_pass_the_policys_drive_options_to_the_disk_under_test(tmp_path: Path) -> None:
    policy = site()
    opts = tcg_options(tmp_path, tmp_path, drive_options=policy.drive_options)
    config = vm_config(policy.cell(workload="dd"), FakeGuest(), opts, tmp_path / "disk.qcow2")
    (disk,) = config.drives
    drive_arg = disk.argv()[1]
    assert "throttling.bps-write=1048576" in drive_arg.split(",")
    assert "cache=none" in drive_arg.split(",") and "aio=native" in drive_arg.split(",")


def test_run_options_binaries_are_the_qemu_each_sample_runs(tmp_path: Path) -> None:
    given = Binaries(qemu="/opt/q/qemu-system-x86_64", qemu_img="/opt/q/qemu-img")
    opts = RunOptions(
        accel="tcg", accel_reason="test", work_dir=tmp_path, results_dir=tmp_path, run_id="t", binaries=given
    )
    cell = make_cell(workload="dd")
    config = vm_config(cell, FakeGuest(), opts, tmp_path / "disk.qcow2")
    argv = config.argv(qmp_path=tmp_path / "q", console=tmp_path / "c", report=tmp_path / "r")
    assert argv[0] == "/opt/q/qemu-system-x86_64"
    # the names on PATH, as the CLI resolves them when nothing names others
    plain = tcg_options(tmp_path, tmp_path)
    assert vm_config(cell, FakeGuest(), plain, tmp_path / "disk.qcow2").qemu == "qemu-system-x86_64"


SPEC = """\
name = "p"

[axes]
format = ["raw", "qcow2"]

[params]
workload = "dd"
dd_mib = 64
"""


def test_expand_spec_with_a_policy_takes_its_drive_values_and_its_formats_image_values() -> None:
    spec = parse_spec(SPEC, source="sweeps/p.toml")
    plain = expand_spec(spec)
    assert {c.drive.cache for c in plain.cells} == {Cache.WRITEBACK}
    plan = expand_spec(spec, policy=site())
    assert not plan.excluded, [e.reason for e in plan.excluded]
    cells = {c.image.format: c for c in plan.cells}
    assert set(cells) == {Format.RAW, Format.QCOW2}
    for cell in plan.cells:
        assert (cell.drive.cache, cell.drive.aio, cell.drive.interface) == (
            Cache.NONE,
            Aio.NATIVE,
            Interface.NVME,
        )
        assert cell.image.size == 4 * 1024**3
    # metadata is qcow2's: raw keeps its own default instead of being excluded
    assert cells[Format.RAW].image.preallocation == "off"
    assert cells[Format.QCOW2].image.preallocation == "metadata"
    assert cells[Format.QCOW2].image.cluster_size == 1024**2


def test_sweep_with_a_missing_policy_exits_2_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent.toml"
    results = tmp_path / "results"
    rc = main(
        [
            "sweep",
            "--policy",
            str(missing),
            str(REPO / "sweeps" / "default.toml"),
            "--dry-run",
            "--work-dir",
            str(tmp_path / "work"),
            "--results-dir",
            str(results),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip() == (
        f"diskbench: error: policy {missing} does not exist: pass a policy.toml such as the repository's own"
    )
    assert not results.exists()


def _exit_code(argv: list[str]) -> int:
    """main's return value, or the code of the SystemExit it raised."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("flag", "variable"), [("--qemu", "DISKBENCH_QEMU"), ("--qemu-img", "DISKBENCH_QEMU_IMG")]
)
def test_binary_flags_refuse_a_non_executable_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    variable: str,
) -> None:
    monkeypatch.setenv(variable, "before")
    plain = tmp_path / "qemu-build"
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    (tmp_path / "records").mkdir()
    assert _exit_code([flag, str(plain), "show", str(tmp_path / "records")]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {plain}: not an executable file" in err
    assert os.environ[variable] == "before"


@pytest.mark.parametrize(
    ("flag", "variable"), [("--qemu", "DISKBENCH_QEMU"), ("--qemu-img", "DISKBENCH_QEMU_IMG")]
)
def test_binary_flags_point_the_harness_at_an_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, variable: str
) -> None:
    monkeypatch.setenv(variable, "before")
    exe = tmp_path / "bin" / "qemu-x"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    # one record to show: an empty directory is bad input (exit 2), which would hide the flag's effect
    cell = make_cell(format="raw", workload="dd")
    record = new_record(cell=cell.as_dict(), machine={}, subject={}, vm={}, run_id="r")
    record = record.with_sample(Sample(index=0, status="ok", metrics={"total_s": 1.0}))
    write_record(tmp_path / "records" / "cell.json", record)
    argv = [flag, str(exe), "show", str(tmp_path / "records")]
    args = build_parser().parse_args(argv)
    binaries = resolve_binaries(qemu=args.qemu, qemu_img=args.qemu_img, environ=os.environ)
    # the flag wins over the environment, made absolute; the other binary is the environment's or PATH's
    assert getattr(binaries, flag.removeprefix("--").replace("-", "_")) == str(exe.resolve())
    assert _exit_code(argv) == 0
    # a value handed down, never written to the environment
    assert os.environ[variable] == "before"


def test_binaries_without_flags_come_from_the_environment_else_path() -> None:
    assert resolve_binaries(qemu=None, qemu_img=None, environ={}) == Binaries(
        "qemu-system-x86_64", "qemu-img"
    )
    environ = {"DISKBENCH_QEMU": "build/qemu-system-x86_64", "DISKBENCH_QEMU_IMG": "/opt/q/qemu-img"}
    given = resolve_binaries(qemu=None, qemu_img=None, environ=environ)
    # as given (records name the binaries exactly so); qemu-io is the one beside qemu-img
    assert given == Binaries("build/qemu-system-x86_64", "/opt/q/qemu-img")
    assert given.qemu_io == "/opt/q/qemu-io"
    assert Binaries.on_path().qemu_io == "qemu-io"


def test_a_raw_policys_preallocation_leaves_qcow2_cells_alone() -> None:
    text = textwrap.dedent(
        """\
        [image]
        format = "raw"
        preallocation = "falloc"

        [drive.options]
        "throttling.bps-write" = 52428800
        "detect-zeroes" = "unmap"
        """
    )
    policy = parse_policy(text, source=SOURCE)
    assert policy.cell(workload="dd").image.preallocation == "falloc"
    # raw's preallocation is not qcow2's: a qcow2 cell keeps its own default
    assert policy.cell(format="qcow2", workload="dd").image.preallocation == "off"

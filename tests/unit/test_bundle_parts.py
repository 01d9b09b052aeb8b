"""The bundle's parts that need no QEMU: ldd's output, the loader's wrapper run for real on a host
program, the self-extracting entry on a small payload, the check's text, and bad input."""

from __future__ import annotations

import grp
import io
import lzma
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.bundle.check import ensure_kvm_access
from harness.bundle.entry import ENTRY_NAME, entry_header
from harness.bundle.natives import LOADER, Program, install_programs, parse_ldd, wrapper_script
from harness.bundle.python import runtime_distributions
from harness.bundle.report import (
    cpu_flag,
    cpu_model,
    gate_summary,
    kvm_modules,
    meminfo_mib,
    os_name,
    render_text,
)
from harness.cli import main

LDD = """\
\tlinux-vdso.so.1 (0x00007ffc1b5f2000)
\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f2f0a1b0000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2f09fcf000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f2f0a1f1000)
"""


def test_ldd_output_names_each_library_by_soname_and_the_loader() -> None:
    libs = parse_ldd(LDD + "\tlibgone.so.3 => not found\n")
    assert dict(libs.needed) == {
        "libz.so.1": Path("/lib/x86_64-linux-gnu/libz.so.1"),
        "libc.so.6": Path("/lib/x86_64-linux-gnu/libc.so.6"),
    }
    assert libs.loader == Path("/lib64/ld-linux-x86-64.so.2")
    assert libs.missing == ("libgone.so.3",)


def test_a_wrapper_runs_its_program_through_the_bundled_loader() -> None:
    text = wrapper_script("qemu-img", env={"QEMU_MODULE_DIR": "$r/lib/qemu"}, args=("-L", "$r/share/qemu"))
    assert text.startswith("#!/bin/sh\n")
    assert 'export QEMU_MODULE_DIR="$r/lib/qemu"' in text
    assert text.rstrip().endswith(
        f'exec "$r/lib/{LOADER}" --library-path "$r/lib" --argv0 "$0" "$r/libexec/qemu-img" "-L" "$r/share/qemu" "$@"'
    )


@pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")
def test_a_host_program_runs_from_a_bundle_with_its_own_libraries(tmp_path: Path) -> None:
    """``env`` (coreutils) carried with its libraries: it runs through the bundle's loader, with
    the variable its wrapper sets, from a copy of the tree elsewhere."""
    env = Path(shutil.which("env") or "/usr/bin/env").resolve()
    root = tmp_path / "bundle"
    libs = install_programs(root, [Program(env, "env", env={"CARRIED": "from $r"})])
    assert "libc.so.6" in libs
    assert (root / "lib" / LOADER).is_file() and (root / "lib" / "libc.so.6").is_file()
    moved = tmp_path / "elsewhere"
    shutil.copytree(root, moved)
    out = subprocess.run([str(moved / "bin" / "env")], capture_output=True, text=True, timeout=30, check=True)
    assert f"CARRIED=from {moved}/bin/.." in out.stdout.splitlines()


def _payload(files: dict[str, str]) -> bytes:
    """An entry's payload: a plain tar holding one ``harness.tar.xz`` of ``files``."""
    inner = io.BytesIO()
    with lzma.open(inner, "wb") as xz, tarfile.open(fileobj=xz, mode="w|") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    outer = io.BytesIO()
    with tarfile.open(fileobj=outer, mode="w") as tar:
        info = tarfile.TarInfo("harness.tar.xz")
        info.size = len(inner.getvalue())
        tar.addfile(info, io.BytesIO(inner.getvalue()))
    return outer.getvalue()


@pytest.fixture
def entry(tmp_path: Path) -> Path:
    header = entry_header(bundle_id="0123456789ab", what="a test")
    offset = int(header.split(b"\noffset=")[1].split(b"\n")[0])
    assert offset == len(header)
    path = tmp_path / ENTRY_NAME
    check = '#!/bin/sh\necho "check: $*"\n'
    diskbench = '#!/bin/sh\necho "diskbench: $*"\n'
    path.write_bytes(header + _payload({"scripts/kvm-check.sh": check, "bin/diskbench": diskbench}))
    return path


def _run_entry(entry: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DISKBENCH_BUNDLE_DIR": str(entry.parent / "unpacked")}
    return subprocess.run(["sh", str(entry), *args], capture_output=True, text=True, timeout=60, env=env)


def test_the_entry_unpacks_once_and_runs_the_check_or_diskbench(entry: Path) -> None:
    first = _run_entry(entry, "kvm-check", "--quick", "--out", "x y")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "check: --quick --out x y\n"
    assert "unpacking to" in first.stderr
    assert (entry.parent / "unpacked" / ".unpacked").is_file()
    second = _run_entry(entry, "diskbench", "gate", "--help")
    assert second.stdout == "diskbench: gate --help\n"
    assert "unpacking" not in second.stderr
    assert _run_entry(entry).stdout == "check: \n"
    assert _run_entry(entry, "unpack").stdout.strip() == str(entry.parent / "unpacked")


def test_an_unknown_entry_command_is_one_line_and_exit_2(entry: Path) -> None:
    done = _run_entry(entry, "bogus")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "diskbench bundle: unknown command 'bogus': use kvm-check, diskbench or unpack"
    )


def test_an_entry_without_a_python_says_so(entry: Path, tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "nothing"), "DISKBENCH_BUNDLE_DIR": str(tmp_path / "u")}
    done = subprocess.run(["/bin/sh", str(entry)], capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 3
    assert "no CPython 3.11 or later here" in done.stderr


def test_the_runtime_packages_are_the_harness_imports_and_rpds_is_the_compiled_one() -> None:
    names = {d.metadata["Name"].lower().replace("_", "-") for d in runtime_distributions()}
    assert {"qemu.qmp", "jsonschema", "referencing", "rpds-py", "attrs", "typing-extensions"} <= names
    assert not names & {"matplotlib", "numpy", "scipy", "pytest"}


def test_machine_files_are_read_as_the_check_says_them() -> None:
    assert meminfo_mib("MemTotal:       24567890 kB\nMemFree: 1 kB\nMemAvailable:   2048000 kB\n") == {
        "MemTotal": 23992,
        "MemAvailable": 2000,
    }
    assert cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n") == (
        "AMD EPYC 9654 96-Core Processor"
    )
    assert kvm_modules("kvm_amd 1 0 - Live\nkvm 2 1 kvm_amd\next4 3 0\n") == ["kvm", "kvm_amd"]
    cpuinfo = "processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n\nprocessor\t: 1\nflags\t\t: fpu vmx\n"
    assert cpu_flag(cpuinfo, "hypervisor") and not cpu_flag(cpuinfo, "vmx") and not cpu_flag("", "hypervisor")
    assert os_name('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n') == (
        "Debian GNU/Linux 12 (bookworm)"
    )


COMPARISON = {
    "verdict": "unchanged",
    "accel": "tcg",
    "summary": {"counts": {"unchanged": 1, "inconclusive": 1}},
    "budget": {"budget_min": 2, "used_min": 1.4, "rounds": 3, "max_rounds": 3, "stopped": "max rounds"},
    "cells": [
        {"cell_id": "a", "title": "raw dd", "verdict": "unchanged", "rounds": 3, "base_ok": 3, "head_ok": 3},
        {
            "cell_id": "b",
            "verdict": "inconclusive",
            "rounds": 3,
            "base_ok": 3,
            "head_ok": 2,
            "reason": "wide",
        },
    ],
}


def test_the_check_text_says_what_was_found_and_the_verdict() -> None:
    gate = {
        "spec": "kvm-check-quick",
        "spec_cells": 2,
        "accel": "tcg",
        "guest_pairs_at_once": "auto",
        "pairs_at_once": 1,
        "crossed_slots": [[0, 1]],
        "exit_code": 0,
        "seconds": 80.0,
        **gate_summary(COMPARISON),
    }
    doc = {
        "quick": True,
        "started_at": "2026-11-27T23:00:00Z",
        "elapsed_s": 150.2,
        "deadline_s": 240.0,
        "machine": {
            "cpus": 2,
            "cpus_usable": 2,
            "crossed_slots": 1,
            "virtualized": True,
            "kvm": {"exists": True, "mode": "660"},
        },
        "tcg": {"boots": True, "seconds": 6.4},
        "kvm": {
            "boots": False,
            "error": "a guest did not boot under KVM: QEMU exited with 1",
            "advice": "try",
        },
        "accel": "tcg",
        "gate": gate,
        "steps": [{"step": "boot-kvm", "error": None}],
        "ok": True,
    }
    text = render_text(doc)
    assert "tcg: a guest boots, ready in 6.4 s" in text
    assert "available); itself a virtual machine (its CPUs say 'hypervisor')" in text
    assert "kvm: no guest boots: a guest did not boot under KVM: QEMU exited with 1" in text
    assert "1 pairs at once on 1 CPU pair slots): verdict unchanged, exit 0" in text
    assert "  raw dd: unchanged after 3 rounds" in text
    assert "  b: inconclusive after 3 rounds" in text
    assert text.endswith("check: ok\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="gives a device to a group: root only")
def test_a_device_of_roots_group_only_is_given_to_kvm_as_setup_does(tmp_path: Path) -> None:
    dev = tmp_path / "kvm"
    dev.write_text("")
    dev.chmod(0o600)
    os.chown(dev, 0, 0)
    done = ensure_kvm_access(str(dev))
    assert done is not None and f"gave {dev} to the group kvm" in done
    assert dev.stat().st_gid == grp.getgrnam("kvm").gr_gid
    assert dev.stat().st_mode & 0o777 == 0o660
    assert ensure_kvm_access(str(dev)) is None  # given already: nothing to do


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["kvmcheck", "--deadline-s", "5"], "diskbench: error: --deadline-s 5: use 60 to 3600 seconds"),
        (["kvmcheck", "--out", "FILE"], "diskbench: error: --out FILE: not a directory"),
        (["bundle", "FILE"], "diskbench: error: bundle: FILE is not a directory: name a new or empty one"),
        (
            ["bundle", "DIR"],
            "diskbench: error: bundle: DIR holds other files (other.txt): name a new or empty directory",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("")
    (tmp_path / "DIR").mkdir()
    (tmp_path / "DIR" / "other.txt").write_text("")
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == message

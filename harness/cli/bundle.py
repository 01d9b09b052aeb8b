"""``diskbench bundle``: QEMU, the built guest and the harness, for a bare machine, in one file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import err
from harness.errors import ExitCode


def add_parser(sub: Any) -> None:
    bundle = sub.add_parser(
        "bundle",
        help="pack QEMU, the guest and the harness into one file for a bare x86-64 Linux machine",
        description=(
            "Write OUT_DIR/diskbench-bundle.sh: one self-extracting file with this host's QEMU "
            "(qemu-system-x86_64, qemu-img, qemu-io) and git, each with every library it loads and the "
            "dynamic loader that runs them, QEMU's firmware, the built guest, and the harness with the "
            "Python packages it imports (compiled ones for CPython 3.11 to 3.13). On the other machine "
            "it needs sh and a CPython >= 3.11, unpacks itself to /tmp and runs the KVM check "
            "(scripts/kvm-check.sh) or any diskbench command. docs/kvm.md."
        ),
        epilog="Exit codes: 0 written, 2 bad OUT_DIR, 3 something to pack is missing, or the bundle is over 60 MiB.",
    )
    bundle.add_argument(
        "out_dir", type=Path, metavar="OUT_DIR", help="a new or empty directory (or a bundle's)"
    )


def run(args: argparse.Namespace) -> int:
    from harness.bundle.build import check_out_dir, make_bundle
    from harness.guest import build_guest
    from harness.paths import cache_dir

    check_out_dir(args.out_dir)  # bad input before the guest is built
    guest = build_guest()
    info = make_bundle(
        args.out_dir,
        binaries=args.binaries,
        guest=guest,
        wheel_cache=cache_dir() / "wheels",
        parts_cache=cache_dir() / "bundle-parts",
        progress=err,
    )
    parts = ", ".join(f"{name} {size / 2**20:.1f}" for name, size in info.parts.items())
    print(
        f"bundle: {info.path} ({info.size_bytes / 2**20:.1f} MiB; {info.unpacked_bytes / 2**20:.1f} MiB unpacked)"
    )
    print(f"inside (MiB unpacked): {parts}")
    print(f"{info.qemu_version}; guest {info.guest}; CPython {', '.join(info.python_tags)}")
    print(f"on the other machine: sh {info.path.name}   (the KVM check; docs/kvm.md)")
    return ExitCode.OK

"""``diskbench qemu``: the QEMU builds Debian's suites offer, fetched into the cache to run as a
side's QEMU (``run --qemu VERSION``)."""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import ExitCode, SpecError


def add_parser(sub: Any) -> None:
    qemu = sub.add_parser(
        "qemu",
        help="list or fetch QEMU builds from Debian's archives",
        description=(
            "QEMU builds made of Debian's packages (qemu-system-x86, qemu-system-common, "
            "qemu-system-data, qemu-utils, qemu-block-extra and the firmware they depend on), "
            "fetched with apt through a private sources list (the system's suites, and backports "
            "where the system lacks them) into the cache, and run with their own firmware and "
            "modules: 'list' shows the versions offered and fetched, 'get' fetches one and prints "
            "its prefix."
        ),
    )
    qsub = qemu.add_subparsers(dest="qemu_command", metavar="ACTION")
    qsub.add_parser(
        "list",
        help="the QEMU versions the configured suites offer, and those fetched",
        description="The QEMU versions the configured suites offer for this machine, and those fetched.",
    )
    get = qsub.add_parser(
        "get",
        help="fetch and unpack a QEMU build; print its prefix",
        description=(
            "Fetch a QEMU build (checked package by package) and unpack it into the cache, unless "
            "it is there already; print its prefix. Give its Debian version whole, or a short form "
            "of QEMU's version (10.0): the newest build it matches, in Debian's version order."
        ),
    )
    get.add_argument("version", metavar="VERSION", help="a Debian version, or a short form such as 10.0")


def run(args: argparse.Namespace) -> int:
    from harness.debian.qemu import QemuCache
    from harness.paths import qemu_cache_dir

    cache = QemuCache(qemu_cache_dir())
    if args.qemu_command == "list":
        offered = cache.offered()
        fetched = {b.debian_version: b for b in cache.fetched()}
        print("offered by the configured suites (newest first):")
        for o in offered:
            mark = "  fetched" if o.debian_version in fetched else ""
            print(f"  {o.upstream:<8} {o.debian_version:<36} {', '.join(o.suites)}{mark}")
        print(f"fetched (in {cache.builds}):" if fetched else f"fetched: none (in {cache.builds})")
        for build in fetched.values():
            print(f"  {build.version:<8} {build.debian_version:<36} {build.prefix}")
        return ExitCode.OK
    if args.qemu_command == "get":
        build = cache.get(args.version)
        print(build.prefix)
        return ExitCode.OK
    raise SpecError("diskbench qemu: give an action: list or get VERSION")

"""``diskbench guest``: build the guest from the pinned recipe, or re-pin it."""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import ExitCode, SpecError


def add_parser(sub: Any) -> None:
    guest = sub.add_parser(
        "guest",
        help="build or re-pin the guest (kernel, initramfs, install payload)",
        description=(
            "The guest every sample boots is built from the pinned Debian packages of the recipe in "
            "images/ and cached by the recipe's hash: 'build' builds it (run and sweep do when needed), "
            "'pin' moves every pin to the mirror's current version."
        ),
    )
    gsub = guest.add_subparsers(dest="guest_command", metavar="ACTION")
    gbuild = gsub.add_parser(
        "build",
        help="build the guest from the pinned recipe in images/ (cached by its hash)",
        description="Build the guest from the pinned recipe in images/, unless built already (cached by its hash).",
    )
    gbuild.add_argument("--force", action="store_true", help="rebuild even if cached")
    gsub.add_parser(
        "pin",
        help="re-pin every package of the recipe to the mirror's current version",
        description="Re-pin every package of the recipe to the version the mirror has now (apt-cache policy).",
    )


def run(args: argparse.Namespace) -> int:
    from harness.guest import build_guest, pin_recipe

    if args.guest_command == "build":
        art = build_guest(force=args.force)  # progress: logged to stderr
        print(f"guest {art.recipe_hash}: kernel {art.kernel}, initrd {art.initrd}")
        for name, path in sorted(art.payloads.items()):
            print(f"payload {name}: {path}")
        return ExitCode.OK
    if args.guest_command == "pin":
        pin_recipe()
        return ExitCode.OK
    raise SpecError("diskbench guest: give an action: build or pin")

"""``diskbench accel``: which accelerator works here, and why."""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import ExitCode


def add_parser(sub: Any) -> None:
    acc = sub.add_parser(
        "accel",
        help="say which accelerator works here, and why",
        description=(
            "Boot the guest under KVM once (the result is cached per host kernel and QEMU binary, by its "
            "path and digest: another kernel or QEMU build probes again) and "
            "say which accelerator samples will run under, why, and what to do if KVM does not work."
        ),
    )
    acc.add_argument(
        "--accel",
        default="auto",
        choices=("auto", "kvm", "tcg"),
        help="the accelerator to check: auto tries KVM and says why it falls back to TCG; kvm fails "
        "(exit 3) where KVM does not work; tcg needs no check",
    )
    acc.add_argument("--no-cache", action="store_true", help="probe again even if a result is cached")


def run(args: argparse.Namespace) -> int:
    from harness.guest import build_guest
    from harness.sample.accel import advice, choose_accel

    art = build_guest()
    # the answer below says the reason once, whole: choose_accel's warning would say it again
    choice = choose_accel(
        args.accel,
        art.kernel,
        art.initrd,
        warn=lambda _message: None,
        use_cache=not args.no_cache,
        qemu=args.binaries.qemu,
    )
    print(f"accel: {choice.accel} ({choice.reason})")
    if choice.problem:
        print(f"what to do: {advice(choice.problem)}")
    return ExitCode.OK

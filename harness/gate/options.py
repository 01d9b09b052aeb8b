"""What a gate run was asked for, decided once before anything runs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from harness.gate.spec import GateSpec
from harness.paths import REPO_ROOT
from harness.subject.policy import POLICY_FILE
from harness.sweep.limits import MAX_DISK_BYTES


@dataclass(frozen=True)
class GateOptions:
    """The spec's rounds and budget unless the caller gave its own, and how to run the samples.

    ``boot_timeout_s`` of None takes the accelerator's default
    (:data:`harness.rounds.session.BOOT_TIMEOUT_S`).
    """

    rounds: int
    max_rounds: int
    budget_s: float
    seed: int
    default_policy: Path
    build_command: str | None = None
    canary: bool = True
    accel: str = "auto"
    start: str = "auto"
    boot_timeout_s: float | None = None
    workload_timeout_s: float = 1800.0
    # the runner's cap on a cell's disk (--max-disk-size), for both sides' cells
    max_disk_bytes: int = MAX_DISK_BYTES
    # where a side's [qemu] pin is fetched (harness.debian.qemu); None: qemu_cache_dir()
    qemu_cache: Path | None = None

    @classmethod
    def decide(
        cls,
        spec: GateSpec,
        *,
        rounds: int | None = None,
        max_rounds: int | None = None,
        budget_min: float | None = None,
        seed: int | None = None,
        default_policy: Path | None = None,
        build_command: str | None = None,
        canary: bool = True,
        accel: str = "auto",
        start: str = "auto",
        boot_timeout_s: float | None = None,
        workload_timeout_s: float = 1800.0,
        max_disk_bytes: int = MAX_DISK_BYTES,
    ) -> GateOptions:
        """The options of a run of ``spec``; a seed not given is drawn (and recorded in the output)."""
        rounds = rounds or spec.rounds
        return cls(
            rounds=rounds,
            max_rounds=max(max_rounds or spec.max_rounds, rounds),
            budget_s=(budget_min if budget_min is not None else spec.budget_min) * 60,
            seed=seed if seed is not None else random.SystemRandom().randrange(2**31),
            default_policy=default_policy or REPO_ROOT / POLICY_FILE,
            build_command=build_command,
            canary=canary,
            accel=accel,
            start=start,
            boot_timeout_s=boot_timeout_s,
            workload_timeout_s=workload_timeout_s,
            max_disk_bytes=max_disk_bytes,
        )

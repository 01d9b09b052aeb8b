"""What a gate run was asked for, decided once before anything runs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from harness.gate.spec import GateSpec
from harness.paths import REPO_ROOT
from harness.rounds.session import MachineOptions
from harness.subject.policy import POLICY_FILE
from harness.sweep.limits import MAX_DISK_BYTES


@dataclass(frozen=True)
class GateAsked:
    """What a gate or a bisection was asked for by the flags they share
    (:mod:`harness.cli.gate_args`): None leaves it to the spec (or draws the seed, or takes this
    repository's policy)."""

    rounds: int | None = None
    max_rounds: int | None = None
    budget_min: float | None = None
    seed: int | None = None
    default_policy: Path | None = None
    build_command: str | None = None
    canary: bool = True


@dataclass(frozen=True)
class GateOptions:
    """The spec's rounds and budget unless the caller gave its own, and how to run the samples:
    ``machine`` (its binaries run a side that brings none of its own)."""

    rounds: int
    max_rounds: int
    budget_s: float
    seed: int
    default_policy: Path
    machine: MachineOptions
    build_command: str | None = None
    canary: bool = True
    # the runner's cap on a cell's disk (--max-disk-size), for both sides' cells
    max_disk_bytes: int = MAX_DISK_BYTES
    # where a side's [qemu] pin is fetched (harness.debian.qemu); None: qemu_cache_dir()
    qemu_cache: Path | None = None

    @classmethod
    def decide(
        cls,
        spec: GateSpec,
        machine: MachineOptions,
        asked: GateAsked = GateAsked(),
        *,
        max_disk_bytes: int = MAX_DISK_BYTES,
    ) -> GateOptions:
        """The options of a run of ``spec``; a seed not given is drawn (and recorded in the output)."""
        rounds = asked.rounds or spec.rounds
        return cls(
            rounds=rounds,
            max_rounds=max(asked.max_rounds or spec.max_rounds, rounds),
            budget_s=(asked.budget_min if asked.budget_min is not None else spec.budget_min) * 60,
            seed=asked.seed if asked.seed is not None else random.SystemRandom().randrange(2**31),
            default_policy=asked.default_policy or REPO_ROOT / POLICY_FILE,
            machine=machine,
            build_command=asked.build_command,
            canary=asked.canary,
            max_disk_bytes=max_disk_bytes,
        )

"""A gate for the tests: two sides on fake sessions (the tests of the gate's rounds), or a real
gate of the test's spec under TCG (the integration tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.compare import Settings
from harness.gate import (
    SIDES,
    GateAsked,
    GateOptions,
    GateResult,
    GateSide,
    GateSpec,
    Subject,
    SubjectSource,
    run_gate,
    settings_for,
)
from harness.paths import REPO_ROOT
from harness.rounds.session import MachineOptions
from harness.subject.binaries import Binaries
from harness.subject.policy import parse_policy


def fake_sides(spec: GateSpec, session: Callable[[str], Any]) -> dict[str, GateSide]:
    """Base and head of a gate of ``spec`` under the repository's policy, each on the session
    ``session(label)`` gives, each with the spec's cells resolved."""
    policy = parse_policy((REPO_ROOT / "policy.toml").read_text())
    sides = {}
    for label in SIDES:
        subject = Subject(label, label, "0" * 40, Path("/c"), policy, Path("/i"), None, None)
        sides[label] = GateSide(
            subject=subject, session=session(label), cells={gc.name: gc.resolve(policy) for gc in spec.cells}
        )
    return sides


def tcg_gate_options(
    spec: GateSpec, disk_dir: Path, out_dir: Path, *, seed: int, **machine: Any
) -> GateOptions:
    """The options of a real gate of ``spec`` under TCG: the binaries on PATH, the images under
    ``disk_dir``, the results in ``out_dir``, ``seed``, no canary; ``machine``
    (``workload_timeout_s=15.0``...) beside in its MachineOptions."""
    return GateOptions.decide(
        spec,
        MachineOptions(
            binaries=Binaries.on_path(), work_dir=disk_dir, results_dir=out_dir, accel="tcg", **machine
        ),
        GateAsked(seed=seed, canary=False),
    )


def tcg_gate(
    repo: Path,
    spec: GateSpec,
    base: str | SubjectSource,
    head: str | SubjectSource,
    *,
    disk_dir: Path,
    out_dir: Path,
    seed: int,
    **machine: Any,
) -> GateResult:
    """A real gate of ``spec`` between ``base`` and ``head`` of the checkout ``repo`` (each a
    revision, or a SubjectSource), with the spec's own settings and the options
    ``tcg_gate_options`` gives; its outputs in ``out_dir``."""
    sources = (
        base if isinstance(base, SubjectSource) else SubjectSource("base", base),
        head if isinstance(head, SubjectSource) else SubjectSource("head", head),
    )
    return run_gate(
        repo=repo,
        sources=sources,
        spec=spec,
        settings=settings_for(spec, Settings()),
        options=tcg_gate_options(spec, disk_dir, out_dir, seed=seed, **machine),
        out_dir=out_dir,
    )

"""A gate's two sides on fake sessions, for the tests of the gate's rounds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.gate import SIDES, GateSide, GateSpec, Subject
from harness.paths import REPO_ROOT
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

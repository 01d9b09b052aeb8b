"""Fixtures of the workflow tests: act, and a World (one stand-in GitHub) per module.

Every test here is marked ``workflows`` (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from actkit import act_binary


@pytest.fixture(scope="session")
def act() -> Path:
    """act v0.2.89, built once by scripts/act.sh."""
    return act_binary()

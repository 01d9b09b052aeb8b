"""Fixtures of the workflow tests: act, and a World (one stand-in GitHub) per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from actkit import act_binary


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.workflows)


@pytest.fixture(scope="session")
def act() -> Path:
    """act v0.2.89, built once by scripts/act.sh."""
    return act_binary()

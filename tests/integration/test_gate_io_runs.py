"""A real gate under TCG whose head's policy changes the cache mode: the summary names it, the
device's latency and the flush count see it where the wall time does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from gatekit import tcg_gate

from harness.errors import ExitCode
from harness.gate import parse_gate_spec

# timed: the verdict is read from the pairs' times; one at a time, never beside another test
pytestmark = [pytest.mark.integration, pytest.mark.guest, pytest.mark.timed]

# one cell, the policy's own; 8 rounds: the family has 5 tests (2 gated metrics, 3 counters), and
# a flush count that drops to zero on every head sample (ties) is significant at Holm's strictest
# level 0.01/5 from 8 rounds on
SPEC = """
name = "test-gate-io"
rounds = 8
max_rounds = 8
budget_min = 20
metrics = ["total_s", "dev.write_p90_ms"]
min_effect = "5%"

[params]
dd_mib = 64

[[cells]]
name = "policy-dd"
workload = "dd"
"""


def test_a_writethrough_head_is_not_inconclusive_and_the_summary_names_the_cache(
    writethrough_repo: Path, tmp_path: Path, disk_dir: Path, guest: object
) -> None:
    spec = parse_gate_spec(SPEC, source="test-gate-io.toml")
    result = tcg_gate(
        writethrough_repo, spec, "base", "writethrough", disk_dir=disk_dir, out_dir=tmp_path / "out", seed=11
    )
    doc, lines = result.comparison.to_json(), result.markdown.splitlines()
    (cell,) = doc["cells"]
    # the IO path changed: a regression of the device's latency, or a change of the flushes
    assert doc["verdict"] in ("regression", "changed"), result.markdown
    assert cell["verdict"] in ("regression", "changed"), cell["reason"]
    assert result.exit_code == ExitCode.REGRESSION
    flushes = next(c for c in cell["counters"] if c["metric"] == "host.flushes")
    assert flushes["median_base"] > 0 and flushes["median_head"] == 0
    latency = next(m for m in cell["metrics"] if m["metric"] == "dev.write_p90_ms")
    assert latency["ratio"] > 1.05
    # before any table: what differs, and both ids of the renamed cell
    table = next(i for i, line in enumerate(lines) if line.startswith("| cell |"))
    assert "- cache: none → writethrough" in lines[:table]
    assert any(line.startswith("- cell `policy-dd`: base `") for line in lines[:table])
    assert ".none-threads-" in cell["cell"]["base_id"] and ".writethrough-threads-" in cell["cell_id"]
    # the table names the cell and gives both ids under its name
    assert f"(base: <code>{cell['cell']['base_id']}</code>)" in result.markdown
    print(result.markdown)

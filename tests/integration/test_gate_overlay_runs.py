"""A real gate under TCG whose head's policy gives its overlays subclusters (``[overlay]
extended_l2 = true``): the overlay cell is named changed, its copy-on-write amplification far below
base's, and the summary says where the policy's change applied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gatekit import tcg_gate
from gitrepo import commit_policy

from harness.errors import ExitCode
from harness.gate import parse_gate_spec

pytestmark = [pytest.mark.integration, pytest.mark.guest]

# The default gate's overlay cell, smaller: 4 KiB random writes, 2 x 200, over a 16 MiB region of
# an overlay whose base has those 16 MiB written (256 clusters of 64K). Samples taken apart: at 6
# rounds complete separation gives p = 2/924, within Holm's 0.01 over the spec's two tests.
SPEC = """
name = "test-gate-overlay"
rounds = 6
max_rounds = 6
budget_min = 10
metrics = ["host.workload_s"]
counters = ["host.write_amplification"]
changed_fails = true

[[cells]]
name = "policy-overlay-fio"
format = "qcow2"
preallocation = "off"
backing = "depth=1,fill=16M"
workload = "fio"
fio_jobs = "random"
fio_target = "raw"
fio_size_mib = 16
fio_ios = 200
"""


@pytest.fixture(scope="module")
def repo(project_clone: Callable[[str], Path]) -> Path:
    """A clone of this repository with one more commit: the policy's overlays have subclusters."""
    path = project_clone("gate-overlay")
    assert "[overlay]" not in (path / "policy.toml").read_text()
    subclusters = "\n[overlay]\nextended_l2 = true\n"
    return commit_policy(
        path, lambda text: text + subclusters, "policy: subclusters for the overlays", "subclusters"
    )


def test_subclusters_for_the_overlays_change_the_overlay_cell(
    repo: Path, tmp_path: Path, disk_dir: Path, guest: object
) -> None:
    spec = parse_gate_spec(SPEC, source="test-gate-overlay.toml")
    result = tcg_gate(repo, spec, "base", "subclusters", disk_dir=disk_dir, out_dir=tmp_path / "out", seed=45)
    doc = result.comparison.to_json()
    assert result.exit_code == ExitCode.REGRESSION, result.markdown  # a changed cell fails the gate
    (cell,) = doc["cells"]
    assert cell["verdict"] == "changed", cell
    assert "-l2ext-2g-over-d1-f16m-" in cell["cell_id"]
    (amplification,) = cell["counters"]
    # without subclusters a first write to a 64K cluster copies the rest of it from the base
    assert amplification["metric"] == "host.write_amplification" and amplification["verdict"] == "improvement"
    assert amplification["median_base"] > 4 and amplification["median_head"] < 1.5, amplification
    diff = next(e for e in doc["summary"]["subject_diff"] if e["what"] == "overlay extended_l2")
    assert (diff["base"], diff["head"]) == ("(unset)", "on")
    assert diff["where"].startswith("1 of 1 cell")
    assert "qcow2 extended_l2 over d1 16M none virtio-blk · fio raw" in result.markdown

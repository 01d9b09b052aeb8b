"""A real gate with a replay cell on a throwaway clone: head's policy changes the cache mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gatekit import tcg_gate

from harness.gate import parse_gate_spec

# timed: the verdict is read from the replays' times; one at a time, never beside another test
pytestmark = [pytest.mark.integration, pytest.mark.guest, pytest.mark.timed]

# one replay cell, the policy's own: 4 rounds of 4 pairs = 16 samples a side, one pass each; the
# family is 2 tests, and 16 pairs reach p < 0.01 / 2 by the exact signed-rank test with a pair or
# two the other way (12 pairs needed all one way: the write mean was inconclusive once on a quiet
# host at +31.2 %, 95 % CI +13.3 ... +84.9 %; 8 pairs left the wall time to the t route alone)
SPEC = """
name = "test-gate-replay"
rounds = 4
max_rounds = 4
budget_min = 10
metrics = ["replay.wall_s", "replay.write_mean_ms"]
min_effect = "5%"
replay_samples = 4
replay_passes = 1
replay_together = true
# both qemu-io on one CPU: writethrough's flushes make crossed pairs of this short stream too
# noisy for 12 pairs (its write mean +28 %, 95 % CI +3.6 ... +50.9 % once); the crossed pass is
# tested in test_replay.py
replay_pairing = "shared"

[[cells]]
name = "policy-replay"
workload = "dd"
dd_mib = 64
measure = "replay"
"""


def test_a_writethrough_head_is_seen_by_the_replay_of_bases_stream(
    writethrough_repo: Path, tmp_path: Path, disk_dir: Path, guest: object
) -> None:
    spec = parse_gate_spec(SPEC, source="test-gate-replay.toml")
    out = tmp_path / "out"
    result = tcg_gate(writethrough_repo, spec, "base", "writethrough", disk_dir=disk_dir, out_dir=out, seed=5)
    doc = result.comparison.to_json()
    (cell,) = doc["cells"]
    assert cell["verdict"] == "regression", result.markdown
    assert cell["cell_id"].endswith(".replay") and ".writethrough-" in cell["cell_id"]
    assert cell["rounds"] == 16
    metrics = {m["metric"]: m for m in cell["metrics"]}
    assert metrics["replay.write_mean_ms"]["n_base"] == metrics["replay.write_mean_ms"]["n_head"] == 16
    # every gated metric says what it could see, and the summary says it after the table; its
    # first lines name the regressed cell, its deciding metric and change
    assert all(m["could_see_pct"] is not None for m in cell["metrics"])
    lines = result.markdown.splitlines()
    # under the headline and its line of what each kind of cell could see, the regressed cell first
    assert any(line.startswith("Could see: 1 replay cell") for line in lines[:6])
    first = next(line for line in lines if line.startswith("- **"))
    assert first.startswith(f"- **{cell['title']}**: `replay.") and first.endswith(", regression")
    assert any(
        line.startswith("Could see ")
        for line in lines[lines.index("| cell | metric | base | head | change (95% CI) | verdict |") :]
    )
    # base's stream replayed by both sides; head's recorded too (writethrough is guest-visible: the
    # device says it has no volatile write cache) and compared with base's
    assert len(list((out / "streams").glob("*.key.json"))) == 2
    digests = set()
    for side in ("base", "head"):
        (record_path,) = (out / "records" / side).glob("*.json")
        record = json.loads(record_path.read_text())
        assert len(record["samples"]) == 16
        for sample in record["samples"]:
            assert sample["status"] == "ok", sample.get("reason")
            # each pass at the same moment as its partner's, on one CPU
            assert sample["replay"]["passes_together"] == 1
            assert len(sample["replay"]["cpus"]) == 1 and "crossed" not in sample["replay"]
            assert sample["host"]["stream"]["given"].startswith("base ")
            digests.add(sample["host"]["stream"]["digest"])
        assert record["samples"][0]["replay"]["options"]["cache"] == (
            "none" if side == "base" else "writethrough"
        )
    assert len(digests) == 1
    print(result.markdown)

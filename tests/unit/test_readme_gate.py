"""The README's "Add the gate to your repository": its two workflows are YAML that calls what
this repository has (the reusable workflow's inputs, the action's inputs), with the names, paths,
label and artifact that tie the gate, its comment and this repository's own workflows together."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[dict[str, Any]]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Add the gate to your repository") : readme.index("## GitHub\n")]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def _on(doc: dict[str, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true


def test_the_gate_workflow_calls_the_reusable_one_with_inputs_it_has() -> None:
    gate, _ = _blocks()
    reusable = yaml.safe_load((ROOT / ".github/workflows/gate-reusable.yml").read_text())
    inputs = _on(reusable)["workflow_call"]["inputs"]
    job = gate["jobs"]["bench"]
    assert job["uses"].startswith("OWNER/diskbench/.github/workflows/gate-reusable.yml@")
    assert set(job["with"]) <= set(inputs)
    assert {k for k, v in inputs.items() if v.get("required")} <= set(job["with"])
    assert "safe-to-bench" in job["if"] and gate["permissions"] == {}
    # the same approval as this repository's own gate
    own = yaml.safe_load((ROOT / ".github/workflows/gate.yml").read_text())
    assert " ".join(job["if"].split()) == " ".join(own["jobs"]["bench"]["if"].split())
    assert gate["run-name"] == own["run-name"]


def test_the_comment_workflow_follows_that_gate_and_uses_the_action_as_it_is() -> None:
    gate, comment = _blocks()
    assert _on(comment)["workflow_run"]["workflows"] == [gate["name"]]
    assert ".github/workflows/diskbench-gate.yml" in comment["jobs"]["comment"]["if"]
    step = next(s for s in comment["jobs"]["comment"]["steps"] if "gate-comment" in str(s.get("uses")))
    action = yaml.safe_load((ROOT / ".github/actions/gate-comment/action.yml").read_text())
    assert set(step["with"]) <= set(action["inputs"])
    assert step["with"]["pages-url"] == "${{ vars.DISKBENCH_PAGES_URL }}"
    download = next(
        s for s in comment["jobs"]["comment"]["steps"] if "download-artifact" in str(s.get("uses"))
    )
    assert download["with"]["name"] == gate["jobs"]["bench"]["with"]["artifact-name"]
    assert "safe-to-bench" in comment["jobs"]["unlabel"]["steps"][0]["run"]

"""The GitHub workflows keep their security rules, and each rule can fail.

Every rule is a function from a workflow (its file name, parsed YAML and text) to the list of
its violations; each is run on the real workflows (no violation) and on a small bad workflow
(the violation it exists for). The rules:

- a ``pull_request_target`` workflow (it runs from the base branch, with the base repository's
  token) only for ``main``, with no write permission and no secrets, each job gated by approval;
- no job that may land on a self-hosted runner is reachable from a ``pull_request`` trigger (that
  runs the pull request's own workflow files), directly or through a reusable workflow;
- a pull request's tree checked out with ``allow-unsafe-pr-checkout`` is data: it has its own
  ``path:``, no step runs in it or runs anything from it, it only reaches the harness's ``--repo``;
- ``permissions: {}`` at the top, and every job names its own;
- no write permission in a workflow that pull requests trigger;
- every remote ``uses:`` pinned to a 40-hex commit with a ``# vX.Y.Z`` comment;
- every ``actions/checkout`` with ``persist-credentials: false``, none opting into a PR checkout;
- no ``${{ }}`` expression inside a ``run:`` script (values reach scripts through ``env:``);
- the PR gate's self-hosted job runs for a fork only on the ``safe-to-bench`` label event,
  decided by its ``if:``, evaluated here on real event shapes;
- self-hosted jobs ask for ``--accel kvm`` and never for another accelerator;
- a ``workflow_run`` workflow checks out no other ref and downloads artifacts outside the workspace;
- a ``workflow_run`` job that may write takes only runs of this repository's ``gate.yml`` triggered
  by ``pull_request_target``, decided by its ``if:`` on real event shapes, and the comment step
  posts only for the pull request's current head (its script run here with a stand-in ``gh``).

It also checks the sweep workflow's input planner and that the action's test fixtures are
valid comparison documents.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from harness.compare import validate_comparison

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTION = ROOT / ".github" / "actions" / "gate-comment"
APPROVAL_LABEL = "safe-to-bench"
REPOSITORY = "acme/diskbench"


@dataclass(frozen=True)
class Workflow:
    name: str
    doc: Mapping[str, Any]
    text: str

    @property
    def triggers(self) -> set[str]:
        # YAML 1.1 reads the key `on` as true
        on = self.doc.get("on", self.doc.get(True))  # type: ignore[call-overload]
        if isinstance(on, str):
            return {on}
        if isinstance(on, list):
            return set(on)
        return set(on or {})

    @property
    def jobs(self) -> Mapping[str, Mapping[str, Any]]:
        return dict(self.doc.get("jobs") or {})

    def steps(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        for job_id, job in self.jobs.items():
            for step in job.get("steps") or []:
                yield job_id, step


def parse(name: str, text: str) -> Workflow:
    return Workflow(name, yaml.safe_load(text), text)


def real_workflows() -> list[Workflow]:
    return [parse(p.name, p.read_text(encoding="utf-8")) for p in sorted(WORKFLOWS.glob("*.yml"))]


Rule = Callable[[Workflow], list[str]]


# --- the rules -------------------------------------------------------------------------------------


def pull_request_target_is_gated_and_read_only(wf: Workflow) -> list[str]:
    if "pull_request_target" not in wf.triggers:
        return []
    on = wf.doc.get("on", wf.doc.get(True))  # type: ignore[call-overload]
    trigger = (on or {}).get("pull_request_target") if isinstance(on, dict) else None
    problems = []
    if not isinstance(trigger, dict) or trigger.get("branches") != ["main"]:
        problems.append(
            f"{wf.name}: pull_request_target must be limited to branches: [main] "
            "(a pull request to another branch runs that branch's workflow)"
        )
    if "secrets" in wf.text:
        problems.append(
            f"{wf.name}: pull_request_target with secrets: the pull request's data is next to them"
        )
    for job_id, job in wf.jobs.items():
        problems += [
            f"{wf.name}: job {job_id} may write ({scope}) on pull_request_target"
            for scope, level in (job.get("permissions") or {}).items()
            if level == "write"
        ]
        if "if" not in job:
            problems.append(f"{wf.name}: job {job_id} runs on pull_request_target with no approval if:")
    return problems


def local_reusable(job: Mapping[str, Any]) -> Workflow | None:
    """The workflow a job calls with ``uses: ./.github/workflows/X.yml`` (None: not a local call)."""
    uses = str(job.get("uses", ""))
    if not uses.startswith("./.github/workflows/"):
        return None
    path = ROOT / uses.removeprefix("./")
    return parse(path.name, path.read_text(encoding="utf-8"))


def reaches_self_hosted(job: Mapping[str, Any]) -> bool:
    """Whether a job may land on a self-hosted runner, itself or through the workflow it calls."""
    if runs_self_hosted(job):
        return True
    called = local_reusable(job)
    return called is not None and any(reaches_self_hosted(j) for j in called.jobs.values())


def no_self_hosted_from_pull_request(wf: Workflow) -> list[str]:
    if "pull_request" not in wf.triggers:
        return []
    return [
        f"{wf.name}: job {job_id} reaches a self-hosted runner from pull_request: the pull request's "
        "own workflow files run there, it can drop any if:"
        for job_id, job in wf.jobs.items()
        if reaches_self_hosted(job) or (job.get("uses") and local_reusable(job) is None)
    ]


def pull_request_tree_is_data(wf: Workflow) -> list[str]:
    problems = []
    for job_id, job in wf.jobs.items():
        steps = job.get("steps") or []
        trees = [
            str((s.get("with") or {}).get("path", ""))
            for s in steps
            if str(s.get("uses", "")).startswith("actions/checkout@")
            and (s.get("with") or {}).get("allow-unsafe-pr-checkout") not in (None, False)
        ]
        for tree in trees:
            if tree in ("", ".", "./"):
                problems.append(f"{wf.name}: job {job_id} checks out a pull request's tree as its workspace")
                continue
            for step in steps:
                where = str(step.get("working-directory", ""))
                script = str(step.get("run", ""))
                uses = str(step.get("uses", ""))
                # the one use allowed: the harness's --repo argument names the tree
                mentions = script.replace(f'--repo "$GITHUB_WORKSPACE/{tree}"', "")
                if where.split("/")[0] == tree or uses.startswith(f"./{tree}") or tree in mentions:
                    problems.append(
                        f"{wf.name}: job {job_id} runs something of the pull request's tree {tree}/ "
                        f"(step {step.get('name', step.get('uses', '?'))!r})"
                    )
    return problems


def permissions_empty_at_top_and_per_job(wf: Workflow) -> list[str]:
    problems = []
    if wf.doc.get("permissions") != {}:
        problems.append(f"{wf.name}: top-level permissions must be {{}}, not {wf.doc.get('permissions')!r}")
    problems += [
        f"{wf.name}: job {job_id} names no permissions of its own"
        for job_id, job in wf.jobs.items()
        if "permissions" not in job
    ]
    return problems


def no_write_where_pull_requests_trigger(wf: Workflow) -> list[str]:
    if not wf.triggers & {"pull_request", "pull_request_target"}:
        return []
    return [
        f"{wf.name}: job {job_id} may write ({scope}) in a workflow that pull requests trigger"
        for job_id, job in wf.jobs.items()
        for scope, level in (job.get("permissions") or {}).items()
        if level == "write"
    ]


_PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
_USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")


def remote_uses_pinned(wf: Workflow) -> list[str]:
    problems = []
    for line in wf.text.splitlines():
        match = _USES_LINE.match(line)
        if not match or match.group(1).startswith("./"):
            continue
        ref, rest = match.groups()
        if not _PINNED.match(ref):
            problems.append(f"{wf.name}: {ref} is not pinned to a full commit SHA")
        elif not re.fullmatch(r"\s*#\s*v\d+\.\d+\.\d+\s*", rest):
            problems.append(f"{wf.name}: {ref} has no '# vX.Y.Z' comment naming its version")
    return problems


def checkout_keeps_no_credentials(wf: Workflow) -> list[str]:
    problems = []
    for job_id, step in wf.steps():
        if not str(step.get("uses", "")).startswith("actions/checkout@"):
            continue
        with_ = step.get("with") or {}
        if with_.get("persist-credentials") is not False:
            problems.append(f"{wf.name}: a checkout in job {job_id} keeps the token (persist-credentials)")
        unsafe = with_.get("allow-unsafe-pr-checkout")
        if unsafe not in (None, False) and not (
            unsafe == "${{ inputs.pull-request-tree }}" and "workflow_call" in wf.triggers
        ):
            problems.append(
                f"{wf.name}: a checkout in job {job_id} opts into checking out fork code other "
                "than through the reusable gate's pull-request-tree input"
            )
    return problems


_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def no_expressions_in_scripts(wf: Workflow) -> list[str]:
    return [
        f"{wf.name}: job {job_id} interpolates ${{{{{expr}}}}} into a run: script: pass it through env:"
        for job_id, step in wf.steps()
        for expr in _EXPRESSION.findall(str(step.get("run", "")))
    ]


def runs_self_hosted(job: Mapping[str, Any]) -> bool:
    """Whether a job may land on a self-hosted runner: it says so, or takes its labels from inputs."""
    runs_on = job.get("runs-on")
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return any("self-hosted" in str(label) or "${{" in str(label) for label in labels if label)


def self_hosted_jobs_ask_for_kvm(wf: Workflow) -> list[str]:
    problems = []
    for job_id, job in wf.jobs.items():
        if not runs_self_hosted(job):
            continue
        scripts = [str(step.get("run", "")) for step in job.get("steps") or []]
        if not any("--accel kvm" in script for script in scripts):
            problems.append(f"{wf.name}: self-hosted job {job_id} never asks for --accel kvm")
        for script in scripts:
            for command in re.findall(r"diskbench (?:gate|sweep|run)\b[^\n]*(?:\\\n[^\n]*)*", script):
                if "--accel kvm" not in command:
                    problems.append(
                        f"{wf.name}: job {job_id} runs '{command.split()[1]}' without --accel kvm"
                    )
            if re.search(r"--accel[ =](?!kvm\b)", script):
                problems.append(f"{wf.name}: job {job_id} asks for an accelerator other than kvm")
    return problems


def workflow_run_takes_data_only(wf: Workflow) -> list[str]:
    if "workflow_run" not in wf.triggers:
        return []
    problems = []
    for job_id, step in wf.steps():
        uses = str(step.get("uses", ""))
        with_ = step.get("with") or {}
        if uses.startswith("actions/checkout@") and ({"ref", "repository"} & set(with_)):
            problems.append(
                f"{wf.name}: job {job_id} checks out {with_.get('ref') or with_.get('repository')}"
            )
        if uses.startswith("actions/download-artifact@") and not str(with_.get("path", "")).startswith(
            "${{ runner.temp }}"
        ):
            problems.append(f"{wf.name}: job {job_id} downloads an artifact into the workspace")
    return problems


# --- the fork gate: evaluate the bench job's `if:` on events ----------------------------------------


class Expression:
    """The part of GitHub's expression language a job's ``if:`` uses: paths (``labels.*.name``
    maps over a list), string and boolean literals, ``==``/``!=`` (strings compared
    case-insensitively, as GitHub does), ``!``, ``&&``, ``||``, parentheses and ``contains``,
    ``startsWith``, ``endsWith``. Anything else (``always()``...) raises ValueError."""

    _TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|!|\(|\)|,)|'((?:[^']|'')*)'|([A-Za-z_][A-Za-z0-9_.*-]*))")
    _FUNCTIONS: Mapping[str, Callable[[Any, Any], bool]] = {
        "contains": lambda a, b: (
            any(str(x).lower() == str(b).lower() for x in a)
            if isinstance(a, list)
            else str(b).lower() in str(a or "").lower()
        ),
        "startsWith": lambda a, b: str(a or "").lower().startswith(str(b).lower()),
        "endsWith": lambda a, b: str(a or "").lower().endswith(str(b).lower()),
    }

    def __init__(self, text: str) -> None:
        text = text.strip()
        if text.startswith("${{") and text.endswith("}}"):
            text = text[3:-2]
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text.rstrip()):
            match = self._TOKEN.match(text, pos)
            if not match:
                raise ValueError(f"cannot read the expression at {text[pos:]!r}")
            op, string, name = match.groups()
            if op:
                self.tokens.append(("op", op))
            elif string is not None:
                self.tokens.append(("str", string.replace("''", "'")))
            else:
                self.tokens.append(("name", name))
            pos = match.end()

    def evaluate(self, context: Mapping[str, Any]) -> bool:
        self.pos = 0
        self.context = context
        value = self._or()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.pos]}")
        return bool(value)

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, op: str) -> bool:
        if self._peek() == ("op", op):
            self.pos += 1
            return True
        return False

    def _or(self) -> Any:
        return self._chain("||", self._and, lambda value, right: value or right)

    def _and(self) -> Any:
        return self._chain("&&", self._compare, lambda value, right: value and right)

    def _chain(self, op: str, operand: Callable[[], Any], combine: Callable[[Any, Any], Any]) -> Any:
        """Operands joined by ``op``, left to right, each read before it is combined (no short circuit)."""
        value = operand()
        while self._take(op):
            right = operand()
            value = combine(value, right)
        return value

    def _compare(self) -> Any:
        left = self._unary()
        for op in ("==", "!="):
            if self._take(op):
                right = self._unary()
                same = (
                    left.lower() == right.lower()
                    if isinstance(left, str) and isinstance(right, str)
                    else left == right
                )
                return same if op == "==" else not same
        return left

    def _unary(self) -> Any:
        if self._take("!"):
            return not self._unary()
        if self._take("("):
            value = self._or()
            if not self._take(")"):
                raise ValueError("missing )")
            return value
        token = self._peek()
        if token is None:
            raise ValueError("unexpected end")
        self.pos += 1
        kind, text = token
        if kind == "str":
            return text
        if kind == "name":
            if text in ("true", "false", "null"):
                return {"true": True, "false": False, "null": None}[text]
            if self._peek() == ("op", "("):
                return self._call(text)
            return self._lookup(self.context, text.split("."))
        raise ValueError(f"unexpected {text!r}")

    def _call(self, name: str) -> Any:
        function = self._FUNCTIONS.get(name)
        if function is None:
            raise ValueError(f"function {name}() is not part of this evaluator")
        self._take("(")
        args = [self._or()]
        while self._take(","):
            args.append(self._or())
        if not self._take(")") or len(args) != 2:
            raise ValueError(f"{name}() takes two arguments")
        return function(*args)

    def _lookup(self, value: Any, parts: list[str]) -> Any:
        for i, part in enumerate(parts):
            if part == "*":
                items = value if isinstance(value, list) else []
                return [self._lookup(item, parts[i + 1 :]) for item in items]
            value = value.get(part) if isinstance(value, Mapping) else None
        return value


def pr_event(
    action: str, *, fork: bool, label: str | None = None, labels: tuple[str, ...] = ()
) -> dict[str, Any]:
    head_repo = "mallory/diskbench" if fork else REPOSITORY
    event: dict[str, Any] = {
        "action": action,
        "pull_request": {
            "number": 5,
            "labels": [{"name": name} for name in (*labels, *([label] if label else []))],
            "head": {"sha": "b" * 40, "ref": "topic", "repo": {"full_name": head_repo}},
            "base": {"sha": "a" * 40, "ref": "main", "repo": {"full_name": REPOSITORY}},
        },
    }
    if label is not None:
        event["label"] = {"name": label}
    return event


# (event, whether the self-hosted job may run)
FORK_GATE_CASES = [
    (pr_event("opened", fork=False), True),
    (pr_event("synchronize", fork=False), True),
    (pr_event("reopened", fork=False), True),
    (pr_event("labeled", fork=False, label="documentation"), False),
    (pr_event("opened", fork=True), False),
    (pr_event("synchronize", fork=True), False),
    # approved once, then pushed again before the label was taken off
    (pr_event("synchronize", fork=True, labels=(APPROVAL_LABEL,)), False),
    (pr_event("reopened", fork=True), False),
    (pr_event("labeled", fork=True, label="documentation"), False),
    (pr_event("labeled", fork=True, label=APPROVAL_LABEL), True),
]


def forks_wait_for_approval(wf: Workflow) -> list[str]:
    triggers = wf.triggers & {"pull_request", "pull_request_target"}
    if not triggers:
        return []
    event_name = sorted(triggers)[0]
    problems = []
    for job_id, job in wf.jobs.items():
        if not (runs_self_hosted(job) or "uses" in job):
            continue
        condition = job.get("if")
        if condition is None:
            problems.append(f"{wf.name}: self-hosted job {job_id} has no if: any fork's push would run on it")
            continue
        try:
            expression = Expression(str(condition))
            for event, allowed in FORK_GATE_CASES:
                context = {"github": {"event": event, "repository": REPOSITORY, "event_name": event_name}}
                if expression.evaluate(context) != allowed:
                    label = event.get("label", {}).get("name", "") or ",".join(
                        x["name"] for x in event["pull_request"]["labels"]
                    )
                    who = (
                        "fork"
                        if event["pull_request"]["head"]["repo"]["full_name"] != REPOSITORY
                        else "branch"
                    )
                    problems.append(
                        f"{wf.name}: job {job_id} {'skips' if allowed else 'runs'} a {who} pull request's "
                        f"{event['action']} {label}".rstrip()
                    )
        except ValueError as exc:
            problems.append(f"{wf.name}: job {job_id}: cannot check its if: ({exc})")
    return problems


GATE_PATH = ".github/workflows/gate.yml"


def run_event(
    event: str,
    path: str = GATE_PATH,
    *,
    repo: str = REPOSITORY,
    head_repo: str = REPOSITORY,
    conclusion: str = "success",
) -> dict[str, Any]:
    return {
        "action": "completed",
        "workflow_run": {
            "id": 77,
            "name": "gate",
            "event": event,
            "path": path,
            "conclusion": conclusion,
            "head_sha": "a" * 40,
            "display_title": f"gate: pull request #5 at {'b' * 40}",
            "repository": {"full_name": repo},
            "head_repository": {"full_name": head_repo},
        },
    }


# (workflow_run event, whether a job that may write takes it)
GATE_RUN_CASES = [
    (run_event("pull_request_target"), True),
    # a workflow a fork's pull request adds, named "gate"
    (run_event("pull_request", ".github/workflows/evil.yml", head_repo="mallory/diskbench"), False),
    # the fork's own edit of gate.yml, run on pull_request
    (run_event("pull_request", head_repo="mallory/diskbench"), False),
    (run_event("pull_request"), False),
    (run_event("pull_request_target", ".github/workflows/other.yml"), False),
    (run_event("push"), False),
    (run_event("pull_request_target", repo="mallory/diskbench", head_repo="mallory/diskbench"), False),
]


def workflow_run_takes_only_the_gate(wf: Workflow) -> list[str]:
    if "workflow_run" not in wf.triggers:
        return []
    problems = []
    for job_id, job in wf.jobs.items():
        if "write" not in (job.get("permissions") or {}).values():
            continue
        condition = job.get("if")
        if condition is None:
            problems.append(f"{wf.name}: job {job_id} may write for any completed run: it has no if:")
            continue
        try:
            expression = Expression(str(condition))
            for event, allowed in GATE_RUN_CASES:
                context = {"github": {"event": event, "repository": REPOSITORY, "event_name": "workflow_run"}}
                if expression.evaluate(context) != allowed:
                    run = event["workflow_run"]
                    problems.append(
                        f"{wf.name}: job {job_id} {'skips' if allowed else 'takes'} a {run['event']} run of "
                        f"{run['path']} in {run['repository']['full_name']}"
                    )
        except ValueError as exc:
            problems.append(f"{wf.name}: job {job_id}: cannot check its if: ({exc})")
    return problems


RULES: list[Rule] = [
    pull_request_target_is_gated_and_read_only,
    no_self_hosted_from_pull_request,
    pull_request_tree_is_data,
    workflow_run_takes_only_the_gate,
    permissions_empty_at_top_and_per_job,
    no_write_where_pull_requests_trigger,
    remote_uses_pinned,
    checkout_keeps_no_credentials,
    no_expressions_in_scripts,
    self_hosted_jobs_ask_for_kvm,
    workflow_run_takes_data_only,
    forks_wait_for_approval,
]


# --- the real workflows ----------------------------------------------------------------------------


def test_the_workflows_are_there() -> None:
    names = {wf.name for wf in real_workflows()}
    assert {
        "gate.yml",
        "gate-comment.yml",
        "gate-reusable.yml",
        "sweep.yml",
        "history.yml",
        "ci.yml",
    } <= names


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_every_workflow_keeps_the_rule(rule: Rule) -> None:
    problems = [p for wf in real_workflows() for p in rule(wf)]
    assert problems == []


def test_the_pr_gate_reaches_the_kvm_runner_through_a_gated_job() -> None:
    gate = parse("gate.yml", (WORKFLOWS / "gate.yml").read_text(encoding="utf-8"))
    # the base branch's file runs, whatever the pull request changes in its own copy
    assert gate.triggers == {"pull_request_target"}
    bench = gate.jobs["bench"]
    assert bench["uses"] == "./.github/workflows/gate-reusable.yml"
    assert json.loads(bench["with"]["runner-labels"]) == ["self-hosted", "linux", "x64", "kvm"]
    assert forks_wait_for_approval(gate) == []
    # the harness from base; the pull request's tree, at the approved head commit, as data
    assert bench["with"]["diskbench-ref"] == "${{ github.sha }}"
    assert bench["with"]["subject-ref"] == "${{ github.event.pull_request.head.sha }}"
    assert bench["with"]["pull-request-tree"] is True
    assert "build-command" not in bench["with"], "nothing the pull request brings runs on the runner"
    assert gate.doc["run-name"] == (
        "gate: pull request #${{ github.event.pull_request.number }} at ${{ github.event.pull_request.head.sha }}"
    )
    reusable = parse("gate-reusable.yml", (WORKFLOWS / "gate-reusable.yml").read_text(encoding="utf-8"))
    gate_job = reusable.jobs["gate"]
    assert runs_self_hosted(gate_job)
    script = next(s["run"] for s in gate_job["steps"] if s.get("id") == "gate")
    assert "--accel kvm" in script
    assert "diskbench gate" in script
    assert (
        next(
            s
            for s in gate_job["steps"]
            if s.get("name") == "Set up (venv, guest; the apt packages were installed once as root)"
        )["working-directory"]
        == "diskbench"
    )
    assert pull_request_tree_is_data(reusable) == []


def test_no_self_hosted_job_is_reachable_from_a_pull_request_trigger() -> None:
    pr_workflows = [wf for wf in real_workflows() if "pull_request" in wf.triggers]
    assert [wf.name for wf in pr_workflows] == ["ci.yml"]
    assert all(not reaches_self_hosted(job) for wf in pr_workflows for job in wf.jobs.values())
    # and the rule sees through a reusable workflow
    gate = parse("gate.yml", (WORKFLOWS / "gate.yml").read_text(encoding="utf-8"))
    assert reaches_self_hosted(gate.jobs["bench"])


def test_the_comment_workflow_runs_the_action_from_the_default_branch() -> None:
    wf = parse("gate-comment.yml", (WORKFLOWS / "gate-comment.yml").read_text(encoding="utf-8"))
    gate = parse("gate.yml", (WORKFLOWS / "gate.yml").read_text(encoding="utf-8"))
    assert wf.triggers == {"workflow_run"}
    # workflow_run names the gate by its name: any workflow so named triggers it, so the jobs'
    # if: check the run's file, event and repository (workflow_run_takes_only_the_gate)
    assert wf.doc[True]["workflow_run"] == {"workflows": [gate.doc["name"]], "types": ["completed"]}
    assert workflow_run_takes_only_the_gate(wf) == []
    comment = wf.jobs["comment"]
    assert comment["runs-on"] == "ubuntu-latest"
    assert comment["permissions"] == {"actions": "read", "contents": "read", "pull-requests": "write"}
    uses = [s.get("uses", "") for s in comment["steps"]]
    assert "./.github/actions/gate-comment" in uses
    action = next(s for s in comment["steps"] if s.get("uses") == "./.github/actions/gate-comment")
    assert action["with"]["pr-number"] == "${{ steps.artifact.outputs.pr }}"
    assert wf.jobs["unlabel"]["permissions"] == {"pull-requests": "write"}


FAKE_GH = """#!/bin/sh
case "$2" in
  */pulls/*) echo "$FAKE_PR_HEAD" ;;
  */artifacts) echo "$FAKE_ARTIFACTS" ;;
  *) echo "unexpected gh $*" >&2; exit 1 ;;
esac
"""


@pytest.mark.parametrize(
    ("title", "pr_head", "artifacts", "expected"),
    [
        (f"gate: pull request #5 at {'b' * 40}", "b" * 40, "1", {"pr": "5", "found": "true"}),
        # pushed again since the gate measured: the verdict is not the pull request's any more
        (f"gate: pull request #5 at {'b' * 40}", "c" * 40, "1", {"pr": "5", "found": "false"}),
        # approved, then pushed before the job ran: skipped, no artifact
        (f"gate: pull request #5 at {'b' * 40}", "b" * 40, "0", {"pr": "5", "found": "false"}),
        ("gate: pull request #5 at main", "b" * 40, "1", {"found": "false"}),
        (f"gate: pull request #5 at {'b' * 40}\n::error::x", "b" * 40, "1", {"found": "false"}),
    ],
)
def test_the_comment_step_posts_only_for_the_current_head(
    tmp_path: Path, title: str, pr_head: str, artifacts: str, expected: dict[str, str]
) -> None:
    wf = parse("gate-comment.yml", (WORKFLOWS / "gate-comment.yml").read_text(encoding="utf-8"))
    step = wf.jobs["comment"]["steps"][0]
    assert step["id"] == "artifact"
    (tmp_path / "gh").write_text(FAKE_GH)
    (tmp_path / "gh").chmod(0o755)
    out = tmp_path / "github_output"
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "GITHUB_OUTPUT": str(out),
        "REPO": REPOSITORY,
        "RUN_ID": "77",
        "TITLE": title,
        "FAKE_PR_HEAD": pr_head,
        "FAKE_ARTIFACTS": artifacts,
    }
    done = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert dict(line.split("=", 1) for line in out.read_text().splitlines()) == expected
    assert "::" not in done.stdout


def test_only_the_history_job_may_write_contents() -> None:
    writers = {
        (wf.name, job_id, scope)
        for wf in real_workflows()
        for job_id, job in wf.jobs.items()
        for scope, level in (job.get("permissions") or {}).items()
        if level == "write"
    }
    assert writers == {
        ("gate-comment.yml", "comment", "pull-requests"),
        ("gate-comment.yml", "unlabel", "pull-requests"),
        ("history.yml", "measure", "contents"),
        ("history.yml", "deploy", "pages"),
        ("history.yml", "deploy", "id-token"),
    }


def test_the_action_runs_its_committed_bundle() -> None:
    action = yaml.safe_load((ACTION / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"] == {"using": "node24", "main": "dist/index.js"}
    assert (ACTION / "dist" / "index.js").is_file()
    assert set(action["inputs"]) == {
        "comparison-path",
        "github-token",
        "comment-mode",
        "fail-on-regression",
        "pr-number",
        "max-bytes",
        "pages-url",
    }
    assert (ACTION / "src" / "index.ts").read_text(encoding="utf-8").strip().splitlines()[-1] == (
        "run().catch(e => core.setFailed(e instanceof Error ? e.message : String(e)))"
    )


def test_the_action_pins_its_dependencies_exactly() -> None:
    package = json.loads((ACTION / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ACTION / "package-lock.json").read_text(encoding="utf-8"))
    for section in ("dependencies", "devDependencies"):
        for name, version in package[section].items():
            assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name}@{version} is not an exact version"
            assert lock["packages"][f"node_modules/{name}"]["version"] == version


# --- each rule can fail ----------------------------------------------------------------------------

GOOD_STEP = """
      - uses: actions/checkout@0123456789abcdef0123456789abcdef01234567 # v7.0.1
        with:
          persist-credentials: false
"""

BAD: dict[Rule, tuple[str, str]] = {
    pull_request_target_is_gated_and_read_only: (
        """
on: pull_request_target
permissions: {}
jobs:
  x: {runs-on: ubuntu-latest, permissions: {contents: write}, steps: [{run: 'true'}]}
""",
        "must be limited to branches: [main]",
    ),
    no_self_hosted_from_pull_request: (
        """
on: pull_request
permissions: {}
jobs:
  bench:
    if: github.event.action == 'labeled' && github.event.label.name == 'safe-to-bench'
    permissions: {contents: read}
    uses: ./.github/workflows/gate-reusable.yml
    with: {base: a, head: b}
""",
        "job bench reaches a self-hosted runner from pull_request",
    ),
    pull_request_tree_is_data: (
        """
on: workflow_call
permissions: {}
jobs:
  x:
    runs-on: [self-hosted, kvm]
    permissions: {}
    steps:
      - uses: actions/checkout@0123456789abcdef0123456789abcdef01234567 # v7.0.1
        with: {path: subject, persist-credentials: false, allow-unsafe-pr-checkout: true}
      - name: Build
        run: make -C subject
""",
        "runs something of the pull request's tree subject/ (step 'Build')",
    ),
    workflow_run_takes_only_the_gate: (
        """
on:
  workflow_run: {workflows: [gate], types: [completed]}
permissions: {}
jobs:
  comment:
    if: github.event.workflow_run.conclusion == 'success'
    runs-on: ubuntu-latest
    permissions: {pull-requests: write}
    steps: [{run: 'true'}]
""",
        "takes a pull_request run of .github/workflows/evil.yml",
    ),
    permissions_empty_at_top_and_per_job: (
        """
on: push
permissions: write-all
jobs:
  x: {runs-on: ubuntu-latest, steps: [{run: 'true'}]}
""",
        "top-level permissions",
    ),
    no_write_where_pull_requests_trigger: (
        """
on: pull_request
permissions: {}
jobs:
  x: {runs-on: ubuntu-latest, permissions: {contents: write}, steps: [{run: 'true'}]}
""",
        "may write (contents)",
    ),
    remote_uses_pinned: (
        """
on: push
permissions: {}
jobs:
  x:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@0123456789abcdef0123456789abcdef01234567
""",
        "not pinned",
    ),
    checkout_keeps_no_credentials: (
        """
on: push
permissions: {}
jobs:
  x:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - uses: actions/checkout@0123456789abcdef0123456789abcdef01234567 # v7.0.1
""",
        "keeps the token",
    ),
    no_expressions_in_scripts: (
        """
on: pull_request
permissions: {}
jobs:
  x:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: echo "${{ github.event.pull_request.title }}"
""",
        "interpolates ${{ github.event.pull_request.title }}",
    ),
    self_hosted_jobs_ask_for_kvm: (
        """
on: push
permissions: {}
jobs:
  x:
    runs-on: [self-hosted, linux, x64, kvm]
    permissions: {}
    steps:
      - run: .venv/bin/diskbench sweep sweeps/matrix.toml --accel auto
""",
        "never asks for --accel kvm",
    ),
    workflow_run_takes_data_only: (
        """
on:
  workflow_run: {workflows: [gate], types: [completed]}
permissions: {}
jobs:
  x:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - uses: actions/checkout@0123456789abcdef0123456789abcdef01234567 # v7.0.1
        with:
          ref: ${{ github.event.workflow_run.head_sha }}
          persist-credentials: false
      - uses: actions/download-artifact@0123456789abcdef0123456789abcdef01234567 # v8.0.1
        with: {name: gate-comparison}
""",
        "checks out ${{ github.event.workflow_run.head_sha }}",
    ),
    forks_wait_for_approval: (
        """
on: pull_request
permissions: {}
jobs:
  bench:
    runs-on: [self-hosted, linux, x64, kvm]
    permissions: {contents: read}
    if: github.event.action != 'closed'
    steps:
      - run: .venv/bin/diskbench gate --accel kvm --base a --head b
""",
        "runs a fork pull request's synchronize",
    ),
}


def test_every_rule_has_a_bad_workflow() -> None:
    assert set(BAD) == set(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_each_rule_catches_its_bad_workflow(rule: Rule) -> None:
    text, expected = BAD[rule]
    problems = rule(parse("bad.yml", text))
    assert any(expected in p for p in problems), problems


def test_the_kvm_rule_also_catches_one_command_without_kvm() -> None:
    wf = parse(
        "bad.yml",
        """
on: push
permissions: {}
jobs:
  x:
    runs-on: [self-hosted, kvm]
    permissions: {}
    steps:
      - run: .venv/bin/diskbench accel --accel kvm
      - run: |
          .venv/bin/diskbench sweep sweeps/matrix.toml \\
            --shard 1/2
""",
    )
    assert self_hosted_jobs_ask_for_kvm(wf) == ["bad.yml: job x runs 'sweep' without --accel kvm"]


def test_the_pin_rule_wants_the_version_comment() -> None:
    head = (
        "on: push\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n    permissions: {}\n    steps:"
    )
    assert remote_uses_pinned(parse("good.yml", head + GOOD_STEP)) == []
    wf = parse("bad.yml", head + GOOD_STEP.replace("# v7.0.1", ""))
    assert remote_uses_pinned(wf) == [
        "bad.yml: actions/checkout@0123456789abcdef0123456789abcdef01234567 has no '# vX.Y.Z' comment naming its version"
    ]


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        (None, "has no if:"),
        ("github.event.label.name == 'safe-to-bench'", "skips a branch pull request's opened"),
        # forks could never be approved
        (
            "github.event.pull_request.head.repo.full_name == github.repository",
            "skips a fork pull request's labeled",
        ),
        # any event of a branch, a fork's unapproved push
        ("github.event.action != 'closed'", "runs a fork pull request's synchronize"),
        (
            # the label's presence: a fork's later push would still carry it
            "github.event.pull_request.head.repo.full_name == github.repository"
            " || contains(github.event.pull_request.labels.*.name, 'safe-to-bench')",
            "runs a fork pull request's synchronize safe-to-bench",
        ),
        ("always()", "cannot check its if:"),
    ],
)
def test_the_fork_gate_rule_catches_weaker_conditions(condition: str | None, problem: str) -> None:
    job: dict[str, Any] = {"runs-on": ["self-hosted", "kvm"], "permissions": {}, "steps": []}
    if condition is not None:
        job["if"] = condition
    wf = Workflow("bad.yml", {"on": "pull_request", "permissions": {}, "jobs": {"bench": job}}, "")
    problems = forks_wait_for_approval(wf)
    assert any(problem in p for p in problems), problems


def test_the_expression_evaluator_reads_what_github_reads() -> None:
    context = {"github": {"event": {"action": "Labeled", "label": {"name": "x"}}, "repository": "a/b"}}
    assert Expression("${{ github.event.action == 'labeled' }}").evaluate(context)
    assert Expression("!(github.event.action != 'labeled') && github.event.label.name == 'x'").evaluate(
        context
    )
    assert not Expression("github.event.missing.deeper == 'x'").evaluate(context)
    assert Expression("'it''s' == 'IT''S'").evaluate(context)
    labels = {"github": {"event": {"pull_request": {"labels": [{"name": "A"}, {"name": "safe-to-bench"}]}}}}
    assert Expression("contains(github.event.pull_request.labels.*.name, 'Safe-To-Bench')").evaluate(labels)
    assert not Expression("contains(github.event.pull_request.labels.*.name, 'b')").evaluate(labels)
    assert Expression("startsWith('refs/heads/main', 'refs/')").evaluate(labels)
    with pytest.raises(ValueError, match="function always"):
        Expression("always()").evaluate(context)


# --- the sweep workflow's planner ------------------------------------------------------------------


def sweep_plan() -> ModuleType:
    path = ROOT / ".github" / "scripts" / "sweep_plan.py"
    spec = importlib.util.spec_from_file_location("sweep_plan", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sweep_plan"] = module
    spec.loader.exec_module(module)
    return module


def test_sweep_plan_turns_inputs_into_shard_arguments() -> None:
    plan = sweep_plan().plan
    out = plan({"SPEC": "preallocation", "ONLY": "qcow2-*,*.dd-*", "REPEAT": "5", "SHARDS": "3"})
    assert json.loads(out["args"]) == [
        "--preset",
        "preallocation",
        "--only",
        "qcow2-*,*.dd-*",
        "--repeat",
        "5",
    ]
    assert out["name"] == "preallocation"
    assert json.loads(out["shards"]) == [1, 2, 3]
    assert out["count"] == "3"
    out = plan({"SPEC": "sweeps/matrix.toml", "ONLY": "", "REPEAT": "", "SHARDS": ""})
    assert json.loads(out["args"]) == ["sweeps/matrix.toml"]
    assert out["name"] == "matrix"
    assert json.loads(out["shards"]) == [1]


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"SPEC": ""}, "spec: empty"),
        ({"SPEC": "no-such-preset"}, "spec: no preset 'no-such-preset': use one of"),
        ({"SPEC": "../../etc/passwd.toml"}, "spec: '../../etc/passwd.toml': a path of a .toml spec"),
        ({"SPEC": "/etc/x.toml"}, "spec: '/etc/x.toml'"),
        ({"SPEC": "sweeps/x.toml; rm -rf ~"}, "a path of a .toml spec"),
        ({"SPEC": "sweeps/absent.toml"}, "spec: sweeps/absent.toml: no such file"),
        ({"SPEC": "sweeps/matrix.toml", "ONLY": "$(id)"}, "only: '$(id)': comma-separated globs"),
        ({"SPEC": "sweeps/matrix.toml", "REPEAT": "0"}, "repeat: '0': a whole number from 1 to 100"),
        ({"SPEC": "sweeps/matrix.toml", "REPEAT": "5 --accel tcg"}, "repeat: '5 --accel tcg'"),
        (
            {"SPEC": "sweeps/matrix.toml", "SHARDS": "17"},
            "shards: '17': a whole number of runners from 1 to 16",
        ),
    ],
)
def test_sweep_plan_refuses_bad_inputs_naming_them(inputs: dict[str, str], message: str) -> None:
    module = sweep_plan()
    with pytest.raises(module.InputError, match=re.escape(message)):
        module.plan(inputs)


def test_sweep_plan_writes_github_output_and_exits_2_on_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = sweep_plan()
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    monkeypatch.setenv("SPEC", "sweeps/matrix.toml")
    monkeypatch.setenv("SHARDS", "2")
    assert module.main() == 0
    assert out.read_text() == 'args=["sweeps/matrix.toml"]\nname=matrix\nshards=[1, 2]\ncount=2\n'
    monkeypatch.setenv("SHARDS", "many")
    assert module.main() == 2
    assert "::error::shards: 'many'" in capsys.readouterr().err


# --- the action's fixtures are what diskbench writes --------------------------------------------


@pytest.mark.parametrize("name", ["regression.json", "unchanged.json"])
def test_the_action_fixtures_are_valid_comparisons(name: str) -> None:
    path = ACTION / "__tests__" / "fixtures" / name
    doc = validate_comparison(json.loads(path.read_text(encoding="utf-8")), source=str(path))
    assert doc["verdict"] == name.removesuffix(".json")


def test_the_comment_action_knows_every_kind_of_verdict() -> None:
    """The action refuses a comparison.json whose cell kind it does not list: every kind the
    comparison can write must be in its KINDS, or a gate's comment fails to render."""
    import re

    from harness.compare import Kind

    source = (
        Path(__file__).resolve().parents[2] / ".github/actions/gate-comment/src/comparison.ts"
    ).read_text()
    listed = re.search(r"export const KINDS = \[([^\]]*)\]", source)
    assert listed is not None
    kinds = set(re.findall(r"'([a-z-]+)'", listed.group(1)))
    assert {k.value for k in Kind} <= kinds

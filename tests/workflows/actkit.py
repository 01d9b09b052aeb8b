"""Run this project's GitHub workflows with act on this host, against stand-ins for GitHub.

A :class:`World` is one "GitHub" for a test: bare repositories (``remotes/OWNER/NAME.git``), the
artifact store (``artifacts/RUN_ID/NAME/``), the deployed pages, and the job summaries. A
workflow runs with :meth:`World.act` from a working copy of the repository (act reads the
workflow files, ``github.repository`` and ``github.sha`` from it), every job directly on the
host (``-P LABEL=-self-hosted``: what a self-hosted runner does), every third-party action
mapped to its stand-in under ``standins/`` (``--local-repository``), and the GitHub API at the
loopback :class:`FakeGitHub` (the gate-comment action's own test server, run by node).

This host has no working KVM (DESIGN.md), so the test repository carries one commit that the
workflows' ``--accel kvm`` reads ``--accel tcg``: :data:`HOST_REWRITES`, each of which must
match exactly where it is expected, so a workflow that changes there stops the tests loudly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sysconfig
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrepo import copy_worktree

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STANDINS = HERE / "standins"
ACTION_DIR = REPO / ".github" / "actions" / "gate-comment"
OWNER = "acme"
NAME = "diskbench"
FULL_NAME = f"{OWNER}/{NAME}"
TOKEN = "ghs_workflowtests0000000000000000000000"
RUNNER_LABELS = ("self-hosted", "ubuntu-latest")

# (file, text, replacement, count): the runner's accel. Everything else runs as written.
HOST_REWRITES = (
    (".github/workflows/gate-reusable.yml", "diskbench gate --accel kvm", "diskbench gate --accel tcg", 1),
    (".github/workflows/sweep.yml", "--accel kvm \\", "--accel tcg \\", 1),
    (
        ".github/workflows/history.yml",
        "diskbench accel --accel kvm --no-cache",
        "diskbench accel --accel tcg --no-cache",
        1,
    ),
)
_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@([0-9a-f]{40})\b", re.M)


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    argv = ["git", "-C", str(repo), "-c", "user.name=diskbench", "-c", "user.email=diskbench@localhost"]
    done = subprocess.run([*argv, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()}")
    return done.stdout.strip()


def act_binary() -> Path:
    """act at the pinned version, built by scripts/act.sh (setup.sh builds it once)."""
    subprocess.run(["bash", str(REPO / "scripts" / "act.sh")], check=True, cwd=REPO)
    return REPO / ".venv" / "bin" / "act"


def third_party_actions(workflows: Path) -> dict[str, str]:
    """``owner/name@sha`` of every remote action the workflows use -> its stand-in's directory."""
    mapping: dict[str, str] = {}
    for path in sorted(workflows.glob("*.yml")):
        for owner_name, sha in _USES.findall(path.read_text()):
            standin = STANDINS / owner_name.split("/", 1)[1]
            if not owner_name.startswith("actions/") or not (standin / "action.yml").is_file():
                raise AssertionError(f"{path.name}: {owner_name}@{sha} has no stand-in in {STANDINS}")
            mapping[f"{owner_name}@{sha}"] = str(standin)
    return mapping


def rewrite_for_host(tree: Path) -> None:
    for name, old, new, count in HOST_REWRITES:
        path = tree / name
        text = path.read_text()
        found = text.count(old)
        if found != count:
            raise AssertionError(f"{name}: {old!r} found {found} times, the host rewrite expects {count}")
        path.write_text(text.replace(old, new))


@dataclass
class ActRun:
    """What one act invocation did: its exit code, its JSON log lines, its text log."""

    argv: list[str]
    rc: int
    lines: list[dict[str, Any]]
    log: Path
    seconds: float

    def job_results(self) -> dict[str, list[str]]:
        """jobID -> the results act logged for it (``success``, ``failure``, ``skipped``; one per matrix leg)."""
        results: dict[str, list[str]] = {}
        for line in self.lines:
            if "jobResult" in line:
                results.setdefault(str(line.get("jobID", "")), []).append(str(line["jobResult"]))
        return results

    def output(self, job_id: str | None = None) -> str:
        """The steps' own output (raw lines), of one job or of all."""
        return "\n".join(
            str(line.get("msg", ""))
            for line in self.lines
            if line.get("raw_output") and (job_id is None or line.get("jobID") == job_id)
        )

    def steps_run(self, job_id: str) -> list[str]:
        """The step lines act logged as succeeded or failed for ``job_id`` (skipped ones not)."""
        return [
            str(line["msg"]).strip()
            for line in self.lines
            if line.get("jobID") == job_id
            and line.get("stepResult") in ("success", "failure")
            and "msg" in line
        ]

    def evaluated(self, expression: str) -> list[str]:
        """The values act's evaluator gave ``${{ EXPRESSION }}`` (its debug log: act is pinned)."""
        marker = f"expression 'format('{{0}}', {expression})' evaluated to '"
        values = []
        for line in self.lines:
            msg = str(line.get("msg", ""))
            if msg.startswith(marker) and msg.endswith("'"):
                value = msg[len(marker) : -1]
                values.append(
                    value.removeprefix("%!t(string=").removesuffix(")") if value.startswith("%!t(") else value
                )
        return values

    def tail(self, lines: int = 60) -> str:
        """What went wrong (failed steps and ``::error::`` lines), then the last lines act logged
        above debug level, as text (for a failed assertion)."""
        shown = [
            f"{line.get('jobID', '')}: {str(line.get('msg', '')).rstrip()}"
            for line in self.lines
            if line.get("level") != "debug" and str(line.get("msg", "")).strip()
        ]
        wrong = [text for text in shown if "::error::" in text or "Failure - " in text or "error:" in text]
        return f"act log {self.log}:\n" + "\n".join([*wrong, "...", *shown[-lines:]])


@dataclass
class World:
    """One GitHub for a test: repositories, artifacts, pages, summaries, the API server's URL."""

    root: Path
    act_bin: Path
    api_url: str = ""
    runs: list[ActRun] = field(default_factory=list)

    @property
    def remotes(self) -> Path:
        return self.root / "remotes"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def pages(self) -> Path:
        return self.root / "pages"

    @property
    def summaries(self) -> Path:
        return self.root / "summaries"

    def remote(self, full_name: str = FULL_NAME) -> Path:
        return self.remotes / f"{full_name}.git"

    def create_repository(self, tree: Path) -> str:
        """``acme/diskbench``: this project, with :data:`HOST_REWRITES` as a commit of its own."""
        copy_worktree(tree)
        git(tree, "init", "-q", "-b", "main")
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "-m", "diskbench")
        rewrite_for_host(tree)
        git(tree, "commit", "-q", "-am", "this runner: TCG (no working KVM here)")
        remote = self.remote()
        remote.parent.mkdir(parents=True, exist_ok=True)
        git(tree, "init", "-q", "--bare", "-b", "main", str(remote))
        git(tree, "remote", "add", "origin", f"https://github.com/{FULL_NAME}.git")
        self.push(tree, "main")
        return git(tree, "rev-parse", "HEAD")

    def push(self, tree: Path, *refspecs: str, to: str = FULL_NAME) -> None:
        git(tree, "push", "-q", "-f", str(self.remote(to)), *refspecs)

    def working_copy(self, dest: Path, commit: str) -> Path:
        """A clone at ``commit`` whose origin is github.com/acme/diskbench (act's workdir)."""
        if not dest.exists():
            git(self.root, "clone", "-q", str(self.remote()), str(dest))
            git(dest, "remote", "set-url", "origin", f"https://github.com/{FULL_NAME}.git")
        git(dest, "checkout", "-q", "--detach", commit)
        return dest

    @staticmethod
    def link_checkout(workdir: Path, path: str) -> None:
        """act (host mode) reads a local action (``uses: ./PATH/...``) from its own working
        directory, not from the job's workspace: a job that checks this repository out at PATH
        finds it there only through this link to the same commit."""
        link = workdir / path
        if not link.is_symlink():
            link.symlink_to(".")

    def commit_files(self, tree: Path, files: Mapping[str, str], message: str) -> str:
        """A commit of ``tree``'s current branch that writes ``files`` (path -> text)."""
        for name, text in files.items():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_text(text)
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "-m", message)
        return git(tree, "rev-parse", "HEAD")

    def act(
        self,
        workdir: Path,
        workflow: str,
        event_name: str,
        event: Mapping[str, Any],
        run_id: int,
        *,
        extra_env: Mapping[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
        timeout_s: float = 900,
        stop_at: str | None = None,
        suite_venvs: bool = False,
    ) -> ActRun:
        """Run ``.github/workflows/WORKFLOW`` of ``workdir`` for one event; the log goes next to the world.

        ``stop_at``: end the run (act and its jobs' processes) once a line of the steps' own
        output starts with it; the run's rc is then -1. ``suite_venvs``: a venv the jobs make with
        the setup-python stand-in's ``python`` sees this suite's packages too, as setup.sh's does
        (:func:`make_suite_packages_python`), so ``pip install -e .[plots]`` installs the checkout
        alone."""
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        event_file = logs / f"{run_id}-event.json"
        event_file.write_text(json.dumps(event))
        shim = self.root / "shim"
        if not shim.is_dir():
            make_node_shim(shim)
            make_suite_packages_python(shim)
        argv = [
            str(self.act_bin),
            event_name,
            "-W",
            workflow if Path(workflow).is_absolute() else f".github/workflows/{workflow}",
            "-e",
            str(event_file),
            *(arg for label in RUNNER_LABELS for arg in ("-P", f"{label}=-self-hosted")),
            "--no-skip-checkout",
            "--no-cache-server",
            "--action-cache-path",
            str(self.root / "act-cache"),
            "--concurrent-jobs",
            "1",
            "--json",
            "--verbose",
            "-s",
            f"GITHUB_TOKEN={TOKEN}",
            "--env",
            f"GITHUB_RUN_ID={run_id}",
            "--env",
            f"GITHUB_API_URL={self.api_url}",
            "--env",
            "GITHUB_SERVER_URL=https://github.test",
            *(
                arg
                for key, path in third_party_actions(workdir / ".github" / "workflows").items()
                for arg in ("--local-repository", f"{key}={path}")
            ),
            *extra_args,
        ]
        env = {
            **os.environ,
            "PATH": f"{shim}:{os.environ['PATH']}",
            "DISKBENCH_WF_NODE": shutil.which("node") or "node",
            "DISKBENCH_WF_STANDINS": str(STANDINS),
            "DISKBENCH_WF_REMOTES": str(self.remotes),
            "DISKBENCH_WF_ARTIFACTS": str(self.artifacts),
            "DISKBENCH_WF_PAGES": str(self.pages),
            "DISKBENCH_WF_SUMMARIES": str(self.summaries),
            # the Python scripts/setup.sh makes its venv with: see make_suite_packages_python
            "PYTHON": str(shim / SUITE_PACKAGES_PYTHON),
            # and the setup-python stand-in's, where the test asks (``suite_venvs``)
            **({"DISKBENCH_WF_SETUP_PYTHON": str(shim / SUITE_PACKAGES_PYTHON)} if suite_venvs else {}),
            # gh at the loopback API: github.localhost is gh's plain-HTTP host, reached by proxy
            "GH_HOST": "github.localhost",
            "HTTP_PROXY": self.api_url,
            # (not "localhost": Go's NO_PROXY would match api.github.localhost by it)
            "NO_PROXY": "127.0.0.1",
            "GH_CONFIG_DIR": str(self.root / "gh-config"),
            "GH_NO_UPDATE_NOTIFIER": "1",
            "GH_PROMPT_DISABLED": "1",
            **(extra_env or {}),
        }
        # the jobs run the checkout's own code in its own venv, like a runner: not this test's
        # (PYTHONPATH would import this tree's harness), and not a workflow's this test runs in
        for key in (
            "PYTHONPATH",
            "VIRTUAL_ENV",
            "DISKBENCH_WORK_DIR",
            "GITHUB_ACTIONS",
            "GITHUB_WORKSPACE",
            "GITHUB_OUTPUT",
            "GITHUB_ENV",
            "GITHUB_PATH",
            "GITHUB_STEP_SUMMARY",
        ):
            env.pop(key, None)
        # nor this suite's own pytest (a worker's of `pytest -n`: a job's pytest would read it)
        for key in [k for k in env if k.startswith("PYTEST_")]:
            env.pop(key)
        self.summaries.mkdir(exist_ok=True)
        log = logs / f"{run_id}-{Path(workflow).name}.log"
        started = time.monotonic()
        with log.open("w") as out:
            # its own session: past the timeout, act and every job process it started (QEMU
            # included) end together, and nothing else
            proc = subprocess.Popen(
                argv, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                rc = (
                    proc.wait(timeout=timeout_s)
                    if stop_at is None
                    else wait_for(proc, log, stop_at, timeout_s)
                )
            except subprocess.TimeoutExpired:
                end_session(proc)
                raise
        lines = []
        for text in log.read_text(errors="replace").splitlines():
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                lines.append(parsed)
        run = ActRun(argv, rc, lines, log, time.monotonic() - started)
        self.runs.append(run)
        return run

    def artifact(self, run_id: int, name: str) -> Path:
        return self.artifacts / str(run_id) / name

    def summaries_of(self, run_id: int) -> list[str]:
        return [p.read_text() for p in sorted(self.summaries.glob(f"{run_id}-*.md"))]


def wait_for(proc: subprocess.Popen[Any], log: Path, prefix: str, timeout_s: float) -> int:
    """``proc``'s exit code, or -1 once a raw output line of ``log`` starts with ``prefix`` (the
    session then ended); :class:`subprocess.TimeoutExpired` past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while True:
        try:
            return proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        text = log.read_text(errors="replace")
        for line in text[seen:].splitlines(keepends=True):
            if not line.endswith("\n"):
                break
            seen += len(line)
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(parsed, dict)
                and parsed.get("raw_output")
                and str(parsed.get("msg", "")).startswith(prefix)
            ):
                end_session(proc)
                return -1
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)


def end_session(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to the session ``proc`` leads, SIGKILL after 10 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def make_node_shim(directory: Path) -> None:
    """``node`` that keeps each action step's job summary (act empties the file before every step),
    and ``sudo`` for root where there is none."""
    directory.mkdir(parents=True)
    shim = directory / "node"
    shim.write_text(
        "#!/usr/bin/env bash\n"
        "# act runs a JavaScript action's step as `node main.js`: keep the summary it wrote\n"
        '"$DISKBENCH_WF_NODE" "$@"\n'
        "rc=$?\n"
        'if [ -s "${GITHUB_STEP_SUMMARY:-}" ]; then\n'
        '  cp "$GITHUB_STEP_SUMMARY" "$DISKBENCH_WF_SUMMARIES/$GITHUB_RUN_ID-$GITHUB_JOB-$(date +%s%N).md"\n'
        "fi\n"
        "exit $rc\n"
    )
    shim.chmod(0o755)
    if os.geteuid() == 0 and shutil.which("sudo") is None:
        # GitHub-hosted runners give their account passwordless sudo; here the jobs already run as root
        sudo = directory / "sudo"
        sudo.write_text('#!/usr/bin/env bash\n# the jobs run as root here: what sudo would do\nexec "$@"\n')
        sudo.chmod(0o755)


#: the name of the ``python3`` that :func:`make_suite_packages_python` writes
SUITE_PACKAGES_PYTHON = "python3-suite-packages"


def make_suite_packages_python(directory: Path) -> None:
    """``python3`` for scripts/setup.sh's ``$PYTHON``: a venv it makes (``-m venv DIR``) also sees
    this suite's installed packages (a ``.pth`` line, where both are the same Python), so the
    job's ``pip install -c constraints.txt -e .[dev]`` finds the pinned packages installed and
    installs the job's checkout alone, into its own venv; any other call is python3's own.
    setup.sh installs every package from nothing when the suite starts, and ci.yml's job (whose
    ``python -m venv`` is not setup.sh's) does in its own test."""
    site = Path(sysconfig.get_paths()["purelib"])
    # by its path: a job's PATH may lead ``python3`` back to this script (the setup-python stand-in)
    real = shutil.which("python3") or "python3"
    script = directory / SUITE_PACKAGES_PYTHON
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$#" -eq 3 ] && [ "$1" = -m ] && [ "$2" = venv ]; then\n'
        f'  "{real}" -m venv "$3" || exit\n'
        f'  site="$3/lib/{site.parent.name}/site-packages"\n'
        f'  if [ -d "$site" ]; then echo "{site}" > "$site/zz-suite-packages.pth"; fi\n'
        "  exit 0\n"
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    script.chmod(0o755)


@contextmanager
def fake_github(root: Path, seed: Mapping[str, Any]) -> Iterator[tuple[str, Path]]:
    """The action's FakeGitHub (``__tests__/fake-github-server.ts``) as a process: (URL, state file)."""
    esbuild = ACTION_DIR / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ACTION_DIR, check=True
        )
    bundle = root / "fake-github-server.cjs"
    subprocess.run(
        [
            str(esbuild),
            "__tests__/fake-github-server.ts",
            "--bundle",
            "--platform=node",
            "--format=cjs",
            f"--outfile={bundle}",
            "--log-level=warning",
        ],
        cwd=ACTION_DIR,
        check=True,
    )
    state = root / "github-state.json"
    seed_file = root / "github-seed.json"
    seed_file.write_text(json.dumps({**seed, "state": str(state)}))
    proc = subprocess.Popen(["node", str(bundle), str(seed_file)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"fake GitHub did not start: {url!r}")
        yield url, state
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def read_state(state: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(state.read_text())
    return result

"""The third-party actions the workflows use, done on this host (the workflow tests' edge).

Each ``standins/<action>/action.yml`` declares the inputs and outputs of the action it stands in
for (``actions/checkout``, ``actions/upload-artifact``, ...) and runs ``standin.py <action>`` with
its inputs as ``INPUT_*`` variables, as a runner gives them to an action. Where GitHub keeps
things, this host keeps them in directories the test names through the environment:

- ``DISKBENCH_WF_REMOTES``: the "GitHub" repositories, ``OWNER/NAME.git`` (bare; a pull
  request's head as ``refs/pull/N/head``, as GitHub keeps a fork's commits in the base repository);
- ``DISKBENCH_WF_ARTIFACTS``: the artifacts, ``RUN_ID/NAME/...`` (a run's jobs share them; a
  later run reads an earlier one's with ``run-id``);
- ``DISKBENCH_WF_PAGES``: the deployed GitHub Pages site.

A failure prints one ``::error::`` line naming the input, as the actions do, and exits 1.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path


class StandInError(Exception):
    """What the real action would fail with."""


def inp(name: str, default: str = "") -> str:
    return os.environ.get("INPUT_" + name.upper().replace("-", "_").replace(" ", "_"), default).strip()


def flag(name: str, default: bool) -> bool:
    value = inp(name)
    if not value:
        return default
    if value not in ("true", "false"):
        raise StandInError(f'Input does not meet YAML 1.2 "Core Schema" specification: {name}')
    return value == "true"


def set_output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.write(f"{name}={value}\n")


def add_path(directory: Path) -> None:
    with open(os.environ["GITHUB_PATH"], "a", encoding="utf-8") as out:
        out.write(f"{directory}\n")


def store(env: str) -> Path:
    value = os.environ.get(env)
    if not value:
        raise StandInError(f"{env} is not set: run the workflow through tests/workflows/actkit.py")
    return Path(value)


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise StandInError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def workspace_path(value: str) -> Path:
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    target = (workspace / value).resolve() if value else workspace
    return target


# -- actions/checkout -------------------------------------------------------------------------


def checkout() -> None:
    repository = inp("repository") or os.environ["GITHUB_REPOSITORY"]
    remote = store("DISKBENCH_WF_REMOTES") / f"{repository}.git"
    if not remote.is_dir():
        raise StandInError(f"repository: {repository!r} not found")
    own = repository == os.environ["GITHUB_REPOSITORY"]
    # the event's commit for the workflow's own repository, else the remote's default branch
    explicit = inp("ref")
    ref = explicit or (os.environ.get("GITHUB_SHA", "") if own else "")
    dest = workspace_path(inp("path"))
    workspace = Path(os.environ["GITHUB_WORKSPACE"]).resolve()
    if dest != workspace and workspace not in dest.parents:
        raise StandInError(f"Repository path '{dest}' is not under '{workspace}'")
    if dest.exists() and any(dest.iterdir()):
        shutil.rmtree(dest)  # clean: true, the default
    dest.mkdir(parents=True, exist_ok=True)
    git("init", "-q", str(dest))
    git("remote", "add", "origin", str(remote), cwd=dest)
    depth = inp("fetch-depth", "1")
    refspecs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/pull/*:refs/remotes/pull/*"]
    git("fetch", "-q", "--tags", "origin", *refspecs, cwd=dest)
    commit = resolve(dest, ref)
    sparse = [line.strip() for line in inp("sparse-checkout").splitlines() if line.strip()]
    if sparse:
        git("sparse-checkout", "set", *sparse, cwd=dest)
    # a branch is checked out as that local branch (asv, for one, reads the branches), the rest detached
    branch = branch_of(dest, explicit or (os.environ.get("GITHUB_REF", "") if own else ""), commit)
    if branch:
        git("checkout", "-q", "--force", "-B", branch, commit, cwd=dest)
    else:
        git("-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit, cwd=dest)
    if depth != "0":
        # shallow: only the commit (fetch-depth 1); history is fetch-depth 0's
        for branch in git("for-each-ref", "--format=%(refname)", "refs/remotes", cwd=dest).splitlines():
            git("update-ref", "-d", branch, cwd=dest)
        git("tag", "-l", cwd=dest) and git("tag", "-d", *git("tag", "-l", cwd=dest).split(), cwd=dest)
    if flag("persist-credentials", True):
        token = inp("token") or os.environ.get("GITHUB_TOKEN", "")
        git(
            "config",
            "--local",
            "http.https://github.com/.extraheader",
            f"AUTHORIZATION: basic {token}",
            cwd=dest,
        )
    set_output("ref", ref)
    set_output("commit", commit)
    print(f"checked out {repository} at {commit} into {dest}")


def branch_of(repo: Path, ref: str, commit: str) -> str:
    """The branch ``ref`` names, when the remote has it at ``commit``; else empty."""
    name = ref.removeprefix("refs/heads/")
    if not name or name.startswith("refs/") or len(name) == 40:
        return ""
    done = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", f"refs/remotes/origin/{name}"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    return name if done.returncode == 0 and done.stdout.strip() == commit else ""


def resolve(repo: Path, ref: str) -> str:
    candidates = (
        [
            ref,
            f"refs/remotes/origin/{ref.removeprefix('refs/heads/')}",
            f"refs/remotes/pull/{ref.removeprefix('refs/pull/')}",
        ]
        if ref
        else ["refs/remotes/origin/main"]
    )
    for candidate in candidates:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"{candidate}^{{commit}}"],
            cwd=repo,
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return done.stdout.strip()
    raise StandInError(f"A branch or tag with the name '{ref}' could not be found")


# -- actions/upload-artifact, download-artifact ------------------------------------------------


def run_store(run_id: str = "") -> Path:
    return store("DISKBENCH_WF_ARTIFACTS") / (run_id or os.environ["GITHUB_RUN_ID"])


def upload_artifact() -> None:
    name = inp("name", "artifact") or "artifact"
    patterns = [line.strip() for line in inp("path").splitlines() if line.strip()]
    if not patterns:
        raise StandInError("Input required and not supplied: path")
    files: list[Path] = []
    for pattern in patterns:
        for match in sorted(glob.glob(pattern, recursive=True)):
            path = Path(match)
            files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    if not files:
        message = f"No files were found with the provided path: {inp('path')}. No artifacts will be uploaded."
        mode = inp("if-no-files-found", "warn")
        if mode == "error":
            raise StandInError(message)
        print(f"::{'warning' if mode == 'warn' else 'notice'}::{message}")
        return
    # the root is the paths' least common ancestor (a directory given alone is its own root)
    roots = [Path(p) for p in patterns]
    root = Path(os.path.commonpath([str(r if r.is_dir() else r.parent) for r in roots]))
    dest = run_store() / name
    if dest.exists():
        raise StandInError(
            "Failed to CreateArtifact: Received non-retryable error: (409) Conflict: an artifact with this name already exists on the workflow run"
        )
    for file in files:
        target = dest / file.resolve().relative_to(root.resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)
    artifact_id = str(abs(hash((os.environ["GITHUB_RUN_ID"], name))) % 10**8)
    (dest.parent / f".{name}.id").write_text(artifact_id)
    set_output("artifact-id", artifact_id)
    print(f"Artifact {name} has been successfully uploaded! ({len(files)} files)")


def download_artifact() -> None:
    name = inp("name")
    pattern = inp("pattern")
    run_id = inp("run-id")
    if run_id and not inp("github-token"):
        raise StandInError("github-token is required when run-id is set")
    source = run_store(run_id)
    dest = workspace_path(inp("path"))
    available = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    if name:
        if name not in available:
            raise StandInError(f"Unable to download artifact(s): Artifact not found for name: {name}")
        shutil.copytree(source / name, dest, dirs_exist_ok=True)
        print(f"Artifact download completed successfully: {name} into {dest}")
        set_output("download-path", str(dest))
        return
    chosen = [a for a in available if not pattern or fnmatch.fnmatchcase(a, pattern)]
    merge = flag("merge-multiple", False)
    for artifact in chosen:
        shutil.copytree(source / artifact, dest if merge else dest / artifact, dirs_exist_ok=True)
    print(f"Total of {len(chosen)} artifact(s) downloaded: {', '.join(chosen)}")
    set_output("download-path", str(dest))


# -- actions/upload-pages-artifact, deploy-pages ---------------------------------------------


def upload_pages_artifact() -> None:
    site = Path(inp("path", "_site/"))
    if not site.is_dir():
        raise StandInError(f"path: {site} is not a directory")
    name = inp("name", "github-pages") or "github-pages"
    dest = run_store() / name
    if dest.exists():
        raise StandInError(f"an artifact named {name} already exists on the workflow run")
    dest.mkdir(parents=True)
    # the real action uploads one artifact.tar of the site (links dereferenced, .git left out)
    with tarfile.open(dest / "artifact.tar", "w") as tar:
        for item in sorted(site.iterdir()):
            if item.name in (".git", ".github"):
                continue
            tar.add(item, arcname=item.name, filter=lambda info: info)
    set_output("artifact_id", name)
    print(f"pages artifact {name}: {sum(1 for _ in site.rglob('*'))} entries")


def deploy_pages() -> None:
    name = inp("artifact_name", "github-pages") or "github-pages"
    tar_path = run_store() / name / "artifact.tar"
    if not tar_path.is_file():
        raise StandInError(
            f"Fetching artifact metadata failed. Is githubstatus.com reporting issues with API requests? No artifact named {name}"
        )
    site = store("DISKBENCH_WF_PAGES")
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    with tarfile.open(tar_path) as tar:
        tar.extractall(site, filter="data")
    url = site.as_uri() + "/"
    set_output("page_url", url)
    set_output("status", "succeed")
    print(f"Reported success! deployed to {url}")


# -- actions/setup-python, setup-node, setup-go: the host's own, or a failure ------------------


def tool_dir(name: str) -> Path:
    directory = Path(os.environ.get("RUNNER_TOOL_CACHE") or os.environ["RUNNER_TEMP"]) / "standin-bin" / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def setup_python() -> None:
    want = inp("python-version")
    for candidate in (f"python{want}", "python3"):
        found = shutil.which(candidate)
        if not found:
            continue
        version = subprocess.run(
            [found, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
        ).stdout.strip()
        if not want or version == want or version.startswith(want + "."):
            bin_dir = tool_dir(f"python-{version}")
            # a test may give the interpreter whose venvs also see its own packages
            target = os.environ.get("DISKBENCH_WF_SETUP_PYTHON") or found
            for alias in ("python", "python3"):
                link = bin_dir / alias
                link.unlink(missing_ok=True)
                link.symlink_to(target)
            add_path(bin_dir)
            set_output("python-version", version)
            set_output("python-path", str(bin_dir / "python"))
            print(f"Successfully set up CPython ({version})")
            return
    raise StandInError(f"The version '{want}' with architecture 'x64' was not found for this host.")


def setup_node() -> None:
    want = inp("node-version")
    found = shutil.which("node")
    version = (
        subprocess.run([found, "--version"], capture_output=True, text=True).stdout.strip() if found else ""
    )
    if not found or (want and not version.lstrip("v").startswith(want.lstrip("v") + ".")):
        raise StandInError(
            f"Unable to find Node version '{want}' for platform linux and architecture x64 (this host has {version or 'none'})."
        )
    set_output("node-version", version)
    print(f"Found in cache @ {found} ({version})")


def setup_go() -> None:
    want = inp("go-version")
    best: tuple[tuple[int, ...], str] | None = None
    for candidate in [shutil.which("go") or "", "/usr/local/go/bin/go", *glob.glob("/usr/lib/go-1.*/bin/go")]:
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        text = subprocess.run([candidate, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
        parts = tuple(int(p) for p in text.removeprefix("go").split(".")[:2] if p.isdigit())
        if best is None or parts > best[0]:
            best = (parts, candidate)
    wanted = tuple(int(p) for p in want.split(".")[:2] if p.isdigit())
    if best is None or best[0] < wanted:
        raise StandInError(f"Unable to find Go version '{want}' for platform linux and architecture x64.")
    add_path(Path(best[1]).parent)
    set_output("go-version", ".".join(map(str, best[0])))
    print(f"go {'.'.join(map(str, best[0]))} at {best[1]}")


ACTIONS: dict[str, Callable[[], None]] = {
    "checkout": checkout,
    "upload-artifact": upload_artifact,
    "download-artifact": download_artifact,
    "upload-pages-artifact": upload_pages_artifact,
    "deploy-pages": deploy_pages,
    "setup-python": setup_python,
    "setup-node": setup_node,
    "setup-go": setup_go,
}


def main(argv: list[str]) -> int:
    try:
        ACTIONS[argv[1]]()
    except StandInError as exc:
        print(f"::error::{exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

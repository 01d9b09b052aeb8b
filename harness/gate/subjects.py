"""The two sides of a gate: revisions checked out in git worktrees, their policy, recipe and QEMU.

The harness code that runs is this checkout's, for both sides; what a side
brings is what it measures: its ``policy.toml``, its guest recipe
(``images/``) and its QEMU (given, or built in the worktree).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.compare.model import Side
from harness.errors import BuildError, CommandError, InfraError, UsageError
from harness.gate.build import BuildInfo, build_side
from harness.host import proc
from harness.paths import IMAGES_DIR
from harness.subject.binaries import Binaries
from harness.subject.policy import POLICY_FILE, Policy, load_policy

SIDES = ("base", "head")


@dataclass(frozen=True)
class SubjectSource:
    """Where one side comes from: a revision, and optionally its own QEMU."""

    label: str
    rev: str
    qemu: str | None = None
    qemu_img: str | None = None
    #: whose build ``qemu`` is, where it was built for this side (a bisection's commit)
    build: BuildInfo | None = None


@dataclass
class Subject:
    """One side, prepared: its checkout, policy, recipe and binaries."""

    label: str
    rev: str
    commit: str
    checkout: Path
    policy: Policy
    recipe_dir: Path
    qemu: str | None
    qemu_img: str | None
    build: BuildInfo | None = None

    def describe(self) -> Side:
        """This side as the comparison names it: label, rev, commit, policy and the binaries it
        brought (the session adds its subject and machine)."""
        return Side(
            label=self.label,
            rev=self.rev,
            commit=self.commit,
            policy=self.policy.as_dict(),
            qemu=self.qemu,
            qemu_img=self.qemu_img,
            build=self.build.as_dict() if self.build is not None else None,
            keys=Side.GATE_BUILT if self.build is not None else Side.GATE,
        )

    def binaries(self, default: Binaries) -> Binaries:
        """This side's QEMU and qemu-img: its own where it brings them, else ``default`` (the run's)."""
        return Binaries(qemu=self.qemu or default.qemu, qemu_img=self.qemu_img or default.qemu_img)


def side_binaries(
    subject: Subject, default: Binaries, qemu_cache: Path, log: Callable[[str], None] = lambda _m: None
) -> Binaries:
    """A side's QEMU: the one given for it or built in its checkout, else the build its policy
    pins (``[qemu] version``, resolved among the versions the configured suites offer and fetched
    into ``qemu_cache``: a pull request names a version, never a path), else ``default``."""
    pin = subject.policy.qemu
    if subject.qemu or not pin.pinned:
        return subject.binaries(default)
    from harness.debian.qemu import QemuCache
    from harness.subject.qemu_build import QemuBuildError

    try:
        build = QemuCache(qemu_cache).get(pin.version)
    except QemuBuildError as exc:
        raise QemuBuildError(f"{subject.label}: {subject.policy.source}: [qemu] {exc.message}") from None
    log(f"gate: {subject.label} pins QEMU {pin.version}: {build.describe()}")
    return build.binaries()


def quiet_git(repo: Path) -> list[str]:
    """``git -C repo`` with no hook, no fsmonitor and no filter driver: what checks a pull request's
    tree out as root runs nothing the tree's ``.gitattributes`` names (a filter configured for the
    whole system, git-lfs's, would run its smudge command on the pull request's files)."""
    words = ["git", "-C", str(repo), "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]
    found = proc.run(
        ["git", "-C", str(repo), "config", "--name-only", "--get-regexp", r"^filter\."],
        timeout_s=60,
        check=False,
    )
    drivers = sorted({line.split(".")[1] for line in found.stdout.splitlines() if line.count(".") >= 2})
    for driver in drivers:
        for key, value in (("smudge", ""), ("clean", ""), ("process", ""), ("required", "false")):
            words += ["-c", f"filter.{driver}.{key}={value}"]
    return words


def git(repo: Path, *args: str, timeout_s: float = 120.0) -> str:
    try:
        result = proc.run([*quiet_git(repo), *args], timeout_s=timeout_s)
    except CommandError as exc:
        raise InfraError(f"git {' '.join(args)} in {repo} failed: {exc.message}") from exc
    return result.stdout.strip()


def resolve_rev(repo: Path, rev: str, what: str) -> str:
    result = proc.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        timeout_s=60,
        check=False,
    )
    if result.returncode != 0:
        raise UsageError(f"{what} {rev!r} is not a commit of {repo}: pass a branch, tag or commit")
    return result.stdout.strip()


#: where a build command leaves a side's binaries, in its checkout (a QEMU tree's ``build/``)
BUILT_QEMU = "build/qemu-system-x86_64"
BUILT_QEMU_IMG = "build/qemu-img"


def prepare_subject(
    repo: Path,
    source: SubjectSource,
    into: Path,
    *,
    default_policy: Path,
    build_command: str | None = None,
    log: Callable[[str], None] = lambda _m: None,
    vet: Callable[[str, Policy], None] | None = None,
) -> Subject:
    """Check ``source.rev`` out into ``into`` and find what that side measures.

    A checkout without ``policy.toml`` (a QEMU tree) uses ``default_policy``;
    one without ``images/recipe.toml`` uses this repository's guest recipe.
    ``vet(label, policy)`` checks the side's policy before anything is built.
    """
    commit = resolve_rev(repo, source.rev, f"--{source.label}")
    git(repo, "worktree", "add", "--detach", "--force", str(into), commit, timeout_s=600)
    log(f"gate: {source.label} = {source.rev} ({commit[:12]}) checked out in {into}")
    policy_file = into / POLICY_FILE
    policy = load_policy(policy_file if policy_file.is_file() else default_policy)
    recipe_dir = into / "images" if (into / "images" / "recipe.toml").is_file() else IMAGES_DIR
    if vet is not None:
        vet(source.label, policy)
    qemu, qemu_img, build = source.qemu, source.qemu_img, source.build
    if build_command and not qemu:
        # the build is the pull request's code: it runs as a fresh account of its own, in a checkout
        # given to it alone; nothing of it outlives it, and its tree is sealed read-only after it
        log(f"gate: building {source.label}: {build_command}")
        build = build_side(
            f"{source.label} ({source.rev})",
            build_command,
            into,
            log_path=into.parent / f"{into.name}.build.log",
        )
        log(f"gate: {source.label} built as {build.account.name}; its tree is read-only now")
        qemu = str(into / BUILT_QEMU)
        qemu_img = qemu_img or str(into / BUILT_QEMU_IMG)
        for path in (qemu, qemu_img):
            if not os.access(path, os.X_OK):
                raise BuildError(f"the build command of {source.label} made no executable {path}: check it")
    return Subject(
        label=source.label,
        rev=source.rev,
        commit=commit,
        checkout=into,
        policy=policy,
        recipe_dir=recipe_dir,
        qemu=qemu,
        qemu_img=qemu_img,
        build=build,
    )


def remove_worktree(repo: Path, checkout: Path) -> None:
    proc.run([*quiet_git(repo), "worktree", "remove", "--force", str(checkout)], timeout_s=120, check=False)
    proc.run([*quiet_git(repo), "worktree", "prune"], timeout_s=60, check=False)


def repo_toplevel(repo: Path) -> Path:
    """The top of the git checkout ``repo`` is in; a usage error when it is none."""
    top = proc.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"], timeout_s=60, check=False)
    if top.returncode != 0:
        raise UsageError(
            f"--repo {repo} is not a git repository: pass the checkout whose revisions to compare"
        )
    return Path(top.stdout.strip())


@contextlib.contextmanager
def prepared_subjects(
    repo: Path,
    sources: Sequence[SubjectSource],
    *,
    default_policy: Path,
    build_command: str | None = None,
    log: Callable[[str], None] = lambda _m: None,
    vet: Callable[[str, Policy], None] | None = None,
) -> Iterator[list[Subject]]:
    """Each source checked out (and built) in a temporary directory, removed again on the way out;
    ``vet`` as :func:`prepare_subject` takes it."""
    checkouts = Path(tempfile.mkdtemp(prefix="diskbench-gate-"))
    # a QEMU built in a checkout must be reachable by the QEMU account (harness.host.confine)
    checkouts.chmod(0o755)
    subjects: list[Subject] = []
    try:
        for source in sources:
            subjects.append(
                prepare_subject(
                    repo,
                    source,
                    checkouts / source.label,
                    default_policy=default_policy,
                    build_command=build_command,
                    log=log,
                    vet=vet,
                )
            )
        yield subjects
    finally:
        for subject in subjects:
            remove_worktree(repo, subject.checkout)
        with contextlib.suppress(OSError):
            for leftover in sorted(checkouts.rglob("*"), reverse=True):
                if leftover.is_dir() and not leftover.is_symlink():
                    leftover.rmdir()
                else:
                    leftover.unlink()
            checkouts.rmdir()

"""A bisection's QEMU builds: each commit built once (``--build-command``), for all its gate runs.

A gate run builds both its sides in checkouts it removes again; a step is two
gate runs against the ends, so the ends would be built again at every step and
the step commit twice.  Here each commit is checked out and built once, by the
gate's own :func:`~harness.gate.prepare_subject` (as a fresh account of its own,
in a checkout given to it alone, sealed read-only after it), and its binaries are handed to the gate runs as
the side's own QEMU, which they then do not build.  The checkouts live in a
temporary directory removed when the bisection ends or stops.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.gate import SubjectSource, prepare_subject, remove_worktree
from harness.gate.build import BuildInfo


class Builds:
    """The commits built so far, by commit; :meth:`source` builds one the first time it is asked."""

    def __init__(
        self,
        repo: Path,
        *,
        build_command: str | None,
        default_policy: Path,
        log: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.repo = repo
        self.build_command = build_command
        self.default_policy = default_policy
        self.log = log
        self.built: dict[str, tuple[str | None, str | None, BuildInfo | None]] = {}
        self.checkouts: list[Path] = []
        self._root: Path | None = None

    def source(self, label: str, commit: str) -> SubjectSource:
        """``commit`` as side ``label`` of a gate run: with its own QEMU where there is a build
        command (built now if it is not yet); a failed build raises :class:`~harness.errors.BuildError`."""
        if not self.build_command:
            return SubjectSource(label, commit)
        if commit not in self.built:
            into = self.root / commit[:12]
            self.checkouts.append(into)
            self.log(f"bisect: building {commit[:12]} once for all its comparisons")
            subject = prepare_subject(
                self.repo,
                SubjectSource(label, commit),
                into,
                default_policy=self.default_policy,
                build_command=self.build_command,
                log=self.log,
            )
            self.built[commit] = (subject.qemu, subject.qemu_img, subject.build)
        qemu, qemu_img, build = self.built[commit]
        return SubjectSource(label, commit, qemu=qemu, qemu_img=qemu_img, build=build)

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="diskbench-bisect-"))
            # a QEMU built in a checkout must be reachable by the QEMU account (harness.host.confine)
            self._root.chmod(0o755)
        return self._root

    def close(self) -> None:
        """Remove every checkout and the directory."""
        for checkout in self.checkouts:
            remove_worktree(self.repo, checkout)
        if self._root is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._root)
        self.checkouts.clear()
        self.built.clear()
        self._root = None

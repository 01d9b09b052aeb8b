"""Replay a stream natively with the side's own ``qemu-io``: one replay sample.

The image is made fresh as the cell says (:func:`harness.sample.images.create`,
the side's ``qemu-img``), or a fresh overlay over the cell's chain
(:mod:`harness.sample.chain`: each layer handed to qemu-io as a descriptor, as to
the guest's QEMU); ``qemu-io`` from the same directory opens it with
the cell's cache mode, aio and the policy's drive options
(:mod:`harness.sample.replay.script`), runs the stream's requests and reports each
one's time.  qemu-io runs confined as qemu-img is (:mod:`harness.host.confine`:
the unprivileged account, its files handed over as descriptors; qemu-io has
no ``-sandbox`` option, unlike QEMU).

Before a figure counts, three checks, each failing the sample with its
reason (:class:`~harness.sample.replay.script.ReplayMismatch`):

- the options the replay's argv applies equal the guest's ``-drive`` options
  for the cell (an option qemu-io cannot express is a mismatch);
- where the stream was recorded under these very options, the block graph
  qemu-io opened (its own ``bdrv_open_common`` trace: drivers and the
  cache/aio open flags, top down) equals the one the guest's QEMU opened;
- qemu-io reported as many reads, writes and discards as the stream holds.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.errors import CommandError, ProtocolError, ReplayTimeout
from harness.host import confine, diskgroups, proc
from harness.sample import chain as chains
from harness.sample import images
from harness.sample.pairing import PARTNER_WAIT_S, Pairing, meet, shared_cpu
from harness.sample.replay.capture import graph_of
from harness.sample.replay.script import (
    Completion,
    ReplayMismatch,
    command_args,
    commands,
    counts,
    figures,
    graph_mismatch,
    guest_options,
    option_mismatch,
    parse_output,
    qemu_io_argv,
    replay_options,
)
from harness.sample.replay.stream import Stream
from harness.sample.vm import DISK_NODE, cell_drive
from harness.sample.vm.config import option_value
from harness.spec import Cell, secret_object
from harness.subject.binaries import Binaries
from harness.subject.qemu_build import environ_for

REPLAY_TIMEOUT_S = 1800.0
# the pair's mechanics moved to harness.sample.pairing (a guest pair shares them); the names stay
__all__ = [
    "DISK_NODE",
    "PARTNER_WAIT_S",
    "REPLAY_TIMEOUT_S",
    "Pairing",
    "ReplaySample",
    "guest_drive_options",
    "meet",
    "qemu_io_beside",
    "replay",
    "shared_cpu",
]


def qemu_io_beside(qemu_img: str) -> str:
    """The ``qemu-io`` of the same build or package as ``qemu-img`` (its directory)."""
    found = shutil.which(qemu_img) or qemu_img
    return str(Path(found).resolve().parent / "qemu-io")


def guest_drive_options(
    cell: Cell,
    drive_options: tuple[tuple[str, str], ...],
    image: Path,
    backing: tuple[tuple[Path, str], ...] = (),
) -> dict[str, str]:
    """The guest's ``-drive`` options for ``cell``, from the Drive the runner attaches (``backing``:
    an overlay's chain as the Drive takes it)."""
    return guest_options(cell_drive(cell, image, options=drive_options, backing=backing).argv()[1])


@dataclass(frozen=True)
class ReplaySample:
    figures: dict[str, float]
    options: dict[str, str]
    graph: list[tuple[str, str]]
    argv: list[str]
    completions: dict[str, int]
    notes: list[str] = field(default_factory=list)
    #: each pass's wall time, in order
    pass_wall_s: list[float] = field(default_factory=list)
    #: passes that ran at the same moment as their partner's (see ``together``)
    passes_together: int = 0
    #: the CPUs qemu-io ran on (a shared pair's one CPU, a crossed pair's two); empty: any
    cpus: tuple[int, ...] = ()
    #: a crossed pair's swapping of the last pass (its CPUs, the time on each, the swaps)
    crossed: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "metrics": self.figures,
            "options": self.options,
            "graph": [list(node) for node in self.graph],
            "argv": self.argv,
            "completions": self.completions,
            "notes": self.notes,
            "pass_wall_s": self.pass_wall_s,
            "passes_together": self.passes_together,
            "cpus": list(self.cpus),
            **({"crossed": self.crossed} if self.crossed is not None else {}),
        }


@dataclass(frozen=True)
class Replayer:
    """What replays a stream, and where: the side's ``qemu-io`` and ``qemu-img`` (of its binaries:
    :meth:`of`), the work dir of its fresh images, its policy's extra drive options, and the
    deadline of a sample (all its passes together)."""

    qemu_io: str
    qemu_img: str
    work_dir: Path
    drive_options: tuple[tuple[str, str], ...] = ()
    timeout_s: float = REPLAY_TIMEOUT_S
    #: the uid qemu-img and qemu-io run as (the side's :attr:`Binaries.runs_as`)
    runs_as: int | None = None
    #: the chain a cell with a backing replays over, a fresh overlay on it per pass
    chain: chains.Chain | None = None

    @classmethod
    def of(
        cls, binaries: Binaries, work_dir: Path, drive_options: tuple[tuple[str, str], ...] = ()
    ) -> Replayer:
        """The replayer of a side's ``binaries`` (its qemu-io beside its qemu-img)."""
        return cls(
            qemu_io=binaries.qemu_io,
            qemu_img=binaries.qemu_img,
            work_dir=work_dir,
            drive_options=drive_options,
            runs_as=binaries.runs_as,
        )


def replay(
    stream: Stream,
    cell: Cell,
    *,
    replayer: Replayer,
    passes: int = 1,
    together: Pairing | None = None,
) -> ReplaySample:
    """Replay ``stream`` on a fresh image of ``cell`` with ``replayer``, ``passes`` times (a fresh
    image and a qemu-io of its own each time, one after the other); raises ReplayMismatch or
    ProtocolError on a check.

    The figures are of all passes together: ``replay.wall_s`` their summed wall times, the latency
    quantiles over every request of every pass, the counts per pass.  ``replayer.timeout_s`` holds
    for all passes together: a qemu-io still running at it is killed (:class:`ReplayTimeout`).

    ``together``: the :class:`Pairing` shared with a partner replay in another thread (the other
    side of a gate's pair): each pass starts its qemu-io only when the partner's is ready too, on
    the pair's CPU, so both serve their requests at the same moment on the same CPU and the host's
    own noise, common to both, cancels in their ratio.  A partner that fails breaks the barrier;
    the passes then run alone.
    """
    try:
        return _replay(stream, cell, replayer, passes, together)
    except BaseException:
        # the partner's passes must not wait for ours
        if together is not None:
            together.barrier.abort()
        raise


def _replay(
    stream: Stream, cell: Cell, replayer: Replayer, passes: int, together: Pairing | None
) -> ReplaySample:
    if stream.disk_bytes > cell.image.size:
        raise ReplayMismatch(
            f"the stream was recorded on a {stream.disk_bytes}-byte disk, larger than the cell's {cell.image.size}"
        )
    if passes < 1:
        raise ValueError(f"passes must be 1 or more, not {passes}")
    if (cell.backing is None) != (replayer.chain is None):
        raise ReplayMismatch(
            "the cell has a backing chain and the replay was given none"
            if replayer.chain is None
            else "the replay was given a backing chain for a cell that has none"
        )
    replayer.work_dir.mkdir(parents=True, exist_ok=True)
    script = commands(stream.requests)
    expected = counts(stream)
    done: list[Completion] = []
    walls: list[float] = []
    met = 0
    deadline = time.monotonic() + replayer.timeout_s
    for number in range(1, passes + 1):
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise ReplayTimeout(
                f"pass {number} of {passes} had no time left of the deadline of {replayer.timeout_s:.0f} s"
            )
        one = _one_pass(stream, cell, script, replace(replayer, timeout_s=left_s), together)
        met += one.together
        got = {word: sum(1 for c in one.done if c.word == word) for word in ("wrote", "read", "discard")}
        if got != expected:
            raise ProtocolError(f"qemu-io completed {got}, the stream holds {expected}")
        done += one.done
        walls.append(one.wall_s)
    notes = []
    if stream.drive != one.wanted:
        notes.append("the stream was recorded under other drive options: its block graph is not compared")
    if together is not None and met < passes:
        notes.append(f"{passes - met} of {passes} passes ran without their partner (it failed or was late)")
    flushes = sum(1 for cmd in script if cmd == "flush")
    return ReplaySample(
        figures=figures(done, wall_s=sum(walls), flushes=flushes * passes, passes=passes),
        options=one.applied,
        graph=one.graph,
        argv=one.argv,
        completions={**expected, "flush": flushes},
        notes=notes,
        pass_wall_s=walls,
        passes_together=met,
        cpus=one.cpus,
        crossed=one.crossed,
    )


@dataclass(frozen=True)
class _Pass:
    done: list[Completion]
    wall_s: float
    wanted: dict[str, str]
    applied: dict[str, str]
    graph: list[tuple[str, str]]
    argv: list[str]
    together: bool = False
    cpus: tuple[int, ...] = ()
    crossed: dict[str, Any] | None = None


def _one_pass(
    stream: Stream, cell: Cell, script: list[str], replayer: Replayer, together: Pairing | None = None
) -> _Pass:
    """One replay on a fresh image, its options and block graph checked; with ``together``, its
    qemu-io starts when the partner's does."""
    # a name of its own: the two sides of a pair may replay the same cell in one work dir at once
    token = uuid.uuid4().hex[:8]
    image = replayer.work_dir / f"{cell.id}.{token}.replay.{cell.image.format.value}"
    trace = replayer.work_dir / f"{cell.id}.{token}.replay.trace"
    trace.unlink(missing_ok=True)
    if replayer.chain is None:
        images.create(image, cell.image, qemu_img=replayer.qemu_img, runs_as=replayer.runs_as)
    else:
        chains.overlay_on(
            image, cell.image, replayer.chain, qemu_img=replayer.qemu_img, runs_as=replayer.runs_as
        )
    layers = () if replayer.chain is None else replayer.chain.top_first
    try:
        with confine.Handoff(confine.account(replayer.runs_as)) as handoff:
            name = handoff.write(image)
            traced = handoff.write(trace, create=True)
            backing = tuple((Path(handoff.read(layer)), fmt) for layer, fmt in layers)
            wanted = guest_drive_options(cell, replayer.drive_options, Path(name), backing)
            secret = secret_object() if cell.image.encrypted else None
            head = qemu_io_argv(
                replayer.qemu_io, name, wanted, secret_object=secret, backing=[str(p) for p, _ in backing]
            )
            applied = replay_options(head)
            why = option_mismatch(wanted, applied)
            if why:
                raise ReplayMismatch(why)
            # a shared pair's CPU (a crossed pair's two), taken in the child before its account's
            # limits hold it there
            cpus = together.cpus if together is not None else ()
            argv = [head[0], "-T", f"enable=bdrv_open_common,file={option_value(traced)}", *head[1:]]
            met = meet(together)
            crossing = _Crossing(together if met and together is not None and together.crossing else None)
            try:
                # on a host disk model, a disk of the model's own to this qemu-io, which it joins
                # itself (harness.host.diskgroups)
                with diskgroups.own_disk(image, uid=handoff.account.uid) as group:
                    kwargs = handoff.popen_kwargs(
                        functools.partial(_in_child, cpus, group) if cpus or group else None
                    )
                    try:
                        result = proc.run(
                            [*argv, *command_args(script)],
                            timeout_s=replayer.timeout_s,
                            env=environ_for(head[0]),
                            confined={**kwargs, **crossing.hook()},
                        )
                    finally:
                        crossing.end()
            except CommandError as exc:
                if exc.timed_out:
                    raise ReplayTimeout(
                        f"qemu-io ran past its deadline of {replayer.timeout_s:.0f} s", log_tail=exc.log_tail
                    ) from exc
                raise ProtocolError(f"qemu-io failed: {exc.message}", log_tail=exc.log_tail) from exc
        with trace.open(encoding="utf-8", errors="replace") as lines:
            graph = graph_of(lines, image=name)
    finally:
        image.unlink(missing_ok=True)
        trace.unlink(missing_ok=True)
    if stream.drive == wanted:
        why = graph_mismatch(stream.graph, graph)
        if why:
            raise ReplayMismatch(why)
    return _Pass(
        parse_output(result.stdout), result.duration_s, wanted, applied, graph, argv, met, cpus, crossing.got
    )


class _Crossing:
    """A crossed pair's qemu-io: it joins the swapping once started, leaves it once over (in
    every case); ``got``: what the swapping gave it."""

    def __init__(self, together: Pairing | None) -> None:
        self.together = together
        self.pid: int | None = None
        self.got: dict[str, Any] | None = None

    def hook(self) -> dict[str, Any]:
        """:func:`harness.host.proc.run`'s ``on_start`` where the pair is crossed, else nothing."""
        return {"on_start": self._started} if self.together is not None else {}

    def _started(self, pid: int) -> None:
        self.pid = pid
        if self.together is not None:
            self.together.started(pid)

    def end(self) -> None:
        """The qemu-io is over (or never started): it leaves the swapping."""
        if self.together is None or self.pid is None:
            return
        pid, self.pid = self.pid, None
        crossed = self.together.finished(pid)
        self.got = crossed.as_dict() if crossed is not None else None


def _in_child(cpus: tuple[int, ...], group: Path | None) -> None:
    """In qemu-io's process before exec, as its own account: its pair's CPU where given, its own
    disk on a model where given."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    diskgroups.join(group)

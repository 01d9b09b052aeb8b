"""The streams a gate's replay cells replay: base's, on both sides.

A replay cell (``measure = "replay"``) measures the block layer of each side with the very same
requests: base's stream, recorded once with base's guest, workload and drive options
(:func:`harness.sample.replay.record.cached_stream`), is handed to the samples of both sides
(:func:`harness.sample.replay.sample.replay_sampler`); each side's replay applies its own drive options
(its policy, its cell's cache mode and format) on a fresh image of its own cell.

What the stream holds is decided by the guest recipe, the workload and QEMU, which head may
change too.  Where head's stream would be recorded under other such material than base's
(:func:`harness.sample.replay.record.stream_key`, less the drive options that the replay applies
anyway), head's stream is recorded as well and the two are compared by
:meth:`~harness.sample.replay.stream.Stream.summary`; a difference is reported as a structural change
of the cell (:func:`stream_note`), while both sides still replay base's requests.

Every recording is inside the gate's limits: base's within what is left of the budget, head's
within :func:`~harness.gate.rounds.head_deadline` of base's own recording time (as the host clocked
it); its write log and trace within :func:`~harness.sample.replay.record.recording_caps` (head's
also within a few times base's log).  A head recording past its cap is a structural change of the
cell (:attr:`GateStreams.over_cap`), one past its deadline ``head-timed-out``
(:attr:`GateStreams.timed_out`): the pull request's, never an infrastructure error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.errors import GuestTimeout, StreamOverCap
from harness.gate.rounds import Clock, Stop, head_deadline
from harness.sample.guest_sampler import RunOptions, Sampler, vm_config
from harness.sample.pairing import Mode, Pairing
from harness.sample.replay.record import RecordingCaps, cached_stream, recording_caps, stream_key
from harness.sample.replay.sample import replay_sampler
from harness.sample.replay.stream import Stream
from harness.spec import Cell, Measure

#: what decides that two streams differ: the bytes read and written, which the guest's timing does
#: not change; and a count of requests of one kind by more than COUNT_FACTOR either way (or one
#: present on one side only): the guest merges and times its requests differently from one
#: recording to the next (85 to 102 writes of one dd cell)
BYTE_KEYS = ("write_bytes", "read_bytes")
COUNT_KEYS = ("read", "write", "write_zeroes", "flush", "discard")
COUNT_FACTOR = 1.5
#: what a difference lists (Stream.summary's keys); depths follow the guest's timing
SUMMARY_KEYS = (
    "read",
    "write",
    "write_zeroes",
    "flush",
    "discard",
    "write_bytes",
    "read_bytes",
    "zero_writes",
    "fua_writes",
)


@dataclass
class GateStreams:
    """Base's stream of each replay cell (by gate name), the samplers that replay it, and notes."""

    streams: dict[str, Stream] = field(default_factory=dict)
    samplers: dict[str, Sampler] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    #: where the two sides' samples of a pair run at the same moment: what they share
    together: dict[str, Pairing] = field(default_factory=dict)
    #: cells whose head recording grew past its cap: why (a structural change of its own kind)
    over_cap: dict[str, str] = field(default_factory=dict)
    #: cells whose head recording ran past its deadline: that deadline
    timed_out: dict[str, float] = field(default_factory=dict)
    #: why the recordings ended the gate before any round (a head past its deadline, the budget)
    stop: Stop | None = None


def summary_difference(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """``["write 71 → 80", "write_bytes 67108864 → 75497472"]``: what differs between two summaries."""
    return [
        f"{key} {base.get(key)} → {head.get(key)}" for key in SUMMARY_KEYS if base.get(key) != head.get(key)
    ]


def stream_note(base: Stream, head: Stream) -> str:
    """The structural change of a replay cell whose head records another stream, or ``""``."""
    ours, theirs = base.summary(), head.summary()
    if not _differ(ours, theirs):
        return ""
    moved = summary_difference(ours, theirs)
    return (
        "structural change: head's guest issues another request stream ("
        + ", ".join(moved)
        + "); both sides replayed base's"
    )


def _differ(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> bool:
    if any(ours[key] != theirs[key] for key in BYTE_KEYS):
        return True
    for key in COUNT_KEYS:
        low, high = sorted((ours[key], theirs[key]))
        if (low == 0) != (high == 0) or high > COUNT_FACTOR * low:
            return True
    return False


def _material(cell: Cell, side: Any) -> dict[str, Any]:
    """The stream key's material of ``cell`` on ``side``, less the drive options."""
    session = side.session
    config = vm_config(cell, session.guest, session.opts, session.opts.work_dir / "@")
    _, material = stream_key(cell, session.guest, session.opts, config)
    return {k: v for k, v in material.items() if k != "drive"}


def within(opts: RunOptions, deadline_s: float) -> RunOptions:
    """``opts`` with its boot and workload within ``deadline_s``."""
    return replace(
        opts,
        workload_timeout_s=min(opts.workload_timeout_s, deadline_s),
        boot_timeout_s=min(opts.boot_timeout_s, deadline_s),
    )


def _recorded(side: Any, cell: Cell, limit_s: float, log_dir: Path, caps: RecordingCaps) -> Stream:
    """``cell``'s stream as ``side``'s guest records it (or the cache has it), within ``limit_s``."""
    _, stream = cached_stream(
        cell, side.session.guest, within(side.session.opts, limit_s), log_dir, caps=caps
    )
    return stream


def prepare_streams(
    sides: Mapping[str, Any],
    names: list[str],
    *,
    passes: int,
    log_root: Path,
    together: bool = False,
    pairing: Mode = Mode.SHARED,
    progress: Callable[[str], None] = lambda _m: None,
    clock: Clock | None = None,
) -> GateStreams:
    """Record (or find in the cache) base's stream of every replay cell in ``names``; head's too
    where it could differ; the samplers that replay base's on both sides (``together``: a pair's
    two samples run at the same moment, both on one CPU or crossed by ``pairing``, see
    :class:`harness.sample.pairing.Pairing`).
    Each recording within ``clock``'s budget (none: the sides' own timeouts) and its caps."""
    out = GateStreams()
    base, head = sides["base"], sides["head"]
    for name in names:
        cell = base.cells[name]
        if cell.measure is not Measure.REPLAY:
            continue
        progress(f"gate: the request stream of {name} (base's guest)")
        limit_s = clock.limit_s() if clock is not None else base.session.opts.workload_timeout_s
        budget = Stop(f"budget of {clock.budget_s / 60:.0f} min reached", over_budget=True) if clock else None
        if limit_s <= 0 and budget is not None:
            out.stop = budget
            return out
        try:
            stream = _recorded(base, cell, limit_s, log_root / "base" / name, recording_caps(cell.image.size))
        except GuestTimeout:
            # base's own recording cut by what was left of the budget: the budget ran out
            if budget is None or limit_s >= base.session.opts.workload_timeout_s:
                raise
            out.stop = budget
            return out
        out.streams[name] = stream
        if together:
            out.together[name] = Pairing(mode=pairing)
        out.samplers[name] = replay_sampler(
            stream, passes=passes, label=f"base {stream.digest[:12]}", together=out.together.get(name)
        )
        head_cell = head.cells[name]
        if _material(head_cell, head) != _material(cell, base):
            progress(f"gate: the request stream of {name} (head's guest, to compare)")
            limit_s = clock.limit_s() if clock is not None else head.session.opts.workload_timeout_s
            base_s = stream.source.get("recording_host_s")
            deadline_s = head_deadline(
                [float(base_s)] if isinstance(base_s, (int, float)) else [], limit_s=limit_s
            )
            caps = recording_caps(head_cell.image.size, base=stream)
            try:
                theirs = _recorded(head, head_cell, deadline_s, log_root / "head" / name, caps)
            except StreamOverCap as exc:
                out.over_cap[name] = f"structural change: head's recording stopped: {exc.message}"
                progress(f"gate: head's recording of {name} stopped: {exc.message}")
                continue
            except GuestTimeout as exc:
                # as a head sample past its deadline: no more recordings, no rounds
                out.timed_out[name] = deadline_s
                out.stop = Stop(
                    f"head timed out on {name} (its recording, deadline {deadline_s:.0f} s)",
                    head_timed_out=((name, deadline_s),),
                )
                progress(
                    f"gate: head's recording of {name} ran past its deadline of {deadline_s:.0f} s: "
                    f"{exc.message}; no more rounds"
                )
                return out
            note = stream_note(stream, theirs)
            if note:
                out.notes[name] = note
    return out

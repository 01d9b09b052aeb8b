"""A replay sample: the cell's request stream (recorded once from a guest, then cached)
replayed natively by the side's ``qemu-io`` on a fresh image (a fresh overlay over the cell's
chain, where it has one: ``host.chain`` says which), as one sample of a record.

The sample has the shape of a guest sample (``index``, ``status``, ``started_at``,
``metrics``, ``host``, ``logs``) plus ``measure: "replay"`` and ``replay`` (the options
and block graph the replay applied, its argv, the stream it replayed).  A failure of the
sample (a stream that cannot be recorded, options the replay cannot apply, a count that
does not match) is the sample's ``reason``, never the sweep's crash.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.record.model import Sample
from harness.sample import chain
from harness.sample.clean import clean_sample
from harness.sample.guest_sampler import Guest, RunOptions, Sampler
from harness.sample.replay.record import cached_stream
from harness.sample.replay.replay import Pairing, Replayer, replay
from harness.sample.replay.stream import Stream
from harness.spec import Cell
from harness.subject.policy import options_for


def replay_sampler(
    stream: Stream | None = None,
    *,
    passes: int = 1,
    label: str = "",
    together: Pairing | None = None,
) -> Sampler:
    """A sampler that replays ``stream`` (the cell's own, recorded and cached, when None)
    ``passes`` times per sample.

    A gate hands base's stream to the samples of both sides (:mod:`harness.gate.streams`), so
    both serve the very same requests; ``label`` says whose stream it is in the sample.
    ``together``: what the two sides' samples of a pair share when the gate runs them at the same
    moment on one CPU (:class:`harness.sample.pairing.Pairing`).
    """

    given = _Given(stream=stream, passes=passes, label=label, together=together)

    def sample(cell: Cell, guest: Guest, opts: RunOptions, index: int, log_dir: Path) -> Sample:
        return _replay_sample(cell, guest, opts, index, log_dir, given)

    return sample


def replay_sample(cell: Cell, guest: Guest, opts: RunOptions, index: int, log_dir: Path) -> Sample:
    """One replay of ``cell``'s own stream; never raises for a failure of the sample itself."""
    return _replay_sample(cell, guest, opts, index, log_dir, _Given())


@dataclass(frozen=True)
class _Given:
    """What a sampler was handed (see :func:`replay_sampler`): none of it for a cell's own stream."""

    stream: Stream | None = None
    passes: int = 1
    label: str = ""
    together: Pairing | None = None


def _replay_sample(
    cell: Cell, guest: Guest, opts: RunOptions, index: int, log_dir: Path, given: _Given
) -> Sample:
    stream = given.stream
    t0 = time.monotonic()
    host: dict[str, Any] = {"cache_state": cell.cache_state.value}
    sample = Sample(
        index=index,
        status="error",
        measure="replay",
        started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        host=host,
        logs={"recording": str(log_dir / "recording")},
    )
    try:
        if stream is None:
            path, stream = cached_stream(cell, guest, opts, log_dir / "recording")
            host["stream"] = {"path": str(path), "digest": stream.digest, "counts": stream.counts()}
        else:
            host["stream"] = {
                "given": given.label or "given",
                "digest": stream.digest,
                "counts": stream.counts(),
            }
        # an overlay's chain: the guest's, built once per key in the same work dir
        over = (
            None
            if cell.backing is None
            else chain.ensure(cell.backing, cell.image.size, work_dir=opts.work_dir, binaries=opts.binaries)
        )
        if over is not None:
            host["chain"] = over.as_dict()
        done = replay(
            stream,
            cell,
            replayer=dataclasses.replace(
                Replayer.of(opts.binaries, opts.work_dir / "replay", options_for(cell, opts.drive_options)),
                # the sample's deadline (a gate's head: from base's own times, within the budget)
                timeout_s=opts.workload_timeout_s,
                chain=over,
            ),
            passes=given.passes,
            together=given.together,
        )
        sample = replace(
            sample,
            status="ok",
            metrics=dict(done.figures),
            replay={k: v for k, v in done.as_dict().items() if k != "metrics"},
        )
    except HarnessError as exc:
        sample = replace(
            sample, reason=exc.message, error_type=type(exc).__name__, log_tail=exc.log_tail or None
        )
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        sample = replace(
            sample,
            reason=f"file error in the replay sample{where}: {exc.strerror or exc}",
            error_type=type(exc).__name__,
        )
    host["wall_s"] = time.monotonic() - t0
    return clean_sample(sample)

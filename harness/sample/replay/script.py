"""A stream as a ``qemu-io`` command line, the guest's drive options as qemu-io's, its output as figures.
Pure: no I/O.

**Options.**  The guest's ``-drive`` line (:func:`guest_options`, parsed from the argv the runner
gives QEMU) and the replay's qemu-io argv (:func:`replay_options`, parsed back from
:func:`qemu_io_argv`) are reduced to the same words and compared by :func:`option_mismatch`:
format, ``cache`` (``-t``), ``aio`` (``-i``), ``discard`` (``-d``), ``copy-on-read`` (``-C``),
format-node options in ``--image-opts``, an overlay's chain (each layer's driver, its file handed
over apart), and a policy's ``throttling.*`` as a ``throttle-group`` with a ``throttle`` filter
node on top.  What qemu-io cannot express (``werror``, ``rerror``) is a
mismatch, and the sample fails with it.

**Script.**  Every request becomes one qemu-io command, in the stream's order.  qemu-io services
completions only while it waits (``aio_flush``, a drain, or a synchronous command), so the
requests between two drains are in flight together; a batch ends before a request whenever the
requests issued since the last drain outnumber its recorded ``depth``.  A batch of one request is
a synchronous ``read`` or ``write`` (a throttle binds on those: QEMU lifts it while a drain runs).
A flush is a drain and ``flush``; a discard a drain and ``discard``; a write-zeroes request a drain
and a synchronous ``write -z`` (7.2's ``aio_write -z`` reports no valid time).  Writes whose data
was all zeros write a zero pattern (``detect-zeroes`` sees zeros), others a non-zero one.

**Output.**  qemu-io prints, per completed request, ``wrote|read|discard N/N bytes at offset X``
and a line ending ``(... and F ops/sec)``: the request's own time, issue to completion callback,
is ``1/F``.  A completion is reported when the drain services it, so a request's time includes
the issue of the rest of its batch (microseconds each).  ``flush`` prints nothing: flush latency
is counted, not measured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.errors import ProtocolError
from harness.sample.replay.stream import Kind, Request, Stream

#: -drive options that name files, nodes or the device, not what the block layer does
NOT_BLOCK_LAYER = ("if", "id", "file", "serial", "readonly")
#: -drive defaults that qemu-io's differ from: said explicitly on both sides
GUEST_DEFAULTS = {"discard": "ignore", "detect-zeroes": "off", "copy-on-read": "off"}
#: options of the format node, passed in --image-opts under the same name
FORMAT_NODE = (
    "detect-zeroes",
    "l2-cache-size",
    "refcount-cache-size",
    "cache-clean-interval",
    "encrypt.key-secret",
)
#: options that say what the guest's device does on an error: qemu-io has no device
NO_QEMU_IO = ("werror", "rerror")
#: an overlay's chain (harness.sample.chain): each layer's driver is the block layer's, its file
#: name (a descriptor handed to the process) is not
BACKING_DRIVER = re.compile(r"^(backing\.)+driver$")
BACKING_FILE = re.compile(r"^(backing\.)+file\.filename$")
THROTTLE_GROUP = "replay-tg"
DATA_PATTERN = "0xa5"

_DONE = re.compile(r"^(wrote|read|discard) (\d+)/(\d+) bytes at offset (\d+)$")
_STATS = re.compile(r"^\S+ \S+, (\d+) ops; .* and ([0-9.]+|inf|nan) ops/sec\)$")


def drive_option_words(value: str) -> dict[str, str]:
    """A ``-drive`` value as a dict, QEMU's ``,,`` escapes kept inside values."""
    words: dict[str, str] = {}
    parts: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        if char == "," and value[index + 1 : index + 2] == ",":
            current.append(",")  # QEMU's escape: a comma inside a value
            index += 2
            continue
        if char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    for part in parts:
        name, _, setting = part.partition("=")
        words[name] = setting
    return words


def guest_options(drive_arg: str) -> dict[str, str]:
    """What the block layer is told for the guest: its ``-drive`` value less names and device."""
    words = drive_option_words(drive_arg)
    options = {k: v for k, v in words.items() if k not in NOT_BLOCK_LAYER and not BACKING_FILE.match(k)}
    return {**GUEST_DEFAULTS, **options}


@dataclass(frozen=True)
class Plan:
    """How qemu-io opens the image: the argv before the commands."""

    argv: tuple[str, ...]


def qemu_io_argv(
    qemu_io: str,
    image: str,
    options: Mapping[str, str],
    *,
    secret_object: str | None = None,
    backing: Sequence[str] = (),
) -> list[str]:
    """qemu-io's argv (without commands) giving ``image`` the guest's ``options``; ``backing``: the
    file names of an overlay's chain from the layer under it down, each with the driver the
    options give it (``backing.driver``, ``backing.backing.driver``...).

    Raises :class:`ReplayMismatch` for an option qemu-io cannot express, or a chain whose layers
    the options do not all name.
    """
    unknown = sorted(k for k in options if k in NO_QEMU_IO or not _expressible(k))
    if unknown:
        raise ReplayMismatch(
            f"qemu-io cannot apply the guest's drive option {unknown[0]}={options[unknown[0]]}: "
            "a replay of this cell would not measure what the guest's drive does"
        )
    fmt = options["format"]
    node = [f"driver={fmt}", "file.driver=file", f"file.filename={image.replace(',', ',,')}"]
    node += [f"{k}={options[k]}" for k in FORMAT_NODE if k in options]
    layers = sum(1 for k in options if BACKING_DRIVER.match(k))
    if layers != len(backing) or any(f"{'backing.' * d}driver" not in options for d in range(1, layers + 1)):
        raise ReplayMismatch(
            f"the guest's drive has {layers} backing layers, the replay was given {len(backing)} files"
        )
    for depth, name in enumerate(backing, 1):
        prefix = "backing." * depth
        node += [
            f"{prefix}driver={options[f'{prefix}driver']}",
            f"{prefix}file.filename={name.replace(',', ',,')}",
        ]
    throttle = {k.removeprefix("throttling."): v for k, v in options.items() if k.startswith("throttling.")}
    argv = [qemu_io, "-t", options["cache"], "-i", options["aio"], "-d", options["discard"]]
    if options.get("copy-on-read") == "on":
        argv.append("-C")
    if secret_object is not None:
        argv += ["--object", secret_object]
    if throttle:
        limits = ",".join(f"x-{k}={v}" for k, v in sorted(throttle.items()))
        argv += ["--object", f"throttle-group,id={THROTTLE_GROUP},{limits}"]
        node = ["driver=throttle", f"throttle-group={THROTTLE_GROUP}", *(f"file.{w}" for w in node)]
    return [*argv, "--image-opts", ",".join(node)]


def _expressible(name: str) -> bool:
    return (
        name in ("format", "cache", "aio", "discard", "copy-on-read")
        or name in FORMAT_NODE
        or name.startswith("throttling.")
        or BACKING_DRIVER.match(name) is not None
    )


def replay_options(argv: Sequence[str]) -> dict[str, str]:
    """The drive options a qemu-io argv applies, in the guest's words (its inverse)."""
    options: dict[str, str] = {"copy-on-read": "off"}
    flags = {"-t": "cache", "-i": "aio", "-d": "discard"}
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg in flags:
            options[flags[arg]] = argv[index + 1]
            index += 2
            continue
        if arg == "-C":
            options["copy-on-read"] = "on"
        elif arg == "--object" and argv[index + 1].startswith("throttle-group,"):
            for name, value in drive_option_words(argv[index + 1]).items():
                if name.startswith("x-"):
                    options[f"throttling.{name.removeprefix('x-')}"] = value
        elif arg == "--image-opts":
            words = drive_option_words(argv[index + 1])
            if words.get("driver") == "throttle":
                words = {k.removeprefix("file."): v for k, v in words.items() if k.startswith("file.")}
            options["format"] = words.get("driver", "")
            options.update({k: words[k] for k in FORMAT_NODE if k in words})
            options.update({k: v for k, v in words.items() if BACKING_DRIVER.match(k)})
        index += 2 if arg in ("--object", "--image-opts") else 1
    options.setdefault("detect-zeroes", "off")
    return options


class ReplayMismatch(ProtocolError):
    """The replay would not apply what the guest's drive applies: the sample fails with this."""


def option_mismatch(guest: Mapping[str, str], replay: Mapping[str, str]) -> str | None:
    """Why the two option sets differ (the first differing option), or None."""
    for name in sorted(set(guest) | set(replay)):
        if guest.get(name) != replay.get(name):
            return (
                f"the replay's drive option {name}={replay.get(name, '(unset)')} differs from the guest's "
                f"{name}={guest.get(name, '(unset)')}"
            )
    return None


def graph_mismatch(guest: Sequence[tuple[str, str]], replay: Sequence[tuple[str, str]]) -> str | None:
    """Why the block graphs (driver, cache/aio flags, top down; filters left out) differ, or None."""
    mine = [node for node in replay if node[0] != "throttle"]
    if list(guest) == mine:
        return None
    show = " > ".join
    return (
        f"the replay's block graph {show(f'{d}[{f}]' for d, f in mine)} differs from the guest's "
        f"{show(f'{d}[{f}]' for d, f in guest)}"
    )


def commands(requests: Iterable[Request]) -> list[str]:
    """The qemu-io commands replaying ``requests`` (see the module's doc)."""
    out: list[str] = []
    batch: list[Request] = []

    def close() -> None:
        if len(batch) == 1:
            # alone in flight: a synchronous command, which waits without a drain (a drain
            # would lift a throttle while it runs)
            out.append(_io(batch[0], sync=True))
        elif batch:
            out.extend(_io(request, sync=False) for request in batch)
            out.append("aio_flush")
        batch.clear()

    for request in requests:
        fua = "-f " if request.fua else ""
        if request.kind is Kind.FLUSH:
            close()
            out.append("flush")
        elif request.kind is Kind.DISCARD:
            close()
            out.append(f"discard {request.offset} {request.bytes}")
        elif request.kind is Kind.WRITE_ZEROES:
            close()
            out.append(f"write -z {fua}{request.offset} {request.bytes}")
        else:
            if len(batch) > request.depth:
                close()
            batch.append(request)
    close()
    return out


def _io(request: Request, *, sync: bool) -> str:
    prefix = "" if sync else "aio_"
    if request.kind is Kind.READ:
        return f"{prefix}read {request.offset} {request.bytes}"
    fua = "-f " if request.fua else ""
    pattern = "0" if request.zero else DATA_PATTERN
    return f"{prefix}write {fua}-P {pattern} {request.offset} {request.bytes}"


def command_args(cmds: Sequence[str]) -> list[str]:
    return [arg for cmd in cmds for arg in ("-c", cmd)]


@dataclass(frozen=True)
class Completion:
    word: str  # wrote, read, discard
    offset: int
    bytes: int
    latency_s: float


def parse_output(text: str) -> list[Completion]:
    """Every completion qemu-io reported, in the order it reported them."""
    done: list[Completion] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        head = _DONE.match(line.strip())
        if head is None:
            if "failed" in line or "error" in line.lower():
                raise ProtocolError(f"qemu-io reported a failed request: {line.strip()[:200]}")
            continue
        stats = _STATS.match(lines[index + 1].strip()) if index + 1 < len(lines) else None
        if stats is None:
            raise ProtocolError(f"qemu-io's completion {line.strip()[:80]!r} has no statistics line after it")
        word, got, wanted, offset = head.groups()
        if got != wanted:
            raise ProtocolError(f"qemu-io did a short request: {line.strip()[:80]}")
        rate = float(stats.group(2))
        latency = 0.0 if rate in (float("inf"), 0.0) or rate != rate else 1.0 / rate
        done.append(Completion(word, int(offset), int(got), latency))
    return done


def counts(stream: Stream) -> dict[str, int]:
    """What qemu-io must report for ``stream``: completions per word, and flushes run."""
    by_kind = stream.counts()
    return {
        "wrote": by_kind["write"] + by_kind["write_zeroes"],
        "read": by_kind["read"],
        "discard": by_kind["discard"],
    }


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile, linear between order statistics."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def figures(done: Sequence[Completion], *, wall_s: float, flushes: int, passes: int = 1) -> dict[str, float]:
    """A replay sample's figures: wall time, per-kind counts (per pass) and latency quantiles (ms)
    over every pass's requests."""
    out: dict[str, float] = {
        "replay.wall_s": wall_s,
        "replay.io_s": sum(c.latency_s for c in done if c.word in ("wrote", "read")),
        "replay.flushes": float(flushes // passes),
    }
    for word, name in (("wrote", "write"), ("read", "read"), ("discard", "discard")):
        times = [c.latency_s for c in done if c.word == word]
        out[f"replay.{name}_ops"] = float(len(times) // passes)
        if times and name != "discard":
            for label, q in (("p10", 0.1), ("p25", 0.25), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                out[f"replay.{name}_{label}_ms"] = quantile(times, q) * 1e3
            out[f"replay.{name}_mean_ms"] = sum(times) / len(times) * 1e3
    return out

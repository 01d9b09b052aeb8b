"""Text from the guest and from logs is untrusted: cap it and make it inert before it lands anywhere.

A pull request decides what its guest prints (the recipe, the init script,
the workloads are its own) and what QEMU writes to its logs. That text ends
up in records, summaries, comparison.json and the pull request's comment, so
before it is stored it is

* capped in size (a guest can print gigabytes; a record stays small),
* stripped of control characters other than newline and tab (terminal escape
  sequences, carriage returns that hide a line, NULs), and of the Unicode
  bidirectional overrides that make text read differently from what it is.

HTML escaping is the HTML writer's job (it knows the context); this module
makes sure what reaches it is bounded, printable text.  Markdown has no such
one escape, so the one way to make text inert Markdown is here too
(:func:`inert_markdown`), for every writer of Markdown.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO, cast

#: Caps for what a sample keeps of guest and log text.
REASON_CHARS = 500
LOG_TAIL_CHARS = 3000
STRING_CHARS = 4096
ITEMS = 1024
DEPTH = 8

# C0 and C1 controls but \t and \n; DEL; the bidi embeddings, overrides and isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# ANSI/VT escape sequences (CSI ... final byte, OSC ... BEL or ST), removed whole
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
REPLACEMENT = "\ufffd"


def clean_text(text: str, *, max_chars: int = STRING_CHARS, keep: str = "head") -> str:
    """``text`` without escapes or unsafe characters, at most ``max_chars`` (plus a note of the cut).

    ``keep="tail"`` keeps the end (a log tail), ``"head"`` the start.
    """
    text = _UNSAFE.sub(REPLACEMENT, _ESCAPE.sub("", text.replace("\r\n", "\n")))
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    if keep == "tail":
        return f"[{cut} chars cut]" + text[-max_chars:]
    return text[:max_chars] + f"[{cut} chars cut]"


def clean_line(text: str, *, max_chars: int = REASON_CHARS) -> str:
    """One line of ``text`` (a reason): newlines and tabs become spaces, then :func:`clean_text`."""
    return clean_text(re.sub(r"[\r\n\t]+", " ", text), max_chars=max_chars)


def clean_json(value: Any, *, depth: int = 0) -> Any:
    """A JSON value with every string (keys too) cleaned and every container capped."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth >= DEPTH:
        return "[too deep]"
    if isinstance(value, dict):
        items = list(value.items())
        out = {clean_text(str(k), max_chars=200): clean_json(v, depth=depth + 1) for k, v in items[:ITEMS]}
        if len(items) > ITEMS:
            out["[cut]"] = f"{len(items) - ITEMS} more entries"
        return out
    if isinstance(value, list | tuple):
        out_list = [clean_json(v, depth=depth + 1) for v in value[:ITEMS]]
        if len(value) > ITEMS:
            out_list.append(f"[{len(value) - ITEMS} more items cut]")
        return out_list
    return clean_text(str(value))


# markdown that could make text active: backslash escapes, code spans, emphasis and
# strikethrough, links and images, table breaks, headings
_MD_ACTIVE = re.compile(r"([\\`*\[\]|~#!])")
# an underscore that could open or close emphasis: any not between two letters or digits
# (the one in ``write_amplification`` is no emphasis in CommonMark, and stays as it is)
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
MARKDOWN_CHARS = 2000


def inert_markdown(text: object) -> str:
    """``text`` (from a pull request, a guest or a record) as inert Markdown, for a table cell or a line.

    One line (:func:`clean_line`, at most :data:`MARKDOWN_CHARS`), no control or bidi characters;
    ``&`` ``<`` ``>`` become entities, so no HTML tag; backslashes, backticks, ``*``, ``~``, ``#``,
    brackets, ``!`` and pipes are backslash-escaped, and so is every ``_`` not between two
    letters or digits, so no code span, emphasis, strikethrough, heading, link, image or table
    break; ``://`` and ``@`` are broken with a zero-width space so no bare URL or mention comes
    alive.
    """
    line = clean_line(str(text), max_chars=MARKDOWN_CHARS)
    line = line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    line = _MD_UNDERSCORE.sub(r"\\_", _MD_ACTIVE.sub(r"\\\1", line))
    return line.replace("://", ":&#8203;//").replace("@", "@&#8203;")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def strict_json(text: str) -> Any:
    """``json.loads`` of untrusted text as a record may hold it: NaN, Infinity (Python's json
    reads them, a record must not carry them) and nesting too deep to parse are a ``ValueError``
    (``json.JSONDecodeError`` for text that is not JSON at all)."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("it nests too deeply") from None


# The GitHub runner reads a line of a step's output (lines end at \n or \r) as a workflow command
# when it starts with "::" after whitespace (`::error file=x::text`, `::add-mask::x`,
# `::stop-commands::t`), or when it holds "##[" anywhere (the older `##[error]text`); inside a
# command it decodes %0A, %0D, %25... So a line is made inert by breaking both marks: a line that
# is no command has no escapes decoded either.
_COMMAND_START = re.compile(r"^(\s*):(?=:)")


def inert_for_runner(text: str, *, at_line_start: bool = True) -> str:
    """``text`` with no line the GitHub runner reads as a workflow command.

    ``::`` at the start of a line (after any whitespace) becomes ``: :`` and
    ``##[`` anywhere becomes ``# #[``; nothing else changes. Every line break
    Python knows counts (a superset of the runner's). ``at_line_start=False``:
    ``text`` continues a line already written.
    """
    out = []
    for i, line in enumerate(text.splitlines(keepends=True)):
        if i or at_line_start:
            line = _COMMAND_START.sub(r"\1: ", line, count=1)
        out.append(line.replace("##[", "# #["))
    return "".join(out)


class InertStream:
    """A text stream that writes through :func:`inert_for_runner`, a line at a time.

    A line is passed on when it ends, or at :meth:`flush` (a progress bar
    redraws a line in place); what could still become a command mark with the
    next write (a line so far of whitespace and one ``:``, a trailing ``#`` or
    ``##``) waits for it. Everything else is the wrapped stream's.
    """

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""  # the current line's text not written yet
        self._mid_line = False  # part of the current line was written already

    def write(self, text: str) -> int:
        lines = (self._pending + text).splitlines(keepends=True)
        self._pending = ""
        if lines and lines[-1].splitlines() == [lines[-1]]:  # the last line has not ended
            self._pending = lines.pop()
        if lines:
            self.inner.write(inert_for_runner("".join(lines), at_line_start=not self._mid_line))
            self._mid_line = False
        return len(text)

    def flush(self) -> None:
        self._emit(hold=True)
        self.inner.flush()

    def close_line(self) -> None:
        """Write whatever is held (the output ends)."""
        self._emit(hold=False)
        self.inner.flush()

    def _emit(self, *, hold: bool) -> None:
        text = self._pending
        held = ""
        if hold and not self._mid_line and text.strip() in ("", ":"):
            held = text
        elif hold:
            held = text[len(text.rstrip("#")) :][-2:]
        text = text[: len(text) - len(held)]
        if text:
            self.inner.write(inert_for_runner(text, at_line_start=not self._mid_line))
            self._mid_line = True
        self._pending = held

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def inert_output() -> Iterator[None]:
    """Within it, ``sys.stdout`` and ``sys.stderr`` are :class:`InertStream` s: whatever the
    harness prints (errors naming a pull request's input, a guest's reasons, log lines) reaches
    the CI log as text, never as a workflow command."""
    saved = sys.stdout, sys.stderr
    out, err = InertStream(saved[0]), InertStream(saved[1])
    sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for stream in (out, err):
            try:
                stream.close_line()
            except (OSError, ValueError):
                pass


#: The most a sample's QEMU log files (console, report port, QEMU's stderr) may hold: a guest
#: that writes more fails its sample, and the file is cut to this size once QEMU is gone.
LOG_BYTES = 32 * 1024 * 1024


def oversized_log(paths: Iterable[Path], max_bytes: int | None = None) -> tuple[Path, int] | None:
    """The first of ``paths`` over ``max_bytes`` (default :data:`LOG_BYTES`) and its size."""
    limit = LOG_BYTES if max_bytes is None else max_bytes
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size > limit:
            return path, size
    return None


def cap_log(path: Path, max_bytes: int | None = None) -> None:
    """Cut ``path`` to its first ``max_bytes`` (default :data:`LOG_BYTES`), saying so at the end."""
    limit = LOG_BYTES if max_bytes is None else max_bytes
    try:
        size = path.stat().st_size
        if size <= limit:
            return
        with open(path, "r+b") as fh:
            fh.truncate(limit)
            fh.seek(0, 2)
            fh.write(f"\n[diskbench: cut at {limit} bytes of {size}]\n".encode())
    except OSError:
        pass


#: How deep a pull request's TOML (policy, spec, recipe) may nest tables and arrays.
TOML_DEPTH = 32


def toml_loads(text: str) -> dict[str, Any]:
    """``tomllib.loads`` of untrusted text: nesting deeper than :data:`TOML_DEPTH` (arrays, inline
    tables, dotted keys or table headers) is a ``tomllib.TOMLDecodeError`` like any bad syntax,
    never a ``RecursionError`` here or in whatever walks the tables later."""
    too_deep = f"it nests tables and arrays deeper than {TOML_DEPTH} levels"
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(too_deep) from None
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= TOML_DEPTH:
                    raise tomllib.TOMLDecodeError(too_deep)
                stack.append((child, depth + 1))
    return data

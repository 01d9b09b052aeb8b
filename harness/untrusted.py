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

import json
import re
from typing import Any

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


def clean_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample as a record stores it: every string cleaned, reason one line, log tail capped."""
    out: dict[str, Any] = clean_json(sample)
    if isinstance(sample.get("reason"), str):
        out["reason"] = clean_line(sample["reason"])
    if isinstance(sample.get("log_tail"), str):
        out["log_tail"] = clean_text(sample["log_tail"], max_chars=LOG_TAIL_CHARS, keep="tail")
    return out


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

"""Text from the guest and from logs is capped and made inert before a record keeps it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness import untrusted
from harness.record import Sample
from harness.sample.clean import clean_sample
from harness.sample.vm import MAX_EVENTS, REPORT_READ_BYTES, Machine, VMConfig
from harness.subject.binaries import QEMU
from harness.untrusted import clean_json, clean_line, clean_text

HOSTILE = (
    "ok\x1b[2J\x1b[31mred\x1b[0m\r\x1b]8;;https://evil.example\x07link\x1b]8;;\x07"
    "\x00nul\u202eevil\u2066iso\u2069\x07bell\ttab\nnext"
)


def test_escapes_controls_and_bidi_overrides_are_removed() -> None:
    text = clean_text(HOSTILE)
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text and "\r" not in text
    assert "\u202e" not in text and "\u2066" not in text
    assert "https://evil.example" not in text, "an OSC 8 hyperlink is removed whole"
    assert "red" in text and "link" in text and "bell\ttab\nnext" in text
    assert text.startswith("ok")


def test_text_is_capped_keeping_the_end_of_a_log() -> None:
    log = "boot\n" + "x" * 10_000 + "\nthe end"
    tail = clean_text(log, max_chars=100, keep="tail")
    assert tail.endswith("the end") and tail.startswith("[9913 chars cut]")
    assert len(tail) == 100 + len("[9913 chars cut]")
    assert clean_text("y" * 50, max_chars=10) == "y" * 10 + "[40 chars cut]"


def test_a_reason_is_one_line() -> None:
    assert clean_line("guest workload failed: a\nb\r\nc\td") == "guest workload failed: a b c d"
    assert len(clean_line("z" * 5000)) == untrusted.REASON_CHARS + len("[4500 chars cut]")


def test_json_from_the_guest_is_cleaned_keys_too_and_capped() -> None:
    value = {"k\x1b[1m": ["v\x00"] * 5000, "deep": [[[[[[[[[["x"]]]]]]]]]], "n": 1.5, "b": True}
    out = clean_json(value)
    assert "k" in out and "k\x1b[1m" not in out
    assert (
        len(out["k"]) == untrusted.ITEMS + 1 and out["k"][-1] == f"[{5000 - untrusted.ITEMS} more items cut]"
    )
    assert out["k"][0] == "v" + untrusted.REPLACEMENT
    assert "[too deep]" in json.dumps(out["deep"])
    assert (out["n"], out["b"]) == (1.5, True)


def test_a_sample_keeps_no_raw_guest_text() -> None:
    sample = Sample.from_json(
        {
            "status": "error",
            "reason": "guest workload failed: " + HOSTILE * 100,
            "log_tail": HOSTILE * 1000,
            "report": {"event": "report", "error": HOSTILE, "outputs": {"version\x1b": HOSTILE}},
            "metrics": {"total_s": 1.25},
        }
    )
    out = clean_sample(sample).to_json()
    dumped = json.dumps(out, ensure_ascii=False)
    for bad in ("\x1b", "\x00", "\u202e", "\r"):
        assert bad not in dumped
    assert "\n" not in out["reason"] and len(out["reason"]) <= untrusted.REASON_CHARS + 30
    assert len(out["log_tail"]) <= untrusted.LOG_TAIL_CHARS + 30
    assert out["metrics"] == {"total_s": 1.25}
    assert out["status"] == "error"


def machine(tmp_path: Path) -> Machine:
    config = VMConfig(qemu=QEMU, kernel=tmp_path / "k", initrd=tmp_path / "i", append=[], drives=[])
    vm = Machine(config, tmp_path)
    return vm


def test_a_flooding_guest_leaves_bounded_events(tmp_path: Path) -> None:
    vm = machine(tmp_path)
    vm.report_log.write_bytes(b"not json\n" * (MAX_EVENTS * 3) + b'{"event": "ready"}\n')
    while vm._report_offset < vm.report_log.stat().st_size:
        vm._read_events()
    assert len(vm.garbage()) == MAX_EVENTS


def test_a_line_without_end_is_garbage_not_a_growing_buffer(tmp_path: Path) -> None:
    vm = machine(tmp_path)
    vm.report_log.write_bytes(b"{" * (3 * REPORT_READ_BYTES))
    for _ in range(4):
        vm._read_events()
    assert len(vm._report_buf) <= REPORT_READ_BYTES
    assert vm.garbage() and all(len(line) <= 500 for line in vm.garbage())


def test_the_reports_markdown_makes_guest_text_inert() -> None:
    from harness.report.blocks import Bullets, Heading, Para
    from harness.report.markdown import to_markdown

    reason = (
        "guest workload failed: <img src=//t.example/x> [click](https://evil.example) *b* `c`|\n# H\x1b[2J"
    )
    md = to_markdown([Heading(3, "Failed samples"), Bullets((f"cell sample 0: {reason}",)), Para(reason)], {})
    assert "<img" not in md and "https://" not in md and "\x1b" not in md
    assert not re.search(r"(?<!\\)\]\(", md), "no link or image: every ] is escaped"
    assert "&lt;img src=//t.example/x&gt;" in md
    assert "\\[click\\]" in md and "\\*b\\*" in md and "\\`c\\`\\|" in md
    bullet = next(line for line in md.splitlines() if line.startswith("- "))
    assert bullet.endswith("\\# H"), "one line: the reason cannot start a heading"

"""Text from a pull request or a guest is inert markdown, one way in the comparison summary and the report."""

from __future__ import annotations

from harness.compare import Comparison, Verdict, render_markdown
from harness.compare.model import Summary
from harness.report.blocks import Para
from harness.report.markdown import to_markdown
from harness.untrusted import inert_markdown


def test_links_html_mentions_and_table_breaks_are_inert() -> None:
    text = inert_markdown("x|y [click](https://evil.example) <img src=a> @someone ![i](j)\n\x1b[31mred")
    assert "|" not in text.replace("\\|", "")
    assert "](https://" not in text and "\\[click\\]" in text
    assert "<img" not in text and "&lt;img" in text
    assert "@someone" not in text
    assert "\n" not in text and "\x1b" not in text


def test_plain_figures_read_as_they_are() -> None:
    assert (
        inert_markdown("host.write_amplification +2.6% (1.001 → 1.027)")
        == "host.write_amplification +2.6% (1.001 → 1.027)"
    )


def test_emphasis_strikethrough_and_headings_are_inert_but_snake_case_reads_as_it_is() -> None:
    assert (
        inert_markdown("# *b* _u_ ~s~ __init__ x_ write_amplification")
        == "\\# \\*b\\* \\_u\\_ \\~s\\~ \\_\\_init\\_\\_ x\\_ write_amplification"
    )


def test_the_comparison_and_the_report_escape_alike() -> None:
    reason = "*b* @someone see https://evil.example"
    inert = "\\*b\\* @&#8203;someone see https:&#8203;//evil.example"
    warned = Comparison(created_at="x", verdict=Verdict.UNCHANGED, summary=Summary(), warnings=(reason,))
    assert f"**WARNING: {inert}**" in render_markdown(warned)
    assert to_markdown([Para(reason)], {}) == inert + "\n"

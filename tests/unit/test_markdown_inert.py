"""The comparison summary renders text from a pull request or a guest inert."""

from __future__ import annotations

from harness.compare.markdown import _esc


def test_links_html_mentions_and_table_breaks_are_inert() -> None:
    text = _esc("x|y [click](https://evil.example) <img src=a> @someone ![i](j)\n\x1b[31mred")
    assert "|" not in text.replace("\\|", "")
    assert "](https://" not in text and "\\[click\\]" in text
    assert "<img" not in text and "&lt;img" in text
    assert "@someone" not in text
    assert "\n" not in text and "\x1b" not in text


def test_plain_figures_read_as_they_are() -> None:
    assert (
        _esc("host.write_amplification +2.6% (1.001 → 1.027)")
        == "host.write_amplification +2.6% (1.001 → 1.027)"
    )

"""The README and docs/ link to each other: every link to a Markdown file finds the file, and
every anchor a heading of it; the README keeps its two commands first and its screenshots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_to_a_page_and_its_heading_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        if path and not path.endswith(".md"):
            continue
        linked = (page.parent / path).resolve() if path else page
        assert linked.is_file(), f"{page.name}: {target}: no such file"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target}: no such heading in {linked.name}"


def test_the_readme_starts_with_the_two_commands_and_shows_what_a_user_gets() -> None:
    readme = (ROOT / "README.md").read_text()
    block = "```sh\nbash scripts/run-default.sh   #"
    assert readme.index(block) < readme.index("\n## ")
    assert "bash scripts/test.sh          #" in readme.split("\n## ")[0]
    assert "## Contents" in readme
    for image in ("docs/images/report.png", "docs/images/comment.png"):
        assert f"]({image})" in readme
    assert (ROOT / "docs" / "images" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""The README and the pages of docs/ hold together: every relative link and image in README.md and docs/*.md names
a file that exists (and a heading of it, when the link names one), and the README stays short enough to read
through: at most 200 lines, the rest in docs/."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where `[a](b)` is code, not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken(page: Path) -> list[str]:
    """The relative links of `page` that name no file, or no heading of the file they name."""
    problems = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        if not file.exists():
            problems.append(f"{target}: no file {file}")
        elif fragment and file.suffix == ".md" and unquote(fragment) not in anchors(file):
            problems.append(f"{target}: no heading #{fragment} in {file.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_and_image_names_an_existing_file(page: Path) -> None:
    assert broken(page) == []


def test_the_readme_links_every_page_of_docs() -> None:
    named = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    assert [p.name for p in PAGES[1:] if p.resolve() not in named] == []


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move the details into docs/"


def test_the_check_finds_a_broken_link_an_image_and_an_anchor(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading) [web](https://example.org/x.md) `[code](gone.md)`\n"
        "```\n[fenced](gone.md)\n```\n"
        "[gone](gone.md) ![img](shots/gone.png) [anchor](there.md#nowhere)\n",
        encoding="utf-8",
    )
    assert [p.split(":")[0] for p in broken(page)] == ["gone.md", "shots/gone.png", "there.md#nowhere"]

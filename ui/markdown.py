"""The one rule for text on the page: a string that comes from a person, a link, a file or a tokenizer is shown as
the characters it holds, never read as Markdown.

Streamlit reads Markdown in far more places than st.markdown: captions, st.info and its kin, titles, tab and expander
labels, every widget's label and help. A page puts such a string into any of them through `literal`;
tests/test_text_on_page.py reads every such call and fails on one that skips it.
"""

from __future__ import annotations

import re

# Markdown (GitHub's and Streamlit's) syntax anywhere in a line: links and images ([…](…)), autolinks and HTML (<…>),
# emphasis, code, strikethrough, math, entities, tables; `:` starts Streamlit's colours (:red[…]), emoji (:smile:)
# and directives.
_ANYWHERE = set("\\`*_~[]<>$&|:")
# Where a backslash before one more character is needed: headings, quotes, lists, rules and underlines where a
# line begins ("# h", "> q", "- l", "=", "12. n": the number's delimiter escaped), and the `/` of Streamlit's icons
# (":material/…:", replaced before the text is parsed).
_IN_PLACE = re.compile(r"^(\s*|\s*\d+)([#>+=-]|(?<=\d)[.)])|(?<=:material)(/)", re.MULTILINE | re.I)
# GitHub's bare links (http://…, www.…, a@b.c) are found in the parsed text, where escapes are already gone: an
# invisible WORD JOINER inside "http://", "www." and before "@" keeps them from being links.
_BARE_LINK = re.compile(r"(?<=http)(?=:)|(?<=https)(?=:)|(?<=www)(?=\.)|(?=@)", re.I)
JOINER = "\u2060"


def literal(text: object) -> str:
    """`text` (or `str(text)`) as Streamlit's Markdown shows it, letter for letter: a backslash before each character
    Markdown would read as syntax (CommonMark shows a backslash-escaped punctuation character as itself). So a
    token such as `![x](http://host/)` from a shared link or file is shown, never fetched as an image, and a file
    name never links, styles or colours the text around it.

    A bare link (http://…, www.…, a@b.c) keeps an invisible word joiner (U+2060) inside it, so it is not made a
    link. Streamlit still turns a spaced " -> " into an arrow and `:streamlit:` into its logo: those act on the
    parsed text, where no escape reaches, and neither fetches anything from elsewhere."""
    joined = _BARE_LINK.sub(JOINER, str(text))
    escaped = "".join(f"\\{ch}" if ch in _ANYWHERE else ch for ch in joined)
    return _IN_PLACE.sub(_escape_in_place, escaped)


def _escape_in_place(match: re.Match[str]) -> str:
    """A line's leading spaces or number kept, then a backslash before the syntax character `_IN_PLACE` found."""
    lead, mark, slash = match.groups()
    return f"{lead or ''}\\{mark or slash}"

"""The one rule for text on the page: a string that comes from a person, a link, a file or a tokenizer is shown as
the characters it holds, never read as Markdown.

Streamlit reads Markdown in far more places than st.markdown: captions, st.info and its kin, titles, tab and expander
labels, every widget's label and help. A page puts such a string into any of them through `literal`;
tests/test_text_on_page.py reads every such call and fails on one that skips it.
"""

from __future__ import annotations

import re

# Markdown (GitHub's and Streamlit's) syntax anywhere in a line: links and images ([…](…)), autolinks and HTML (<…>),
# emphasis, code, strikethrough, math, entities, tables; `:` starts Streamlit's colours (:red[…]), emoji (:smile:),
# directives and the http:// of a bare link, `@` a bare e-mail address.
_ANYWHERE = set("\\`*_~[]<>$&|:@")
# Where a backslash before one more character is needed: headings, quotes, lists, rules and underlines where a
# line begins ("# h", "> q", "- l", "=", "12. n": the number's delimiter escaped), the `/` of Streamlit's icons
# (":material/…:", replaced before the text is parsed) and the `.` of a bare "www." link.
_IN_PLACE = re.compile(r"^(\s*|\s*\d+)([#>+=-]|(?<=\d)[.)])|(?<=:material)(/)|(?<=\bwww)(\.)", re.MULTILINE | re.I)


def literal(text: object) -> str:
    """`text` (or `str(text)`) as Streamlit's Markdown shows it, letter for letter: a backslash before each character
    Markdown would read as syntax (CommonMark shows a backslash-escaped punctuation character as itself). So a
    token such as `![x](http://host/)` from a shared link or file is shown, never fetched as an image, and a file
    name never links, styles or colours the text around it.

    Streamlit still turns a spaced " -> " into an arrow and `:streamlit:` into its logo: those act on the parsed
    text, where no escape reaches, and neither fetches anything from elsewhere."""
    escaped = "".join(f"\\{ch}" if ch in _ANYWHERE else ch for ch in str(text))
    return _IN_PLACE.sub(_escape_in_place, escaped)


def _escape_in_place(match: re.Match[str]) -> str:
    """A line's leading spaces or number kept, then a backslash before the syntax character `_IN_PLACE` found."""
    lead, mark, slash, dot = match.groups()
    return f"{lead or ''}\\{mark or slash or dot}"

"""What a reader sees of a Markdown message the app writes: its backslash escapes and invisible word joiners removed
(ui.markdown.literal puts them into text that comes from outside, so a test reads the message as the page shows
it)."""

from __future__ import annotations

import re

from ui.markdown import JOINER


def shown_text(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown).replace(JOINER, "")

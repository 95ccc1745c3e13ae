"""What a reader sees of a Markdown message the app writes: its backslash escapes removed (ui.markdown.literal
escapes text that comes from files, so a test reads the message as the page shows it)."""

from __future__ import annotations

import re


def shown_text(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)

"""How long a text's link is: the characters of `text=` in the address for English texts of a few lengths (the
course's own pages, joined) and for random letters, as ui.state.pack_text writes them (kept as is up to 1,000
characters, compressed above). Prints one line per text; no server: the packing is the whole of it.

    python bench/url_length.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ui.state import URL_LONGEST, pack_text  # noqa: E402


def main() -> None:
    english = " ".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "course" / "steps").glob("*.md")))
    noise = "".join(random.Random(0).choices("abcdefghijklmnopqrstuvwxyz ", k=15_000))
    for name, text in [(f"English, {n:,} characters", english[:n]) for n in (1_000, 2_000, 5_000, 10_000)] + [
        ("random letters, 15,000 characters", noise)
    ]:
        packed = pack_text(text)
        kept = "kept in the address" if len(packed) <= URL_LONGEST else f"over {URL_LONGEST:,}: left out, and said"
        print(f"{name}: {len(packed):,} characters of URL ({kept})")


if __name__ == "__main__":
    main()

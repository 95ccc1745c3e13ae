"""Write docs/api.md, the reference of `import atlas`: every name of atlas.__all__ with its signature and its
docstring, in the order __all__ lists them. Generated, never edited by hand: tests/test_api_reference.py fails when
the file and the docstrings differ.

    python scripts/api_reference.py           # writes docs/api.md
    python scripts/api_reference.py --check   # exit 1 if docs/api.md is not what the docstrings say
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET = ROOT / "docs" / "api.md"
HEADER = """# `import atlas`: the reference

Generated from the docstrings by `python scripts/api_reference.py` (tests/test_api_reference.py keeps it current).
Layers and heads are counted from 1, as the app's pickers and the figures' labels count them; token positions in
what a function returns are counted from 1 where a person reads them (tables, labels) and 0-based where they index
an array (an `Analysis`'s sub-layers). [In a notebook](notebook.md) shows them at work; `examples/attention_atlas.ipynb`
calls every one.
"""


def reference() -> str:
    import atlas

    parts = [HEADER]
    for name in atlas.__all__:
        obj = getattr(atlas, name)
        doc = inspect.getdoc(obj) or "(no docstring)"
        if inspect.isclass(obj):
            title = f"## `atlas.{name}` (class)"
        else:
            signature = str(inspect.signature(obj)).replace("'", "")
            title = f"## `atlas.{name}{signature}`"
        parts.append(f"{title}\n\n{doc}\n")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/api.md instead of writing it")
    args = parser.parse_args()
    text = reference()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run python scripts/api_reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(text):,} characters)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

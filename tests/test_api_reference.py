"""docs/api.md is what the docstrings of `import atlas` say: regenerated here and compared, so a changed function
fails until `python scripts/api_reference.py` is run again; every name of atlas.__all__ has its section."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import atlas

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "scripts" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_current_and_covers_every_name() -> None:
    text = load_script().reference()
    assert (ROOT / "docs" / "api.md").read_text(encoding="utf-8") == text, "run: python scripts/api_reference.py"
    for name in atlas.__all__:
        assert f"## `atlas.{name}" in text
        section = text.split(f"## `atlas.{name}", 1)[1].split("\n## ", 1)[0]
        assert "(no docstring)" not in section, name

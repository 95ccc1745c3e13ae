"""docs/api.md is what the docstrings of `import atlas` say: regenerated here and compared, so a changed function
fails until `python scripts/api_reference.py` is run again; every name of atlas.__all__ has its section."""

from __future__ import annotations

import ast
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


def test_atlas_all_is_the_one_list_of_the_public_names() -> None:
    """atlas.__all__ is the list; the type checkers' imports beside it (TYPE_CHECKING) and the package face
    atlas/api/__init__.py, which hands each name on from the module of its topic, give exactly its names."""
    tree = ast.parse((ROOT / "atlas" / "__init__.py").read_text(encoding="utf-8"))
    typed = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for child in node.body
        if isinstance(child, ast.ImportFrom)
        for alias in child.names
    }
    face = ast.parse((ROOT / "atlas" / "api" / "__init__.py").read_text(encoding="utf-8"))
    handed_on = {
        alias.asname or alias.name for node in face.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert len(atlas.__all__) == len(set(atlas.__all__))
    assert typed == set(atlas.__all__), "atlas/__init__.py: its TYPE_CHECKING import and __all__ differ"
    assert handed_on == set(atlas.__all__), "atlas/api/__init__.py hands on other names than atlas.__all__ lists"
    assert all(getattr(atlas, name) is getattr(atlas.api, name) for name in atlas.__all__)

"""Streamlit's magic is off (.streamlit/config.toml `runner.magicEnabled`): the pages compile without its
`ast.parse`, whose recursion count CPython 3.11 shares between threads, and no script of ours loses anything by it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [ROOT / "app.py", *sorted((ROOT / "views").rglob("*.py"))]
UNWRITTEN = ast.Call | ast.Yield | ast.YieldFrom | ast.Await  # bare expressions magic leaves alone


def written_by_magic(path: Path) -> list[int]:
    """Lines of `path` that magic would pass to st.write: a bare expression that is not a call, a yield, an await
    or a docstring (streamlit/runtime/scriptrunner/magic.py, its defaults)."""
    lines = []
    for parent in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        body = getattr(parent, "body", None)
        for i, node in enumerate(body if isinstance(body, list) else []):
            if not isinstance(node, ast.Expr) or isinstance(node.value, UNWRITTEN):
                continue
            docstring = i == 0 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            if not (docstring and isinstance(parent, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef)):
                lines.append(node.lineno)
    return lines


def test_no_script_has_an_expression_magic_would_write() -> None:
    assert len(SCRIPTS) > 10
    assert {str(p.relative_to(ROOT)): lines for p in SCRIPTS if (lines := written_by_magic(p))} == {}


def test_a_bare_expression_is_what_the_check_finds(tmp_path: Path) -> None:
    script = tmp_path / "page.py"
    script.write_text('"""A docstring."""\nimport streamlit as st\nst.title("x")\nvalue = 3\nvalue\n"a string"\n')
    assert written_by_magic(script) == [5, 6]


def test_the_app_runs_without_magic(app, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.runtime.scriptrunner import magic

    def refused(code: str, script_path: str) -> object:
        raise AssertionError(f"magic parsed {script_path}")

    monkeypatch.setattr(magic, "add_magic", refused)
    at = app()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title

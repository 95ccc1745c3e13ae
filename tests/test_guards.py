"""Every widget callback (on_change=, on_click=) runs under the pages' one guard, errors.safe: a callback runs before
the page's body and outside its guard, so an unguarded one shows a traceback with server paths."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = [*sorted((ROOT / "views").rglob("*.py")), *sorted((ROOT / "ui").rglob("*.py")), ROOT / "app.py"]


def guarded(func: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) in ("errors.safe", "safe") for d in func.decorator_list)


def test_every_widget_callback_is_guarded() -> None:
    functions: dict[tuple[str, str], ast.FunctionDef] = {}  # (file, name): a name resolves in its own file first
    callbacks: list[tuple[str, str]] = []
    for path in FILES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {  # a name taken from another of our modules (`from ui.class_session import start_class`)
            alias.asname or alias.name: f"{node.module.rpartition('.')[2]}.py"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("ui", "views")
            for alias in node.names
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                functions[(path.name, node.name)] = node
            elif isinstance(node, ast.keyword) and node.arg in ("on_change", "on_click"):
                if not (isinstance(node.value, ast.Constant) and node.value.value in ("ignore", "rerun")):
                    target = ast.unparse(node.value)
                    module, _, name = target.rpartition(".")
                    callbacks.append((f"{module}.py" if module else imported.get(name, path.name), name))
    assert len(callbacks) >= 12, callbacks
    missing = [c for c in callbacks if c not in functions]
    unguarded = [c for c in callbacks if c in functions and not guarded(functions[c])]
    assert not missing and not unguarded, (missing, unguarded)

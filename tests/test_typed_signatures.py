"""Every public signature is typed, so that a reader sees what goes in and what comes out without reading the body:
read from each package's syntax tree, so that a function added without annotations fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ui", "views", "viz", "analysis", "inference", "model", "atlas", "training", "course", "live")


def untyped(source: str) -> list[str]:
    """`name:line: what is missing` for each public function of `source` (module level, or a method of a public
    class, dunders included) with a parameter or its return unannotated; `self` and `cls` need none. A function
    nested in another is the outer one's detail, not a signature anyone calls."""
    found = []

    def visit(body: list[ast.stmt], owner: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{owner}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                dunder = node.name.startswith("__") and node.name.endswith("__")
                if node.name.startswith("_") and not dunder:
                    continue
                args = node.args
                params = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
                if owner and params and params[0].arg in ("self", "cls"):
                    params = params[1:]
                missing = [p.arg for p in params if p.annotation is None]
                missing += ["return"] if node.returns is None else []
                if missing:
                    found.append(f"{owner}{node.name}:{node.lineno}: {', '.join(missing)}")

    visit(ast.parse(source).body, "")
    return found


def test_the_check_finds_an_unannotated_parameter_and_return() -> None:
    source = """
def public(a, b: int, *rest, **more) -> None: ...
def typed(a: int) -> int: ...
def _private(a): ...
def outer() -> None:
    def inner(a): ...
class Thing:
    def method(self, a) -> None: ...
    @classmethod
    def make(cls) -> "Thing": ...
    async def __call__(self, scope: dict, receive): ...
    def _helper(self, a): ...
class _Hidden:
    def method(self, a): ...
"""
    assert untyped(source) == [
        "public:2: a, rest, more",
        "Thing.method:8: a",
        "Thing.__call__:11: receive, return",
    ]


def test_every_public_signature_in_the_packages_is_typed() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {line}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in untyped(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "annotate these parameters and returns:\n" + "\n".join(found)

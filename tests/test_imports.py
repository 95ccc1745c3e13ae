"""The project's import graph has no cycle, counting imports written inside functions too (they hide a cycle from
Python but not from a reader), and the house's layers hold: model/ imports neither streamlit nor plotly, viz/
neither streamlit nor torch, course/ (text) nothing that computes or draws."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "analysis",
    "app",
    "atlas",
    "bench",
    "live",
    "course",
    "inference",
    "model",
    "scripts",
    "training",
    "ui",
    "views",
    "viz",
)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name → file, for every Python file of the project's own packages (tests excluded)."""
    modules = {}
    files = [p for name in PACKAGES for p in ([root / f"{name}.py"] if (root / f"{name}.py").is_file() else [])]
    files += [p for name in PACKAGES if (root / name).is_dir() for p in (root / name).rglob("*.py")]
    for path in sorted(files):
        rel = path.relative_to(root)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(path: Path, module: str, is_package: bool) -> set[str]:
    """Every module name an `import` or `from … import` anywhere in the file names (relative imports resolved);
    `from a import b` names both `a` and `a.b`, since b may be a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the project modules it imports (a name resolves to the longest project module it starts with)."""
    modules = project_modules(root)
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(path, module, path.name == "__init__.py"):
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in modules:
                    if candidate != module:
                        targets.add(candidate)
                    break
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_project_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "__init__.py").write_text("")
    (tmp_path / "model" / "a.py").write_text("from model.b import g\n")
    (tmp_path / "model" / "b.py").write_text("def g():\n    from . import a\n")
    (tmp_path / "model" / "c.py").write_text("import model.a\n")
    assert cycles(import_graph(tmp_path)) == [["model.a", "model.b"]]


LAYERS = [
    ("model", ("streamlit", "plotly")),
    ("viz", ("streamlit", "torch")),
    ("course", ("streamlit", "plotly", "torch", "inference", "analysis", "ui", "views", "viz")),  # text, for the pages
    ("inference", ("analysis", "streamlit", "plotly", "viz", "ui", "views", "atlas", "training")),  # runs, never reads
    ("analysis", ("streamlit", "plotly", "viz", "ui", "views", "atlas", "training")),
    # A live class's rules, store and push: plain Python on the ground floor, which the pages draw.
    ("live", ("streamlit", "plotly", "torch", "model", "inference", "analysis", "viz", "ui", "views", "atlas")),
]


@pytest.mark.parametrize(("layer", "forbidden"), LAYERS)
def test_a_layer_does_not_import_what_sits_above_it(layer: str, forbidden: tuple[str, ...]) -> None:
    offenders = []
    for module, path in project_modules().items():
        if module.split(".")[0] != layer:
            continue
        names = imported_names(path, module, path.name == "__init__.py")
        offenders += [f"{module} imports {n}" for n in sorted(names) if n.split(".")[0] in forbidden]
    assert offenders == []

"""Where the house reaches into Streamlit's private API (its modules other than `streamlit`, `streamlit.components.v1`
and `streamlit.testing.v1`, and `_`-prefixed attributes): only through ui/streamlit_private.py, its one adapter
(tests/test_class_rerun.py checks that the calls a class makes there are in the pinned Streamlit), and `atlas app`
starting Streamlit's server as its own command line does (ui/serve.py), so a Streamlit upgrade has one file to read.
bench/ is left out: it speaks Streamlit's websocket protocol as a browser does (its protobufs), a client of the app,
not part of it. viz/ reads Plotly's own `_` attributes (a figure's layout and data, viz.style.frozen), not
Streamlit's."""

from __future__ import annotations

import ast
from pathlib import Path

from test_imports import ROOT, project_modules

PUBLIC = {"streamlit", "streamlit.components.v1", "streamlit.testing.v1"}
ADAPTER = "ui/streamlit_private.py"
# The class: its rules, store and push (live/), the page's part in it and the routes it serves (ui/).
CLASS_FILES = ("live/", "ui/class_", "ui/device_cookie.py")
PRIVATE = {
    ADAPTER: "the run's context, a live class's reruns of other sessions' pages and its routes, the server's guards",
    "ui/serve.py": "`atlas app` starts Streamlit's server as its own command line does (streamlit.web)",
}
# The only files that may read a `_` attribute: the adapter (Streamlit's), viz/style.py (Plotly's figures).
UNDERSCORE = {ADAPTER, "viz/style.py"}


def private_reach(path: Path) -> list[str]:
    """What file `path` touches of Streamlit's private API: each private module it imports, each name it imports
    from one, and each `_`-prefixed attribute it reads of anything but `self` or `cls`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("streamlit.") and a.name not in PUBLIC]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlit"):
            if node.module not in PUBLIC:
                found += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
                found.append(f"._{node.attr[1:]} (line {node.lineno})")
    return found


def app_files() -> dict[str, Path]:
    paths = {p.relative_to(ROOT).as_posix(): p for p in project_modules().values()}
    return {rel: path for rel, path in paths.items() if not rel.startswith(("bench/", "scripts/"))}


def imports_private(path: Path) -> bool:
    return any(not reach.startswith("._") for reach in private_reach(path))


def test_a_live_class_reaches_streamlits_private_api_through_its_one_adapter_alone() -> None:
    touched = {
        rel: reach
        for rel, path in app_files().items()
        if rel.startswith(CLASS_FILES) and rel != ADAPTER and (reach := private_reach(path))
    }
    assert touched == {}, f"only {ADAPTER} may touch Streamlit's private API for a class: {touched}"
    assert imports_private(ROOT / ADAPTER)  # the adapter is where the reach went


def test_the_app_imports_streamlits_private_modules_only_where_it_says_why() -> None:
    importing = {rel for rel, path in app_files().items() if imports_private(path)}
    assert importing == set(PRIVATE), (
        f"new: {sorted(importing - set(PRIVATE))}; gone (take them off PRIVATE): {sorted(set(PRIVATE) - importing)}"
    )


def test_no_file_but_the_adapter_reads_a_private_attribute() -> None:
    reads = {rel: [r for r in private_reach(path) if r.startswith("._")] for rel, path in app_files().items()}
    reading = {rel: found for rel, found in reads.items() if found and rel not in UNDERSCORE}
    assert reading == {}, f"only {ADAPTER} reads Streamlit's `_` attributes: {reading}"


def test_the_reach_finder_finds_a_private_import_a_name_and_an_attribute(tmp_path: Path) -> None:
    page = tmp_path / "page.py"
    page.write_text(
        "import streamlit as st\nimport streamlit.components.v1 as components\n"
        "from streamlit.runtime import Runtime\ndef f(session):\n    return session._scriptrunner, self._ok\n"
    )
    assert private_reach(page) == ["streamlit.runtime.Runtime", "._scriptrunner (line 5)"]

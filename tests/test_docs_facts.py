"""What the docs state of the repository is true of it: every file docs/architecture.md names in a folder's entry
is in that folder (or where its path says), every repository path any page names exists, the checkpoints the README
says ship are the ones in checkpoints/, the paper's model is as short as said, and docs/testing.md's figures for the
settle wait and the workers are the code's own."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser_support import QUIET_MS

from inference.catalog import list_checkpoints

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
FILE_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)*\.(py|sh|md|json|toml|txt|yaml|cfg|ini)$|^[\w.-]+(/[\w.-]+)*/$")
NOT_SEARCHED = {".venv", ".git", "__pycache__", "node_modules", ".pytest_cache", ".ruff_cache"}
# Top-level folders that hold what a person makes (checkpoints of their own), not the repository's files.
NOT_NAMED_FILES = {"checkpoints"}
NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen".split()
)


def repository_paths() -> list[str]:
    """Every file and folder of the working tree, relative to its root (folders end in /)."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if s not in NOT_SEARCHED]
        here = Path(folder).relative_to(ROOT)
        found += [(here / f).as_posix() for f in files]
        found += [(here / s).as_posix() + "/" for s in subfolders]
    return found


def prose(page: Path) -> str:
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def layout_entries() -> list[tuple[list[str], list[str]]]:
    """docs/architecture.md's Layout: each entry's folders (the names before its dash) and the file and folder
    names it mentions."""
    section = prose(ROOT / "docs" / "architecture.md").split("## Layout", 1)[1].split("\n## ", 1)[0]
    entries = []
    for entry in re.split(r"\n- ", section)[1:]:
        head, _, body = entry.partition(" — ")
        folders = [name for name in SPAN.findall(head) if name.endswith("/")]
        named = [name for name in SPAN.findall(body) if FILE_NAME.match(name)]
        entries.append((folders, named))
    return entries


def found_in(name: str, folders: list[str], paths: list[str]) -> bool:
    """Whether `name` is a path of the repository, or sits (at any depth) in one of `folders`."""
    if name in paths:
        return True
    return any(p.startswith(folder) and p.endswith("/" + name) for folder in folders for p in paths)


def test_every_file_the_layout_names_is_in_its_folder() -> None:
    paths = repository_paths()
    entries = layout_entries()
    assert sum(len(named) for _, named in entries) > 50, "the layout's names were not read"
    missing = [
        f"{name} (in {', '.join(folders) or 'the root'})"
        for folders, named in entries
        for name in named
        if not found_in(name, folders or [""], paths) and not found_in(name, [""], paths)
    ]
    assert missing == [], f"docs/architecture.md names what is not there: {missing}"


def test_the_guard_of_the_layout_names_misses_a_module_that_became_a_package() -> None:
    paths = ["analysis/imported/", "analysis/imported/arrays.py", "analysis/export.py", "tests/test_imported.py"]
    assert found_in("export.py", ["analysis/"], paths)
    assert not found_in("imported.py", ["analysis/"], paths) and not found_in("imported.py", [""], paths)
    assert found_in("imported/", ["analysis/"], paths)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    tops = {p.split("/")[0] for p in repository_paths() if p.endswith("/") and p.count("/") == 1} - NOT_NAMED_FILES
    named = [
        name
        for name in SPAN.findall(prose(page))
        if FILE_NAME.match(name) and "/" in name.rstrip("/") and name.split("/")[0] in tops
    ]
    assert [name for name in named if not (ROOT / name).exists()] == []


@pytest.mark.parametrize("page", ["README.md", "docs/install.md"])
def test_the_checkpoints_said_to_ship_are_those_in_the_folder(page: str) -> None:
    shipped = [e.name for e in list_checkpoints(ROOT / "checkpoints", packages=False)]
    said = re.findall(r"(\w+) checkpoints shipped in `checkpoints/`", prose(ROOT / page))
    assert said, f"{page} no longer says how many checkpoints ship: take it out of this test"
    for count in said:
        number = NUMBERS.index(count.lower()) if count.lower() in NUMBERS else int(count.replace(",", ""))
        assert number == len(shipped), (
            f"{page} says {count} checkpoints ship; checkpoints/ holds {len(shipped)}: {shipped}"
        )


def test_the_papers_model_is_as_short_as_the_architecture_says() -> None:
    said = re.search(
        r"`transformer.py` is the paper's model alone \(under ([\d,]+) lines", prose(ROOT / "docs" / "architecture.md")
    )
    assert said, "docs/architecture.md no longer bounds model/transformer.py's length: take it out of this test"
    lines = len((ROOT / "model" / "transformer.py").read_text(encoding="utf-8").splitlines())
    assert lines < int(said.group(1).replace(",", "")), f"model/transformer.py has {lines} lines"


def test_testing_md_states_the_settle_wait_and_the_workers_the_code_uses() -> None:
    text = prose(ROOT / "docs" / "testing.md")
    assert f"for {QUIET_MS} ms" in text, f"docs/testing.md: a page settles when it holds still {QUIET_MS} ms"
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    workers = re.search(r"ATLAS_TEST_WORKERS:-(\d+)", script + conftest)
    assert workers, "scripts/test.sh no longer sets its workers by ATLAS_TEST_WORKERS"
    assert f"runs on {NUMBERS[int(workers.group(1))]} pytest-xdist workers" in text

"""The wheel's one name: every top-level package of the repository installs under `atlas._house`, beside `atlas`.

The repository is a layout for readers: top-level folders (model/, viz/, ui/, views/, training/, …) that import each
other by name (`from model.transformer import EncoderDecoder`). Installed side by side, those names would fill a
user's site-packages with `model`, `ui` and `training`, and a notebook folder holding its own `model.py` would shadow
ours or ours it. So the wheel's build (build_py below) moves every file of those packages, app.py and the data
beside them (checkpoints/, corpora/, .streamlit/) to `atlas/_house/` keeping their layout, so paths found from
`__file__` still meet, and rewrites our own absolute import statements, and only those, to the prefixed name
(`from atlas._house.model.transformer import EncoderDecoder`). `atlas` stays where it is: the public face.

The repository and its editable install (`pip install -e .`) are left as they are: setuptools builds nothing there.
Everything else is pyproject.toml's; this file only adds the build step.
"""

from __future__ import annotations

import ast
import io
import os
import shutil
import tokenize
from pathlib import Path

from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
FACE = "atlas"  # the one name installed, and the public face
HOUSE = f"{FACE}._house"  # where the repository's other top-level packages go inside it
# Data outside any package that the installed app reads from beside app.py, each file of the folders inside it (a
# folder's own scripts, like corpora/make.py, stay in the repository).
DATA_FOLDERS = ("corpora",)
HOUSE_INIT = '"""The repository\'s top-level packages, installed under one name (setup.py says why)."""\n'


class ImportRewriteError(ValueError):
    """An import statement the rewrite cannot keep equivalent."""


def rewrite_imports(source: str, names: set[str], prefix: str = HOUSE, filename: str = "<source>") -> str:
    """`source` with each absolute import statement of a top-level name in `names` prefixed by `prefix`; strings,
    comments and relative imports untouched.

    `from model.x import y` → `from atlas._house.model.x import y`; `import model.x as m` → `import
    atlas._house.model.x as m`; `import model` → `import atlas._house.model as model`. `import model.x` is refused:
    it binds `model`, which no prefixed statement of one line binds the same way."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)

    def position(lineno: int, byte_col: int) -> tuple[int, int]:  # ast counts UTF-8 bytes, tokenize characters
        return lineno, len(lines[lineno - 1].encode()[:byte_col].decode())

    after_from: set[tuple[int, int]] = set()  # a `from` keyword whose next name is ours
    at_alias: dict[tuple[int, int], ast.alias] = {}  # the first name of an `import` alias of ours
    ours = 0  # aliases of ours, each one edit
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in names:
            after_from.add(position(node.lineno, node.col_offset))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in names:
                    continue
                if alias.asname is None and "." in alias.name:
                    raise ImportRewriteError(
                        f"{filename}:{node.lineno}: `import {alias.name}` binds `{alias.name.split('.')[0]}`; "
                        f"write `from {alias.name.rpartition('.')[0]} import {alias.name.rpartition('.')[2]}` or "
                        f"`import {alias.name} as NAME`"
                    )
                at_alias[position(alias.lineno, alias.col_offset)] = alias
                ours += 1
    edits: list[tuple[int, int, str, str]] = []  # (line, column, old text, new text)
    pending = False
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.NAME:
            continue
        if pending:
            edits.append((*tok.start, tok.string, f"{prefix}.{tok.string}"))
            pending = False
        elif tok.start in after_from and tok.string == "from":
            pending = True
        elif tok.start in at_alias:
            alias = at_alias.pop(tok.start)
            new = f"{prefix}.{tok.string}" + (f" as {alias.name}" if alias.asname is None else "")
            edits.append((*tok.start, tok.string, new))
    if pending or at_alias or len(edits) != len(after_from) + ours:
        raise ImportRewriteError(f"{filename}: an import statement of ours was not found among its tokens")
    for lineno, col, old, new in sorted(edits, reverse=True):
        line = lines[lineno - 1]
        assert line[col : col + len(old)] == old, (filename, lineno, col, old)
        lines[lineno - 1] = line[:col] + new + line[col + len(old) :]
    return "".join(lines)


class OneNameBuildPy(build_py):
    """build_py that writes the repository's packages under `atlas/_house/` (the module's docstring says why)."""

    def house_names(self) -> set[str]:
        """The repository's top-level names that go inside the one name: every listed package's and module's."""
        tops = {p.split(".")[0] for p in self.packages or ()} | set(self.py_modules or ())
        return tops - {FACE}

    def final_path(self, built: str) -> str:
        """Where a file build_py would write at `built` (inside build_lib) goes in the one-name layout."""
        rel = Path(os.path.relpath(built, self.build_lib))
        if rel.parts[0] == FACE:
            return built
        return os.path.join(self.build_lib, *HOUSE.split("."), *rel.parts)

    def data_folder_files(self) -> dict[str, str]:
        """(where it goes in build_lib) → (its source) for each file inside DATA_FOLDERS' subfolders."""
        found = {}
        for folder in DATA_FOLDERS:
            for src in sorted((ROOT / folder).glob("*/**/*")):
                if src.is_file() and "__pycache__" not in src.parts:
                    rel = src.relative_to(ROOT)
                    found[os.path.join(self.build_lib, *HOUSE.split("."), *rel.parts)] = str(src)
        return found

    def one_name_mapping(self) -> dict[str, str]:
        mapping = {self.final_path(dest): src for dest, src in super().get_output_mapping().items()}
        mapping |= self.data_folder_files()
        house_init = os.path.join(self.build_lib, *HOUSE.split("."), "__init__.py")
        mapping[house_init] = ""  # written from HOUSE_INIT
        return dict(sorted(mapping.items()))

    def run(self) -> None:
        if self.editable_mode:  # the editable install imports the repository as it is
            super().run()
            return
        house = os.path.join(self.build_lib, *HOUSE.split("."))
        if os.path.isdir(house):  # a file removed from the repository leaves no stale copy in the next wheel
            shutil.rmtree(house)
        names = self.house_names()
        for dest, src in self.one_name_mapping().items():
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            if not src:
                Path(dest).write_text(HOUSE_INIT, encoding="utf-8")
            elif dest.endswith(".py"):
                text = Path(src).read_text(encoding="utf-8")
                Path(dest).write_text(rewrite_imports(text, names, filename=src), encoding="utf-8")
            else:
                shutil.copyfile(src, dest)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        if self.editable_mode:
            return super().get_outputs(include_bytecode)
        return list(self.one_name_mapping())

    def get_output_mapping(self) -> dict[str, str]:
        if self.editable_mode:
            return super().get_output_mapping()
        return {dest: src for dest, src in self.one_name_mapping().items() if src}


if __name__ == "__main__":
    from setuptools import setup

    setup(cmdclass={"build_py": OneNameBuildPy})

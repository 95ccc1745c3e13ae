"""The wheel's build step (setup.py): our own import statements get the one name's prefix, and nothing else changes.

The installed wheel itself, beside a notebook folder's own model.py, ui/ and training/, is tests/test_wheel_install.py's
(slow: it builds the wheel and a fresh environment).
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("atlas_setup", ROOT / "setup.py")
SETUP = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(SETUP)  # not run as __main__: setup() is not called
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
OURS = {p.split(".")[0] for p in SETUPTOOLS["packages"]} | set(SETUPTOOLS["py-modules"]) - {"atlas"}


def rewrite(source: str) -> str:
    return SETUP.rewrite_imports(source, {"model", "viz", "app"}, "atlas._house")


def test_our_import_statements_get_the_prefix_and_every_other_text_stays() -> None:
    source = '''"""Docs quote `from model import x` and `import viz`."""
from __future__ import annotations
import os, viz.labels as labels
import model
import model.transformer as t
from model.transformer import (
    EncoderDecoder,
    Model,
)
from torch import nn
from modeling import y  # a name that only starts like ours
from . import sibling
if True: from viz import figures; import app
def f():
    from viz.labels import safe  # from model import nothing
    return "model.transformer", "from model import x"
'''
    assert (
        rewrite(source)
        == '''"""Docs quote `from model import x` and `import viz`."""
from __future__ import annotations
import os, atlas._house.viz.labels as labels
import atlas._house.model as model
import atlas._house.model.transformer as t
from atlas._house.model.transformer import (
    EncoderDecoder,
    Model,
)
from torch import nn
from modeling import y  # a name that only starts like ours
from . import sibling
if True: from atlas._house.viz import figures; import atlas._house.app as app
def f():
    from atlas._house.viz.labels import safe  # from model import nothing
    return "model.transformer", "from model import x"
'''
    )


def test_a_line_with_letters_beyond_ascii_before_the_import_is_edited_at_the_right_column() -> None:
    assert rewrite('s = "é→ü"; from model import x\n') == 's = "é→ü"; from atlas._house.model import x\n'


def test_importing_a_dotted_name_of_ours_without_a_name_for_it_is_refused() -> None:
    """`import model.transformer` binds `model`, which no one-line prefixed statement binds the same way."""
    with pytest.raises(SETUP.ImportRewriteError, match="import model.transformer as NAME"):
        rewrite("import model.transformer\n")


def prefixed(tree: ast.AST) -> str:
    """The tree's dump with each import of ours named as the rewrite should name it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in OURS:
            node.module = f"atlas._house.{node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OURS:
                    alias.asname = alias.asname or alias.name
                    alias.name = f"atlas._house.{alias.name}"
    return ast.dump(tree)


def test_every_file_the_wheel_holds_rewrites_to_the_same_code_with_our_imports_prefixed() -> None:
    """Each module of the repository's packages, app.py and atlas/: the rewritten tree is the original's with
    only the module names of our imports changed, and no import of a bare name of ours is left."""
    files = [ROOT / f"{m}.py" for m in SETUPTOOLS["py-modules"]]
    files += [f for p in SETUPTOOLS["packages"] for f in (ROOT / p.replace(".", "/")).glob("*.py")]
    assert len(files) > 100
    for file in files:
        source = file.read_text(encoding="utf-8")
        new = SETUP.rewrite_imports(source, OURS, "atlas._house", filename=str(file))
        assert ast.dump(ast.parse(new)) == prefixed(ast.parse(source)), file

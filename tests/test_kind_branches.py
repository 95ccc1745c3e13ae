"""A model is asked what it can do, not which kind it is (docs of model.names.Capabilities): the config and the
Analysis answer `has_encoder`, `has_decoder` and `has_cross_attention`, and the kind itself is read only in the files
MAY_ASK names, each for its reason. Pages and figures never read it. The guard reads each file's syntax tree, so
that a branch on a local (`kind == "decoder-only"`) is seen as well as one on `config.kind`."""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from analysis.imported import from_arrays
from model.config import KINDS, ModelConfig
from model.names import ATTENTIONS

ROOT = Path(__file__).resolve().parent.parent
OLD_QUESTION = "is_encoder_decoder"  # Hugging Face's config's question, which is the kind again
# The files that may ask the kind itself, each for a reason a capability does not serve; any other file that does
# fails the test (ask the config or the Analysis what the model has: model.names.Capabilities).
MAY_ASK = {
    "model/forward.py": "the model runs the one class its kind built",
    "model/transformer.py": "the model builds one class per kind and checks it",
    "training/batches.py": "a task's batches are pairs or windows before any model exists",
    "training/tiny.py": "a tiny model of each kind is configured by that kind",
    "training/quantize.py": "counts a task's batches' tokens, pairs or windows",
    "inference/catalog.py": "guesses a checkpoint's task from its card before loading it",
    "analysis/seq2seq.py": "asks a Hugging Face model's own config whether it is an encoder-decoder",
    "analysis/imported/arrays.py": "a foreign trace's layout is the kind its caller names, before any config",
    "analysis/imported/checks.py": "checks the kind a caller names against the arrays given",
    "analysis/imported/huggingface.py": "reads a Hugging Face output's fields by the kind its caller names",
    "analysis/imported/trace.py": "reads a foreign trace's sub-layers by the kind its caller names",
    "analysis/imported/trace_fields.py": "reads a foreign trace's fields by the kind its caller names",
}
NOT_SEARCHED = {"tests", ".venv", ".git", "__pycache__", "node_modules"}


def python_files(under: Path) -> list[Path]:
    """Every .py file below `under`, outside the tests and the virtual environment (symlinks not followed)."""
    found = []
    for folder, subfolders, files in os.walk(under):
        subfolders[:] = [s for s in subfolders if s not in NOT_SEARCHED]
        found += [Path(folder) / f for f in files if f.endswith(".py")]
    return sorted(found)


def _names_a_kind(node: ast.AST) -> bool:
    """A kind's name as a string constant, or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_kind(e) for e in node.elts)
    return False


def kind_branches(source: str) -> list[int]:
    """The lines of `source` that branch on a model's kind, read from its syntax tree: a comparison with a kind's
    name whatever it compares (`kind == "decoder-only"` on a local, `config.kind != ...`, `k in ("encoder-only",)`),
    a `match` case on one, and the old question (`.is_encoder_decoder`, `getattr(c, "is_encoder_decoder")`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_names_a_kind(side) for side in (node.left, *node.comparators)):
            lines.append(node.lineno)
        elif isinstance(node, ast.match_case) and any(
            isinstance(p, ast.MatchValue) and _names_a_kind(p.value) for p in ast.walk(node.pattern)
        ):
            lines.append(node.pattern.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr == OLD_QUESTION) or (
            isinstance(node, ast.Name) and node.id == OLD_QUESTION
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value == OLD_QUESTION:
            lines.append(node.lineno)
    return sorted(lines)


def kind_names(source: str) -> list[int]:
    """The lines of `source` holding a kind's name as a string (a docstring's prose aside)."""
    return sorted(n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and n.value in KINDS)


def files_where(find, under: Path) -> dict[str, list[int]]:
    found = {str(p.relative_to(ROOT)): find(p.read_text(encoding="utf-8")) for p in python_files(under)}
    return {name: lines for name, lines in found.items() if lines}


def test_the_guard_reads_a_branch_on_the_kind_on_any_name() -> None:
    source = textwrap.dedent(
        """
        kind = config.kind
        if kind == "decoder-only":
            pass
        if "encoder-only" != config.kind:
            pass
        if k in ("encoder-decoder", "x"):
            pass
        match kind:
            case "encoder-only":
                pass
        if config.is_encoder_decoder or getattr(c, "is_encoder_decoder", False):
            pass
        if question.kind == "head" or raw.dtype.kind in "fiu":
            pass
        """
    )
    assert kind_branches(source) == [3, 5, 7, 10, 12, 12]


def test_only_the_files_that_must_branch_on_the_models_kind_do() -> None:
    branching = files_where(kind_branches, ROOT)
    assert "model/transformer.py" in branching, "the search found nothing: model/transformer.py builds each kind"
    others = {name: lines for name, lines in branching.items() if name not in MAY_ASK}
    assert others == {}, (
        f"these files branch on the model's kind (file: lines): {others}. Ask the config or the Analysis what the "
        "model has instead (has_encoder, has_decoder, has_cross_attention; model.names.Capabilities)"
    )
    stale = sorted(set(MAY_ASK) - set(branching))
    assert stale == [], f"{stale} no longer branch on the kind: take them out of MAY_ASK"


@pytest.mark.parametrize("folder", ["views", "viz", "ui"])
def test_pages_and_figures_never_read_the_kind(folder: str) -> None:
    assert python_files(ROOT / folder), f"{folder}/ has no Python files: the check would pass vacuously"
    assert files_where(kind_branches, ROOT / folder) == {}
    assert files_where(kind_names, ROOT / folder) == {}, "a kind's name in a page: a branch on the kind"


@pytest.mark.parametrize(
    ("kind", "encoder", "decoder", "cross"),
    [
        ("encoder-decoder", True, True, True),
        ("decoder-only", False, True, False),
        ("encoder-only", True, False, False),
    ],
)
def test_the_config_says_which_stacks_and_attentions_its_model_has(kind, encoder, decoder, cross) -> None:
    config = ModelConfig(kind=kind, vocab_size=50)
    assert (config.has_encoder, config.has_decoder, config.has_cross_attention) == (encoder, decoder, cross)
    assert config.first_stack == ("encoder" if encoder else "decoder")


def test_every_kind_names_its_attentions() -> None:
    assert sorted(ATTENTIONS) == sorted(KINDS)


CAUSAL = np.array([[[[1.0, 0.0], [0.5, 0.5]]]])  # (layers, heads, queries, keys): no weight on a later key
BOTH_WAYS = np.full((1, 1, 2, 2), 0.5)


@pytest.mark.parametrize(("kind", "weights"), [("decoder-only", CAUSAL), ("encoder-only", BOTH_WAYS)])
def test_an_analysis_answers_as_the_config_of_its_kind(kind: str, weights: np.ndarray) -> None:
    analysis = from_arrays(weights, ["a", "b"], kind=kind)
    config = ModelConfig(kind=kind, vocab_size=50)
    asked = ("has_encoder", "has_decoder", "has_cross_attention", "first_stack")
    assert [getattr(analysis, a) for a in asked] == [getattr(config, a) for a in asked]
    assert analysis.attentions == list(ATTENTIONS[kind])

"""A model is asked what it can do, not which kind it is (docs of model.names.Capabilities): the config and the
Analysis answer `has_encoder`, `has_decoder` and `has_cross_attention`, and the kind itself is read in a few files
of the model only. Pages and figures never read it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from analysis.imported import from_arrays
from model.config import KINDS, ModelConfig
from model.names import ATTENTIONS

ROOT = Path(__file__).resolve().parent.parent
# What a branch on the kind looks like (the grep of issue 47): a comparison with the kind, or the old question.
BRANCH = re.compile(r"\.kind ==|\.kind !=|is_encoder_decoder")
KIND_NAMES = re.compile(r"\"(encoder-decoder|decoder-only|encoder-only)\"")
MOST_FILES = 4  # the model's own files may build the kind's class and check it; nothing else needs to
NOT_SEARCHED = {"tests", ".venv", ".git", "__pycache__", "node_modules"}


def python_files(under: Path) -> list[Path]:
    """Every .py file below `under`, outside the tests and the virtual environment (symlinks not followed)."""
    found = []
    for folder, subfolders, files in os.walk(under):
        subfolders[:] = [s for s in subfolders if s not in NOT_SEARCHED]
        found += [Path(folder) / f for f in files if f.endswith(".py")]
    return sorted(found)


def files_matching(pattern: re.Pattern, under: Path) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in python_files(under) if pattern.search(p.read_text(encoding="utf-8"))]


def test_at_most_four_files_branch_on_the_models_kind() -> None:
    branching = files_matching(BRANCH, ROOT)
    assert branching, "the search found nothing: model/transformer.py builds one class per kind and checks it"
    assert len(branching) <= MOST_FILES, (
        f"{len(branching)} files branch on the model's kind: {branching}. Ask the config or the Analysis what the "
        "model has instead (has_encoder, has_decoder, has_cross_attention; model.names.Capabilities)"
    )


@pytest.mark.parametrize("folder", ["views", "viz"])
def test_pages_and_figures_never_read_the_kind(folder: str) -> None:
    assert python_files(ROOT / folder), f"{folder}/ has no Python files: the check would pass vacuously"
    assert files_matching(BRANCH, ROOT / folder) == []
    assert files_matching(KIND_NAMES, ROOT / folder) == [], "a kind's name in a page: a branch on the kind"


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

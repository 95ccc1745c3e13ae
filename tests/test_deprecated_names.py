"""The names a notebook may still call for one attention sub-layer (`Block`, `Analysis.blocks`, `Analysis.block`):
each warns with the name to use instead, at the caller's line (where a notebook shows it), and answers what that
name answers."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import record
from analysis.imported.arrays import from_arrays
from analysis.record import Analysis, Sublayer

TOKENS = ["<s>", "the", "cat"]


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    weights = np.tril(np.ones((2, 2, 3, 3), dtype=np.float32))  # (layers, heads, queries, keys), causal
    return from_arrays(weights / weights.sum(-1, keepdims=True), TOKENS)


def test_analysis_blocks_warns_and_is_the_sublayers(analysis: Analysis) -> None:
    with pytest.warns(DeprecationWarning, match=r"Analysis\.blocks is now Analysis\.sublayers") as caught:
        blocks = analysis.blocks
    assert caught[0].filename == __file__
    assert blocks is analysis.sublayers and list(blocks) == ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]


def test_analysis_block_warns_and_is_the_sublayer(analysis: Analysis) -> None:
    with pytest.warns(DeprecationWarning, match=r"Analysis\.block is now Analysis\.sublayer") as caught:
        block = analysis.block("decoder.self_attn", 1)
    assert caught[0].filename == __file__
    assert block is analysis.sublayer("decoder.self_attn", 1) is analysis.sublayers["decoder.layers.1.self_attn"]
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError, match="no decoder.self_attn sub-layer in layer 2"):
        analysis.block("decoder.self_attn", 2)


def test_block_warns_and_is_the_sublayer_class() -> None:
    with pytest.warns(DeprecationWarning, match=r"analysis\.record\.Block is now analysis\.record\.Sublayer") as caught:
        from analysis.record import Block
    assert caught[0].filename == __file__
    assert Block is Sublayer


def test_the_new_names_warn_nothing(analysis: Analysis, recwarn: pytest.WarningsRecorder) -> None:
    analysis.sublayers, analysis.sublayer("decoder.self_attn", 0), record.Sublayer
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    with pytest.raises(AttributeError, match="has no attribute 'Blocks'"):
        record.Blocks  # noqa: B018

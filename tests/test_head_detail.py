"""The attention-math page's scores and values come from one head computed on demand (analysis.analyze.head_detail),
equal to that head in the full analysis; the pages' analysis keeps no scores or values."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.analyze import analyze, head_detail
from inference.checkpoint import load_checkpoint
from inference.text import InputError
from training.tiny import make_tiny_checkpoint
from viz.steps import attention_steps

TEXT = "The scores of one head, on demand."


@pytest.fixture(scope="module", params=["encoder-decoder", "decoder-only"])
def ckpt(request, tmp_path_factory):
    return load_checkpoint(make_tiny_checkpoint(tmp_path_factory.mktemp("detail") / request.param, request.param))


def test_one_heads_detail_equals_that_head_of_the_full_analysis(ckpt) -> None:
    full = analyze(ckpt, TEXT, k=5)
    for name, sublayer in full.sublayers.items():
        for head in (0, sublayer.n_heads - 1):
            detail = head_detail(ckpt, TEXT, name, head, k=5)
            np.testing.assert_array_equal(detail.scores, sublayer.scores[head])
            np.testing.assert_array_equal(detail.values, sublayer.values[head])
            assert detail.scores.base is None and detail.values.base is None  # copies: the pass is freed


def test_the_steps_from_a_detail_equal_the_steps_from_the_full_sublayer(ckpt) -> None:
    full = analyze(ckpt, TEXT, k=5)
    light = full.for_pages()
    name, sublayer = next(reversed(full.sublayers.items()))
    head, query = sublayer.n_heads - 1, sublayer.weights.shape[1] - 1
    on_demand = attention_steps(light.sublayers[name], head, query, head_detail(ckpt, TEXT, name, head, k=5))
    whole = attention_steps(sublayer, head, query)
    for field in ("scores", "masked", "weights", "values", "output"):
        np.testing.assert_array_equal(getattr(on_demand, field), getattr(whole, field))
    with pytest.raises(ValueError, match="holds no raw scores"):
        attention_steps(light.sublayers[name], head, query)
    with pytest.raises(ValueError, match="not"):
        attention_steps(light.sublayers[name], 0, query, head_detail(ckpt, TEXT, name, 1, k=5))


def test_a_translators_detail_from_the_analysiss_own_output_decodes_nothing_and_is_equal(ckpt, monkeypatch) -> None:
    """The pages pass the analysis's output ids (ui.cache.head_detail): the same rows, no second decoding."""
    import analysis.analyze as analyze_module

    full = analyze(ckpt, TEXT, k=5)
    name, sublayer = next(reversed(full.sublayers.items()))
    if not ckpt.config.has_cross_attention:  # a language model decodes nothing for an analysis anyway
        return

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again")

    monkeypatch.setattr(analyze_module, "greedy_many", no_decoding)
    detail = head_detail(ckpt, TEXT, name, 1, k=5, target_ids=full.target_ids)
    np.testing.assert_array_equal(detail.scores, sublayer.scores[1])
    np.testing.assert_array_equal(detail.values, sublayer.values[1])
    with pytest.raises(InputError, match="must start with <s>"):
        head_detail(ckpt, TEXT, name, 1, target_ids=full.target_ids[1:])
    with pytest.raises(InputError):
        head_detail(ckpt, TEXT, name, 1, target_ids=(ckpt.config.bos_id, ckpt.config.vocab_size))

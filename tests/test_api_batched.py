"""A list of texts to the notebook API's circuit functions runs as one padded batch on our own checkpoints (a
language model, and a translator whose sources and outputs both differ in length), each text's answer equal to its
own call within 1e-5 (tests/test_any_model.py does the same on `transformers` objects)."""

from __future__ import annotations

import pandas.testing as pd_testing
import pytest

import atlas

TOL = 1e-5
TEXTS = ["The cat sat on the mat because it was", "A dog.", "She walked to the old house by the river"]


@pytest.fixture(scope="module", params=["lm-english", "translate-en-de"])
def ckpt(request):
    return atlas.load(request.param)


def test_the_scores_and_the_lens_of_a_list_equal_each_texts_own(ckpt) -> None:
    tables = atlas.logit_attribution_scores(ckpt, TEXTS)
    lenses = atlas.logit_lens(ckpt, TEXTS, as_table=True)
    assert len({len(lens) for lens in lenses}) == len(TEXTS)  # lengths differ: the batch was padded
    for text, table, lens in zip(TEXTS, tables, lenses, strict=True):
        alone = atlas.logit_attribution_scores(ckpt, text)
        pd_testing.assert_frame_equal(table, alone, check_exact=False, atol=TOL, rtol=0)
        assert table.attrs["logit"] == pytest.approx(alone.attrs["logit"], abs=TOL)
        assert (table.attrs["token"], table.attrs["position"]) == (alone.attrs["token"], alone.attrs["position"])
        lens_alone = atlas.logit_lens(ckpt, text, as_table=True)
        pd_testing.assert_frame_equal(lens, lens_alone, check_exact=False, atol=TOL, rtol=0)


def test_an_unreadable_text_in_a_list_is_named_by_its_place(ckpt) -> None:
    with pytest.raises(ValueError, match="^text 2: The text is empty"):
        atlas.logit_lens(ckpt, [TEXTS[0], "   "])
    with pytest.raises(TypeError, match="logit_attribution_scores takes a list"):
        atlas.logit_attribution(ckpt, TEXTS)


def test_detecting_heads_over_a_list_equals_detecting_them_over_each_texts_analysis(ckpt) -> None:
    batched = atlas.detect_heads(ckpt, TEXTS, "previous token")
    alone = atlas.detect_heads([atlas.analyze(ckpt, text) for text in TEXTS], pattern="previous token")
    pd_testing.assert_frame_equal(batched, alone, check_exact=False, atol=TOL, rtol=0)

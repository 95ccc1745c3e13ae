"""The Logit attribution page's "Do the explanations agree?" (views/attribution.py) in AppTest: nothing runs before
the button; then the ranks and the correlations are those of analysis.agreement for the page's position, with the
line naming where the methods disagree; a translator gets a sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_app import ED, LM, chart, ok

from analysis.agreement import agreement
from inference.checkpoint import load_checkpoint
from viz.agreement import agreement_frame, disagreement_line, importance_ranks, rank_correlations

TEXT = "the cat sat on the mat"


def z(spec: dict) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in spec["data"][0]["z"]], dtype=float)


def test_the_methods_are_compared_for_the_pages_position_after_the_button(app, good_dir: Path) -> None:
    at = app(text=TEXT, pos="6")
    at.switch_page("views/attribution.py").run()
    assert "agreement_ranks" not in {el.key for el in ok(at).get("plotly_chart")}  # nothing runs before the button
    at.button(key="agreement_run").click().run()
    found = agreement(load_checkpoint(good_dir / LM), TEXT, position=5)
    frame = agreement_frame(found.scores)
    np.testing.assert_allclose(z(chart(ok(at), "agreement_ranks")), importance_ranks(frame).to_numpy())
    np.testing.assert_allclose(z(chart(at, "agreement_corr")), rank_correlations(frame).to_numpy(), atol=1e-9)
    shown = " ".join(m.value for m in at.markdown)
    assert "They disagree most on layer" in shown and disagreement_line(frame).split(":")[0] in shown
    assert "The corrupted text (the text up to the position" in " ".join(c.value for c in at.caption)
    assert at.dataframe[-1].value.shape == (len(frame), 2 + len(frame.columns))


def test_a_translator_gets_a_sentence_and_no_button(app) -> None:
    at = app(model=ED, text="the cat sat")
    at.switch_page("views/attribution.py").run()
    assert "compared on a language model" in " ".join(i.value for i in ok(at).info)
    assert "agreement_run" not in {b.key for b in at.button}

"""The induction-circuit step told from its numbers (analysis.circuit_told): on made-up figures, the textbook
circuit is told as the textbook has it and a spread one as spread, never with a claim that one head feeds the keys;
and on the shipped lm-english, in AppTest, every number the step prints agrees with the sentence printed beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from analysis.circuit_told import ONE_HEAD, told

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS, INDUCTION = (0, 3, 0.9), (1, 0, 0.95)  # layer 1, head 4 and layer 2, head 1


def figures(alone: dict[tuple[int, int], float], restored: float, sources: list, writes: dict) -> dict:
    """Made-up figures of a 2-layer, 4-head model: the heads' shares restored alone and their direct logit writes."""
    a, w = np.zeros((2, 4)), np.zeros((2, 4))
    for (layer, head), x in alone.items():
        a[layer, head] = x
    for (layer, head), x in writes.items():
        w[layer, head] = x
    together = [(1, 0, 0.95), (1, 2, 0.6)]
    return {"previous": PREVIOUS, "induction": INDUCTION, "sources": sources, "alone": a, "together": together}, {
        "restored": restored,
        "writes": w,
    }


def tell(alone, restored, sources, writes):
    named, rest = figures(alone, restored, sources, writes)
    return told(**named, **rest)


def test_the_textbook_circuit_is_told_as_the_textbook_has_it() -> None:
    sources = [(0, 3, 0.40), (0, 1, 0.12), (0, 0, 0.10), (0, 2, 0.08)]
    t = tell({(1, 0): 0.8, (1, 2): 0.1}, 0.95, sources, {(1, 0): 3.0, (1, 2): 0.5})
    assert t.textbook_keys and not t.spread
    assert t.keys_heading == "Its output feeds the keys of the induction head, layer 2, head 1"
    assert t.keys.startswith("Of every earlier head, layer 2, head 1 reads most from the previous-token head, layer 1")
    assert "(0.400); next is layer 1, head 2 (0.120)." in t.keys
    assert t.patching.startswith("One head carries the copy: layer 2, head 1 alone restores 0.80 (the induction head")
    assert "spreads" not in t.patching
    assert t.writes.startswith("The largest is the induction head's, layer 2, head 1: 3.00.")


def test_a_spread_circuit_says_so_and_claims_no_head_feeds_the_keys() -> None:
    sources = [(0, 1, 0.20), (0, 0, 0.15), (0, 3, 0.10), (0, 2, 0.05)]  # the previous-token head third
    t = tell({(1, 0): 0.1, (1, 2): 0.2, (1, 3): 0.05}, 0.9, sources, {(1, 2): 1.0, (1, 0): 0.2, (0, 1): 0.1})
    assert not t.textbook_keys and t.spread
    said = " ".join((t.keys_heading, t.keys, t.patching, t.writes))
    assert "feeds the keys" not in said and "One head" not in said
    assert "reads most from layer 1, head 2 (0.200) and layer 1, head 1 (0.150); the previous-token head, " in t.keys
    assert "layer 1, head 4, ranks 3 of 4 (0.100): here the keys do not read mainly from it." in t.keys
    assert t.patching == (
        "No head restores much alone: at most 0.20 (layer 2, head 3). The 2 heads that score 0.3 or more as induction "
        "heads restore 0.30 one at a time, summed, and 0.90 patched together: the model spreads the circuit over "
        "several heads."
    )
    assert [r[0] for r in t.shares] == ["layer 2, head 3", "layer 2, head 1"] and t.shares_sum == pytest.approx(0.3)
    assert "The largest is layer 2, head 3's, 1.00, itself an induction head (score 0.60); layer 2, head 1" in t.writes


def test_a_first_source_level_with_others_is_not_told_as_feeding_the_keys() -> None:
    sources = [(0, 3, 0.196), (0, 1, 0.195), (0, 2, 0.10), (0, 0, 0.09)]
    t = tell({(1, 0): 0.9}, 0.95, sources, {(1, 0): 1.0})
    assert not t.textbook_keys and "feeds the keys" not in t.keys_heading
    assert "(0.196), but barely: layer 1, head 2 (0.195) comes within 5% of it." in t.keys


# the shipped lm-english in AppTest -----------------------------------------------------------------------------------


def number(pattern: str, text: str) -> re.Match:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return found


@pytest.fixture(scope="module")
def step(tmp_path_factory) -> AppTest:
    """The Lesson at the circuit step on lm-english, ATLAS_CHECKPOINTS the repository's checkpoints/."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params.update({"model": "lm-english", "lesson": "induction-circuit"})
        at.run()
        at = at.switch_page("views/lesson.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def shown(at: AppTest) -> str:
    """Every markdown and caption of the step, Markdown escapes (ui.markdown.literal) taken out."""
    return re.sub(r"\\(.)", r"\1", " ".join([m.value for m in at.markdown] + [c.value for c in at.caption]))


def heatmap(at: AppTest, key: str) -> np.ndarray:
    spec = next(json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.key == f"lesson_circuit_{key}")
    return decode_typed_array(spec["data"][0]["z"]).astype(float)


def cell(label: str) -> tuple[int, int]:
    layer, head = re.fullmatch(r"layer (\d+), head (\d+)", label).groups()
    return int(layer) - 1, int(head) - 1


def test_the_shipped_english_models_previous_token_and_key_sentences_agree_with_its_numbers(step) -> None:
    text = shown(step)
    score = number(r"1\. The previous-token head: (layer \d+, head \d+)\*\* \(previous-token score (\d\.\d\d)", text)
    assert f"each token puts {score[2]} of its weight, on average, on the token just before it" in text
    sources = next(d.value for d in step.dataframe if "K-composition" in d.value.columns)
    previous = sources[sources["earlier head"] == score[1]]
    assert len(previous) == 1, "the previous-token head's row is in the table"
    rank = int(previous["rank"].iloc[0])
    if rank == 1:
        assert f"reads most from the previous-token head, {score[1]} ({sources['K-composition'].iloc[0]:.3f})" in text
    else:
        assert "feeds the keys" not in text
        said = number(r"the previous-token head, (layer \d+, head \d+), ranks (\d+) of (\d+) \((\d\.\d{3})\)", text)
        assert (said[1], int(said[2])) == (score[1], rank) and said[4] == f"{previous['K-composition'].iloc[0]:.3f}"
        top = sources.iloc[0]
        assert f"reads most from {top['earlier head']} ({top['K-composition']:.3f})" in text


def test_the_shipped_english_models_patching_sentence_agrees_with_its_numbers(step) -> None:
    text, alone = shown(step), heatmap(step, "patching")
    most = number(r"No head restores much alone: at most (\d\.\d\d) \((layer \d+, head \d+)\)", text)
    assert most[1] == f"{alone.max():.2f}" and alone[cell(most[2])] == alone.max() and alone.max() < ONE_HEAD
    shares = next(d.value for d in step.dataframe if "restores alone" in d.value.columns)
    for label, restores in zip(shares["induction head"], shares["restores alone"], strict=True):
        assert alone[cell(label)] == pytest.approx(restores)
    said = number(r"restore (-?\d\.\d\d) one at a time, summed, and (\d\.\d\d) patched together", text)
    assert said[1] == f"{shares['restores alone'].sum():.2f}"  # every induction head is in the table here
    assert float(said[2]) > ONE_HEAD and "the model spreads the circuit over several heads" in text


def test_the_shipped_english_models_attribution_sentence_agrees_with_its_numbers(step) -> None:
    text, writes = shown(step), heatmap(step, "attribution")
    largest = number(r"The largest is (layer \d+, head \d+)'s, (\d+\.\d\d)", text)
    assert writes[cell(largest[1])] == writes.max() and largest[2] == f"{writes.max():.2f}"
    induction = number(r"2\. (?:Its output feeds the|The) keys of the induction head, (layer \d+, head \d+)", text)[1]
    best = number(rf"{induction}, the best on the probe, writes (-?\d+\.\d\d)", text)
    assert best[1] == f"{writes[cell(induction)]:.2f}"
    shares = next(d.value for d in step.dataframe if "restores alone" in d.value.columns)
    heads = number(r"The (\d+) induction heads write (-?\d+\.\d\d) of the (-?\d+\.\d\d) all heads write", text)
    assert heads[2] == f"{sum(writes[cell(h)] for h in shares['induction head']):.2f}"
    assert heads[3] == f"{writes.sum():.2f}" and int(heads[1]) == len(shares)


def test_the_steps_takeaway_follows_what_the_figures_found() -> None:
    """The step's last sentence (views.lesson_steps.induction.takeaway) says the textbook's keys only where the
    figures found them, and who carries the copying from the patching, in plain words."""
    from views.lesson_steps.induction import takeaway

    textbook = tell({(1, 0): 0.8}, 0.95, [(0, 3, 0.40), (0, 1, 0.12)], {(1, 0): 3.0})
    said = takeaway(textbook, "layer 1, head 4")
    assert "through layer 1, head 4, as the textbook says" in said and "one head, layer 2, head 1, carries" in said
    spread = tell({(1, 0): 0.1, (1, 2): 0.2}, 0.9, [(0, 1, 0.20), (0, 3, 0.10)], {(1, 2): 1.0})
    said = takeaway(spread, "layer 1, head 4")
    assert "as the textbook says" not in said and "several heads share the copying" in said

"""The views each shipped model opens on are measured on it (analysis.defaults, `python -m atlas defaults`): the
card records them, the measurement gives the same now, and each one shows something."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import torch

from analysis import defaults
from inference.catalog import presets
from inference.checkpoint import load_checkpoint
from inference.text import encode_prefix
from model.forward import forward

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("lm-english", "translate-en-de", "reverse", "induction")
# One pytest-xdist worker for the module: its tests share `measured`, a cache of this process (the translator's
# measurement takes a minute), which each worker would otherwise fill again.
pytestmark = pytest.mark.xdist_group("tests/test_measured_defaults.py")


@cache
def measured(name: str) -> dict:
    return defaults.measure(load_checkpoint(ROOT / "checkpoints" / name))


def card(name: str) -> dict:
    return load_checkpoint(ROOT / "checkpoints" / name).card["defaults"]


@pytest.mark.parametrize("name", SHIPPED)
def test_the_card_records_what_the_command_measures_now(name: str) -> None:
    """A stale card fails: rerun `python -m atlas defaults NAME`."""
    assert card(name) == measured(name)


@pytest.mark.parametrize("name", SHIPPED)
def test_head_ablation_opens_where_switching_the_head_off_shows(name: str) -> None:
    found = measured(name)["ablation"]
    assert found["kl"] >= defaults.KL_SHOWN or found["top_before"] != found["top_after"], found
    assert found["shows"]


def test_the_language_models_ablate_their_opening_induction_head() -> None:
    for name in ("lm-english", "induction"):
        found = measured(name)
        ablated, opening = found["ablation"], found["head"]
        assert (ablated["block"], ablated["head"]) == (opening["block"], opening["head"])
        assert found["head"]["what"] == "induction" and found["head"]["score"] > 0.5


def test_the_translator_opens_on_a_head_that_aligns_better_than_layer_1_head_1() -> None:
    head = measured("translate-en-de")["head"]
    assert head["block"].endswith(".cross_attn")
    assert head["score"] > head["first_head_score"] + 0.2, head


@pytest.mark.parametrize("name", ("lm-english", "induction"))
def test_explore_opens_on_a_text_where_the_induction_head_shows_its_pattern(name: str) -> None:
    """A text that repeats (lm-english's first preset does not: there the head rests on <s>), on which the opening
    head puts more than half its weight on the token after the earlier copy, averaged over the repeated tokens, and
    at least as much as on the first preset."""
    head = measured(name)["head"]
    ckpt = load_checkpoint(ROOT / "checkpoints" / name)

    def induction(text: str) -> float:
        ids = encode_prefix(ckpt, text, [])
        _, trace = forward(ckpt.model, torch.tensor([ids]))
        return defaults.induction_attention(trace.attention[head["block"]].weights[0, head["head"] - 1], ids)

    assert induction(head["text"]) == pytest.approx(head["text_score"], abs=1e-4)
    assert head["text_score"] > 0.5, head
    assert head["text_score"] >= induction(presets(name, ckpt.config.kind, ckpt.card)[0])


@pytest.mark.parametrize("name", ("lm-english", "induction"))
def test_compare_opens_on_a_pair_each_text_answers_its_own_way(name: str) -> None:
    pair = measured(name)["compare"]
    assert pair["answered"] and pair["first_difference"] > 0 > pair["second_difference"], pair


def test_a_question_the_model_cannot_answer_is_recorded_as_such() -> None:
    """lm-english cannot tell who receives the drink: Mary − John keeps its sign across the two texts."""
    tried = {p["answer"]: p for p in measured("lm-english")["compare_tried"]}
    ioi = tried["▁Mary"]
    assert not ioi["answered"]
    assert (ioi["first_difference"] > 0) == (ioi["second_difference"] > 0)


@pytest.mark.parametrize("name", ("lm-english", "induction"))
def test_training_steps_open_on_a_text_where_the_head_is_seen_forming(name: str) -> None:
    steps = measured(name)["training"]
    assert steps["last_score"] > steps["first_score"] + 0.3, steps


@pytest.fixture
def shipped_app(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()


def test_pages_open_on_the_measured_defaults(shipped_app) -> None:
    at = shipped_app
    found = card("lm-english")
    assert not at.exception
    assert at.selectbox(key="model").value == "lm-english"
    # Explore: the measured head, on the repeating text where it shows its induction pattern
    assert at.text_area(key="text").value == found["head"]["text"] != "The cat sat on the mat."
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (1, 5)
    # Head ablation: the measured head switched off, on the measured text
    at.switch_page("views/ablation.py").run()
    assert not at.exception
    assert at.text_area(key="text").value == found["ablation"]["text"]
    assert at.multiselect(key="ablate_heads").value == ["decoder.layers.1.self_attn:5"]
    assert f"{found['ablation']['kl']:.4f}" in " ".join(m.value for m in at.metric)
    # Compare: the measured pair, and the question the model cannot answer said
    at.switch_page("views/compare.py").run()
    assert not at.exception
    assert at.text_area(key="text").value == found["compare"]["first"]
    assert at.text_input(key="compare").value == found["compare"]["second"]
    assert at.selectbox(key="patch_answer").value == found["compare"]["answer"]
    assert at.selectbox(key="patch_versus").value == found["compare"]["versus"]
    assert any("cannot answer" in c.value for c in at.caption)
    # A text the person writes stays, on every page
    at.text_area(key="text").set_value("The cat sat on the mat.").run()
    at.switch_page("views/ablation.py").run()
    assert at.text_area(key="text").value == "The cat sat on the mat."


def test_training_steps_and_the_translator_open_on_their_measured_defaults(shipped_app) -> None:
    at = shipped_app
    at.switch_page("views/training.py").run()
    assert not at.exception
    assert at.text_area(key="text").value == card("lm-english")["training"]["text"]
    assert any("repeats itself" in c.value for c in at.caption)
    at.switch_page("views/attribution.py").run()
    assert any("embedding" in c.value and "unembedding" in c.value for c in at.caption)
    at.selectbox(key="model").set_value("translate-en-de").run()
    at.switch_page("views/explore.py").run()
    assert not at.exception
    head = card("translate-en-de")["head"]
    assert at.radio(key="attention").value == "decoder.cross_attn"
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (1, head["head"] - 1)


def test_reverse_opens_head_ablation_on_a_whole_layer_whose_loss_changes_the_output(monkeypatch) -> None:
    """No one head of reverse moves its prediction: the page opens with every head of the measured layer off."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"model": "reverse"})
    at.run()
    at.switch_page("views/ablation.py").run()
    assert not at.exception
    found = card("reverse")["ablation"]
    assert at.text_area(key="text").value == found["text"]
    sublayer = found["block"]
    assert at.multiselect(key="ablate_heads").value == [f"{sublayer}:{h - 1}" for h in found["heads"]]
    [kl] = [m.value for m in at.metric]
    assert float(kl) >= defaults.KL_SHOWN
    intact, ablated = (c.value for c in at.code[:2])
    assert intact != ablated
    assert any("switched off" in c.value and "spreads its work" in c.value for c in at.caption)


@pytest.mark.parametrize("page", ["views/paper.py", "views/attention_math.py", "views/compare.py"])
def test_the_translators_head_pages_open_on_the_head_explore_opens_on(monkeypatch, page: str) -> None:
    """A visitor who comes to the page with no head chosen (the session's layer and head set back to 1, as a link
    to the page gives them) sees the measured alignment head, not layer 1, head 1."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"model": "translate-en-de"})
    at.run()
    at.session_state["layer"], at.session_state["head"] = 0, 0
    at.switch_page(page).run()
    assert not at.exception
    head = card("translate-en-de")["head"]
    assert at.radio(key="attention").value == "decoder.cross_attn"
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (1, head["head"] - 1)


def test_explores_reading_note_shows_a_token_of_the_text(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"model": "reverse", "text": "abc"})
    at.run()
    assert not at.exception
    [note] = [c.value for c in at.caption if "Tokens read" in c.value]
    assert "cat" not in note and "a)" in note, note  # the first letter of the text, as the model reads it


def test_a_link_naming_a_text_and_heads_opens_them(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"text": "The capital of France is", "ablate_heads": "decoder.self_attn-L1-H2"})
    at.run()
    at.switch_page("views/ablation.py").run()
    assert not at.exception
    assert at.text_area(key="text").value == "The capital of France is"
    assert at.multiselect(key="ablate_heads").value == ["decoder.layers.0.self_attn:1"]


def test_a_refused_link_text_says_the_box_holds_the_text_the_page_opens_on(monkeypatch) -> None:
    """Explore on lm-english opens on its measured text, not the first preset: the warning names what is shown."""
    from streamlit.testing.v1 import AppTest

    from ui.state import PACKED

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"model": "lm-english", "text": PACKED + "!!!!"})
    at.run()
    assert not at.exception
    assert at.text_area(key="text").value == card("lm-english")["head"]["text"]
    [warning] = [w.value for w in at.sidebar.warning]
    assert warning.startswith("The link's text was not opened (") and warning.endswith("the text this page opens on.")

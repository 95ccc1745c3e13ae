"""Forced decoding and the model's certainty on Explore and Generate, driven by AppTest on tiny checkpoints: the
reference box on a translator, the continuation box on a language model, their rows, and bad references."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, ED, LM, chart, errors, frame, ok, z

from analysis.forced import forced
from inference.checkpoint import load_checkpoint
from viz.forced import percent

TEXT = "the cat sat on the mat"


@pytest.fixture
def app(good_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """`app(**query_params)` → the app run once against `good_dir` (as tests/test_app.py's)."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make(**query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(query)
        return at.run()

    return make


def rows_match(at, ckpt, reference: str) -> None:
    expected = forced(ckpt, TEXT, reference).rows
    table = frame(at, "rank")
    assert list(table["token #"]) == list(range(1, len(expected) + 1))
    assert list(table["rank"]) == [r.rank for r in expected]
    assert list(table["as %"]) == [percent(r.probability) for r in expected]


@pytest.mark.parametrize("view", ["views/explore.py", "views/generate.py"])
def test_a_reference_translation_shows_each_tokens_probability_and_rank(app, good_dir: Path, view: str) -> None:
    at = app(model=ED, text=TEXT)
    at.switch_page(view).run()
    box = ok(at).text_input(key="reference")
    assert box.label == "Reference translation"
    box.input("die katze sass auf der matte").run()
    rows_match(ok(at), load_checkpoint(good_dir / ED), "die katze sass auf der matte")
    assert at.query_params["reference"] == "die katze sass auf der matte"  # a link keeps it
    assert "certainty" in {el.key for el in at.get("plotly_chart")}


def test_explore_draws_the_cross_attention_of_the_forced_run(app, good_dir: Path) -> None:
    at = app(model=ED, text=TEXT, reference="die katze")
    ckpt = load_checkpoint(good_dir / ED)
    cross = z(chart(ok(at), "head_chart"))
    assert cross.shape[0] == 1 + len(ckpt.tokenizer.encode("die katze"))  # bos, then the reference's tokens
    assert "Reference, fed to the decoder" in " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("view", ["views/explore.py", "views/generate.py"])
def test_a_continuation_shows_each_tokens_probability_and_rank(app, good_dir: Path, view: str) -> None:
    at = app(model=LM, text=TEXT)
    at.switch_page(view).run()
    box = ok(at).text_input(key="reference")
    assert box.label == "Continuation"
    box.input("and the dog").run()
    rows_match(ok(at), load_checkpoint(good_dir / LM), "and the dog")


def test_the_models_output_is_shaded_with_its_percentages_without_a_reference(app) -> None:
    at = app(model=ED, text=TEXT)
    strip = chart(ok(at), "certainty")["data"][0]
    assert all(cell.endswith(" %") for line in strip["text"] for cell in line if cell)
    assert "Least sure" in " ".join(c.value for c in at.caption)


@pytest.mark.parametrize("model", [ED, LM])
@pytest.mark.parametrize(
    ("reference", "said"),
    [("   ", "is empty"), ("katze " * 300, "Shorten it")],
)
def test_a_bad_reference_gives_a_message_not_a_traceback(app, model: str, reference: str, said: str) -> None:
    at = app(model=model, text=TEXT)
    at.text_input(key="reference").input(reference).run()
    assert said in errors(ok(at))
    assert "head_chart" in {el.key for el in at.get("plotly_chart")}  # the rest of the page still draws


def test_characters_outside_the_vocabulary_are_named(app) -> None:
    at = app(model=ED, text=TEXT)
    at.text_input(key="reference").input("die katze 猫").run()
    assert "猫" in " ".join(w.value for w in ok(at).warning)
    frame(at, "rank")


def test_a_reference_goes_when_the_model_changes(app) -> None:
    """A German reference written for the translator is no continuation for the language model: switching models
    empties the box (and the link)."""
    at = app(model=ED, text=TEXT, reference="die katze")
    assert ok(at).text_input(key="reference").value == "die katze"
    at.selectbox(key="model").select(LM).run()
    assert not ok(at).text_input(key="reference").value
    assert not at.query_params.get("reference"), at.query_params


def test_reverse_asks_for_its_expected_output_with_its_own_text_backwards(monkeypatch) -> None:
    """reverse is no translator: the box asks for the output expected, its example the text backwards (no German)."""
    from streamlit.testing.v1 import AppTest

    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(root / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(root / "app.py"), default_timeout=120)
    at.query_params.update({"model": "reverse", "text": "hello"})
    at.run()
    at.switch_page("views/generate.py").run()
    box = ok(at).text_input(key="reference")
    assert box.label == "Expected output"
    assert box.placeholder == "olleh"

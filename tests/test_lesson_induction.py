"""The Lesson's induction step in AppTest: on the shipped induction model it draws the repeated run, names the
best induction head the scores find, shows the second copy costing more with heads switched off, and the run that
trained it; on an untrained language model it says no head copies; an encoder-decoder is told the step needs a
decoder-only model. And analysis.lesson's induction work on its own."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from analysis.induction import copy_losses, measure, repeated_tokens
from analysis.lesson import INDUCTION_AT, copying, formation
from course.lesson import SENTENCES, SLUGS, STEPS
from inference.checkpoint import load_checkpoint
from model.attention import Ablation

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
PAGE = "views/lesson.py"
SLUG = "induction-heads"
LOSS, TOP1 = "loss, second copy (nats)", "top-1, second copy"


@pytest.fixture
def checkpoints(tmp_path: Path, good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped induction model beside the tiny language model and translator, in a folder of this test's own
    (a fresh path: nothing cached by another test answers for it)."""
    shutil.copytree(ROOT / "checkpoints" / "induction", tmp_path / "induction")
    for name in ("lm-tiny", "translate-tiny"):
        shutil.copytree(good_dir / name, tmp_path / name)
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def app(checkpoints: Path) -> Callable[..., AppTest]:
    """`app(model)` → the app on the induction step with `model` chosen."""

    def make(model: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.session_state["lesson_predict"] = False  # figures at once: tests/test_lesson_quiz.py asks first
        at.query_params.update({"model": model, "lesson": SLUG})
        at.run()
        return ok(at.switch_page(PAGE).run())

    return make


def switched_off(at: AppTest):
    """The table of the second copy's loss with heads switched off."""
    return next(d.value for d in at.dataframe if LOSS in d.value.columns)


def best_line(at: AppTest) -> str:
    return next(m.value for m in at.markdown if "induction head of" in m.value)


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def charts(at: AppTest) -> dict[str, dict]:
    return {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def best_head(path: Path) -> tuple[str, int, float]:
    """The best induction head of the checkpoint at `path`, measured here on the probe as layer L, head H."""
    ckpt = load_checkpoint(path)
    report = measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)
    sublayer, head, score = report.best(report.induction)
    return f"layer {int(sublayer.split('.')[2]) + 1}, head {head + 1}", head, score


def test_the_step_comes_before_the_circuit_and_needs_a_decoder_only_model() -> None:
    assert SLUGS[-2] == SLUG and STEPS[-2].title == "Induction heads: how a model copies from its own context"
    assert "Olsson et al. (2022" in STEPS[-2].text and STEPS[-2].needs == "decoder-only"


def test_the_induction_model_names_its_best_head_and_copies_worse_without_it(app, checkpoints: Path) -> None:
    at = app("induction")
    assert at.header[0].value == f"{len(STEPS) - 1}. {STEPS[-2].title}"
    name, _, score = best_head(checkpoints / "induction")
    assert (name, round(score, 2)) == ("layer 2, head 1", 0.83)  # the card's best head, found by the scores
    assert f"The induction head of induction: {name}** (induction score {score:.2f} on this run)" in best_line(at)
    assert not at.info  # it has an induction head and a run that recorded it
    table = switched_off(at)
    rows = dict(zip(table["switched off"], table[LOSS], strict=True))
    intact, without = rows["nothing (the intact model)"], rows["the induction head"]
    assert intact < 0.5 and without > intact  # the card's second copy costs 0.236 nats
    assert table.loc[table["switched off"] == "the induction head", "heads"].item() == name
    every = table[table["switched off"].str.startswith("every head")]
    assert every["heads"].item() == "layer 2, heads 1, 2, 3, 4" and every[LOSS].item() > 5 and every[TOP1].item() < 0.05
    assert {"lesson_induction_head", "lesson_induction_curve", "lesson_induction_steps"} <= set(charts(at))


def test_the_heatmap_is_the_best_head_on_the_repeated_run(app) -> None:
    at = app("induction")
    run = at.code[0].value.split("\n")
    assert run[0] == "<s>" and run[1] == run[2] and len(run[1].split()) == 50  # <s>, R, R
    fig = charts(at)["lesson_induction_head"]
    w = decode_typed_array(fig["data"][0]["z"])
    assert w.shape == (101, 101) and fig["layout"]["title"]["text"].startswith("Decoder layer 2, head 1")
    t = np.arange(52, 101)  # the second copy's queries after its first token
    assert w[t, t - 49].mean() > 0.8 > w[t, t - 1].mean()  # the offset diagonal, not the previous token


def test_the_training_run_shows_the_head_forming_and_links_to_its_snapshot(app, checkpoints: Path) -> None:
    at = app("induction")
    strip = charts(at)["lesson_induction_steps"]
    labels = [a["text"].replace("<br>", " · ") for a in strip["layout"]["annotations"]]  # two lines in the strip
    assert [label.split(" · ")[0] for label in labels] == ["step 800", "step 1,100", "step 5,900"]
    scores = [float(label.rsplit(" ", 1)[1]) for label in labels]
    assert scores[0] < 0.1 < scores[1] < scores[2] and scores[2] == pytest.approx(0.83, abs=0.01)
    link = next(m.value for m in at.markdown if "Training steps page" in m.value)
    assert link.endswith("(training?model=induction&step=1100)")
    training = AppTest.from_file(APP, default_timeout=120)
    training.query_params.update({"model": "induction", "step": "1100"})  # the link, opened
    training.run()
    assert ok(training.switch_page("views/training.py").run()).select_slider(key="step").value == 1100


def test_an_untrained_language_model_finds_its_best_head_and_says_it_does_not_copy(app, checkpoints: Path) -> None:
    at = app("lm-tiny")
    name, _, score = best_head(checkpoints / "lm-tiny")
    assert score < INDUCTION_AT
    assert f"The induction head of lm-tiny: {name}**" in best_line(at)
    assert "No head of lm-tiny scores" in at.info[0].value
    assert "records no induction probe" in at.info[1].value
    table = switched_off(at)  # no head scores INDUCTION_AT: no row switches every such head off
    assert table["switched off"].tolist() == [
        "nothing (the intact model)",
        "the induction head",
        "the best previous-token head",
    ]
    assert "lesson_induction_head" in charts(at) and "lesson_induction_curve" not in charts(at)
    at.button(key="lesson_switch_induction").click().run()  # "Switch to induction, which has one"
    assert at.selectbox(key="model").value == "induction" and "lesson_induction_curve" in charts(ok(at))


def test_a_run_that_measured_the_probe_but_grew_no_head_draws_its_curve(app, checkpoints: Path) -> None:
    card_path = checkpoints / "lm-tiny" / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    history = [{"step": s, "valid_loss": 3.0, "induction": 0.02, "copy_loss": [3.5, 3.4]} for s in (10, 20)]
    card["training"] = {**card.get("training", {}), "history": history}
    card_path.write_text(json.dumps(card), encoding="utf-8")
    at = app("lm-tiny")
    assert "lesson_induction_curve" in charts(at) and "lesson_induction_steps" not in charts(at)
    said = f"No head reached {INDUCTION_AT} in this run: no induction head formed."
    assert any(c.value.endswith(said) for c in at.caption)


def test_an_encoder_decoder_is_shown_the_step_on_a_decoder_only_model(app) -> None:
    at = app("translate-tiny")
    assert at.info[0].value.startswith("This step needs a decoder-only language model; the loaded model, ")
    assert "translate-tiny, is not (encoder-decoder" in at.info[0].value
    assert "Shown here on induction, loaded for this step" in at.info[0].value  # the first that fits
    assert "lesson_induction_head" in charts(at) and at.selectbox(key="model").value == "translate-tiny"
    switches = [b.label for b in at.button if b.key.startswith("lesson_switch_")]
    assert switches == ["Switch the app to induction"]
    at.button(key="lesson_switch_induction").click().run()
    assert at.selectbox(key="model").value == "induction" and "lesson_induction_head" in charts(ok(at))


def test_the_probe_is_run_once_however_often_the_step_is_drawn(app, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr("analysis.lesson.copying", lambda *args: calls.append(args) or copying(*args))
    at = app("induction")
    at.run()
    at.selectbox(key="lesson_jump").select("embeddings").run()
    at.selectbox(key="lesson_jump").select(SLUG).run()
    assert len(switched_off(ok(at))) == 4 and len(calls) == 1


def test_every_step_draws_the_induction_model_on_a_sentence_it_knows(app) -> None:
    at = app("induction")
    for slug in SLUGS[:-2]:  # the last two read the probe's run, no sentence
        at.selectbox(key="lesson_jump").select(slug).run()
        assert ok(at).header[0].value.endswith(STEPS[SLUGS.index(slug)].title)
        borrowed = any("Shown here on" in i.value for i in at.info)  # a step of another model's, on that model
        if slug != "quadratic-cost" and not borrowed:  # no sentence read; a step another model shows
            assert any(t.value == f"The sentence: {SENTENCES['induction']}" for t in at.text), slug


def test_the_circuit_step_traces_the_induction_models_circuit(app) -> None:
    """The previous-token head first among the induction head's K-composition sources, but barely; no head restores
    the copy alone while the induction heads together do: the step says the model spreads the circuit; the best
    induction head writes the copied word most (analysis.lesson.circuit, told by analysis.circuit_told)."""
    at = app("induction")
    at.selectbox(key="lesson_jump").select("induction-circuit").run()
    ok(at)
    text = (" ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)).replace("\\", "")
    assert "1. The previous-token head: layer 1, head 4" in text and "induction head, layer 2, head 1" in text
    assert "layer 2, head 1 reads most from the previous-token head, layer 1, head 4 (0.196), but barely" in text
    assert "feeds the keys" not in text
    sources = next(d.value for d in at.dataframe if "K-composition" in d.value.columns)
    assert sources.iloc[0]["earlier head"] == "layer 1, head 4"
    restored = re.search(r"(\d\.\d\d) patched together: the model spreads the circuit over several heads", text)
    assert restored and float(restored[1]) > 0.9
    assert "The largest is the induction head's, layer 2, head 1" in text
    assert "What to take away**: This model copies a repeated word" in text and "several heads share" in text
    keys = {el.key for el in at.get("plotly_chart")}
    assert {"lesson_circuit_previous", "lesson_circuit_patching", "lesson_circuit_attribution"} <= keys


# analysis.lesson --------------------------------------------------------------------------------------------------


def test_the_switched_off_losses_are_the_ablated_models_own(tiny_checkpoints) -> None:
    ckpt = load_checkpoint(tiny_checkpoints["decoder-only"])
    report = measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)
    seen = copying(ckpt, report)
    assert seen.runs[0].what == "intact" and seen.runs[0].loss == pytest.approx(report.second_copy_loss, rel=1e-5)
    assert seen.first_copy_loss == pytest.approx(report.first_copy_loss, rel=1e-5)
    ids = repeated_tokens(ckpt.config.vocab_size, ckpt.config.bos_id, report.length)
    sublayer, head = seen.runs[1].heads[0]
    assert (sublayer, head) == (seen.sublayer, seen.head) == report.best(report.induction)[:2]
    with torch.inference_mode():
        logits, _ = ckpt.model(ids, ablate={sublayer: Ablation((head,))})
    assert seen.runs[1].loss == pytest.approx(copy_losses(logits, ids, report.length)[1], rel=1e-5)
    assert seen.weights.shape == (2 * report.length + 1,) * 2 and len(seen.pieces) == 2 * report.length + 1


def test_the_formation_is_found_where_the_score_passes_half_its_last_value() -> None:
    card = json.loads((ROOT / "checkpoints" / "induction" / "card.json").read_text(encoding="utf-8"))
    snapshots = [0, 400, 700, 800, 900, 1000, 1100, 1200, 1400, 2000, 3000, 5900]
    formed = formation(card["training"]["history"], snapshots)
    assert (formed.formed, formed.forming, formed.shown) == (1100, 1100, (800, 1100, 5900))
    assert len(formed.steps) == len(formed.induction) == len(formed.second_copy_loss) == 60
    assert formation(card["training"]["history"], []).shown == () and formation([{"step": 1}], [0]) is None
    low = formation([{"step": 1, "induction": 0.1, "copy_loss": [7.0, 7.0]}], [0, 1])
    assert (low.steps, low.formed, low.forming, low.shown) == ((1,), None, None, ())  # no head reached INDUCTION_AT

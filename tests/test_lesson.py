"""The Lesson page in AppTest on tiny checkpoints (every step draws real content; previous/next, the step list and
the URL move through it; a step the model cannot show offers one that can), course.lesson's steps and
analysis.lesson's model work."""

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

from analysis.analyze import analyze
from analysis.lesson import attention_cost, cache_timing, cost_lengths, stream
from course.lesson import SENTENCES, SLUGS, STEPS, TEXTS, step_index
from inference.checkpoint import load_checkpoint
from inference.text import clean_text, encode_first_stack
from training.tiny import make_tiny_checkpoint
from viz.labels import display_piece
from viz.lesson import cache_work, shift_frame
from viz.style import PROJECTOR_FONT

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGE = "views/lesson.py"
LM, ED = "lm-tiny", "translate-tiny"


@pytest.fixture
def app(good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., AppTest]:
    """`app(**query_params)` → the app on the Lesson page, run against `good_dir`."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make(**query: str) -> AppTest:  # reads $ATLAS_CHECKPOINTS when run: a test may point it elsewhere first
        at = AppTest.from_file(APP, default_timeout=60)
        at.session_state["lesson_predict"] = False  # figures at once: tests/test_lesson_quiz.py asks first
        at.query_params.update(query)
        at.run()
        return at.switch_page(PAGE).run()

    return make


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def charts(at: AppTest) -> dict[str, dict]:
    return {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def heading(at: AppTest) -> str:
    return at.header[0].value


def step_line(at: AppTest) -> str:
    return next(t.value for t in at.text if t.value.startswith("Step "))


def progress(at: AppTest) -> str:
    return at.get("progress")[0].proto.text


SLOW = [pytest.mark.slow]
FITS = {(LM, "cross-attention"): False, (ED, "next-token"): False, (ED, "induction-heads"): False}
FITS[ED, "induction-circuit"] = False
# The everyday tier draws every step on the language model, and on the translator the steps it draws differently
# (its own cross-attention, and those it borrows a model for); the translator's other steps run in CI (slow).
EVERY_STEP = [
    pytest.param(slug, model, marks=[] if model == LM or slug == "cross-attention" or (model, slug) in FITS else SLOW)
    for slug in SLUGS
    for model in (LM, ED)
]


@pytest.mark.parametrize(("slug", "model"), EVERY_STEP)
def test_every_step_draws_its_live_view_on_the_loaded_model_or_one_that_has_it(app, model: str, slug: str) -> None:
    at = ok(app(model=model, lesson=slug))
    index = SLUGS.index(slug)
    assert heading(at) == f"{index + 1}. {STEPS[index].title}"
    assert progress(at).startswith(f"Step {index + 1} of {len(STEPS)}")
    assert at.markdown[0].value == STEPS[index].text  # the paragraph
    drawn = len(charts(at)) + len(at.dataframe)
    if FITS.get((model, slug), True):
        assert drawn >= 1, "no chart or table"
        assert any("Needs" in c.value for c in at.caption)
    else:  # shown on a model that has it, loaded for this step: no dead end, the app keeps its model
        other = ED if model == LM else LM
        assert drawn >= 1 and "needs" in at.info[0].value and f"Shown here on {other}" in at.info[0].value
        assert [b.label for b in at.button if b.key.startswith("lesson_switch_")] == [f"Switch the app to {other}"]
        assert at.selectbox(key="model").value == model
    assert at.query_params["lesson"] == slug


def test_next_and_previous_move_one_step_and_the_url_follows(app) -> None:
    at = ok(app())
    assert heading(at).startswith("1. ") and at.query_params["lesson"] == "embeddings"
    assert at.button(key="lesson_prev_top").disabled
    at.button(key="lesson_next_top").click().run()
    assert heading(ok(at)).startswith("2. ") and at.query_params["lesson"] == SLUGS[1]
    at.button(key="lesson_next_bottom").click().run()
    assert heading(ok(at)).startswith("3. ") and at.query_params["lesson"] == SLUGS[2]
    at.button(key="lesson_prev_top").click().run()
    assert heading(ok(at)).startswith("2. ")
    at.selectbox(key="lesson_jump").select("kv-cache").run()
    assert heading(ok(at)).startswith("11. ") and at.query_params["lesson"] == "kv-cache"
    assert at.selectbox(key="lesson_jump").value == "kv-cache"


def test_the_step_is_kept_while_another_page_is_shown(app) -> None:
    at = ok(app(lesson="multi-head"))
    at.switch_page("views/explore.py").run()
    assert at.query_params["lesson"] == "multi-head"
    at.switch_page(PAGE).run()
    assert heading(ok(at)) == "6. Multi-head attention: split and concatenate"
    assert at.selectbox(key="lesson_jump").value == "multi-head"


@pytest.mark.parametrize("slug", ["embeddings", "no-peek-mask", "kv-cache", "quadratic-cost"])
def test_projector_mode_draws_the_lesson_in_large_type(app, slug: str) -> None:
    at = ok(app(model=ED, lesson=slug, projector="1"))
    drawn = charts(at)
    assert drawn and all(fig["layout"]["font"]["size"] == PROJECTOR_FONT for fig in drawn.values())


def test_the_last_step_has_no_next(app) -> None:
    at = ok(app(lesson=SLUGS[-1]))
    assert at.button(key="lesson_next_top").disabled and not at.button(key="lesson_prev_top").disabled


def test_a_linked_step_opens_and_an_unknown_one_says_so(app) -> None:
    assert heading(ok(app(lesson="no-peek-mask"))) == "4. No-peek mask"
    at = app(lesson="<b>nope</b>")
    assert heading(at).startswith("1. ") and at.query_params["lesson"] == "embeddings"
    assert "There is no lesson step “bnopeb”" in at.warning[0].value


def test_a_step_needing_another_model_switches_the_sidebar_to_one(app) -> None:
    at = ok(app(model=LM, lesson="cross-attention"))
    at.button(key=f"lesson_switch_{ED}").click().run()
    assert at.selectbox(key="model").value == ED and at.query_params["model"] == ED
    assert "lesson_cross" in charts(ok(at)) and heading(at) == "9. Cross-attention"


@pytest.fixture(scope="module")
def learned_dir(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoints) -> Path:
    """A folder with a language model of learned positions and nothing else."""
    root = tmp_path_factory.mktemp("learned")
    make_tiny_checkpoint(root / "lm-learned", "decoder-only", seed=0, positional="learned")
    return root


def test_the_positions_step_draws_a_sinusoidal_model_loaded_for_it(
    app, learned_dir: Path, good_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(good_dir / ED, learned_dir / ED, dirs_exist_ok=True)
    try:
        monkeypatch.setenv("ATLAS_CHECKPOINTS", str(learned_dir))
        at = ok(app(model="lm-learned", lesson="positional-encoding"))
        assert "sinusoidal positions" in at.info[0].value and f"Shown here on {ED}" in at.info[0].value
        assert "lesson_positional" in charts(at) and at.selectbox(key="model").value == "lm-learned"
        at.button(key=f"lesson_switch_{ED}").click().run()
        assert at.selectbox(key="model").value == ED and not ok(at).info
    finally:
        shutil.rmtree(learned_dir / ED)


def test_a_step_no_checkpoint_can_show_says_so(app, learned_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(learned_dir))
    at = ok(app(model="lm-learned", lesson="cross-attention"))
    assert "No checkpoint in" in at.warning[0].value and "an encoder-decoder" in at.warning[0].value
    assert not [b for b in at.button if b.key.startswith("lesson_switch_")] and not charts(at)


def test_the_no_peek_view_greys_exactly_the_masked_cells(app) -> None:
    at = ok(app(model=LM, lesson="no-peek-mask", text="The cat sat."))
    at.radio(key="lesson_source").set_value("yours").run()
    fig = charts(ok(at))["lesson_nopeek_head"]
    w = decode_typed_array(fig["data"][0]["z"])
    above = np.triu(np.ones_like(w, dtype=bool), 1)
    assert np.isnan(w[above]).all() and not np.isnan(w[~above]).any()
    np.testing.assert_allclose(w[~above].reshape(-1).sum(), w.shape[0], atol=1e-4)  # every row still sums to 1
    assert len(fig["data"][1]["text"]) == above.sum()  # one ✗ per masked cell


def test_the_scaled_dot_product_step_opens_on_a_query_the_mask_changes(app) -> None:
    """Step 5 draws a query whose row the no-peek mask cuts (some keys −∞, some not), as Attention math opens."""
    at = ok(app(model=LM, lesson="scaled-dot-product", text="The cat sat on the mat."))
    masked = [row == ["−∞"] for row in charts(at)["lesson_steps"]["data"][1]["text"]]
    assert any(masked) and not all(masked), masked
    assert any("as the query" in c.value and "(" in c.value for c in at.caption)


def test_the_student_text_replaces_the_lesson_sentence(app, good_dir: Path) -> None:
    at = ok(app(model=LM, lesson="embeddings"))
    at.text_area(key="text").input("Dogs bark.").run()
    ckpt = load_checkpoint(good_dir / LM)
    pieces = lambda text: [display_piece(p) for p in stream(ckpt, text).pieces]
    assert ok(at).dataframe[0].value["token"].tolist() == pieces(SENTENCES["lm"])  # the lesson's
    at.radio(key="lesson_source").set_value("yours").run()
    assert ok(at).dataframe[0].value["token"].tolist() == pieces("Dogs bark.")
    assert at.query_params["sentence"] == "yours"  # a copied link keeps whose sentence it is


@pytest.mark.parametrize("model", [LM, ED])
def test_the_cache_step_steps_the_decoder_and_the_cache_grows(app, model: str) -> None:
    at = ok(app(model=model, lesson="kv-cache"))
    slider = at.slider(key="lesson_kv_step")
    last = int(slider.max)
    cache = charts(at)["lesson_cache"]
    held = cache["data"][0]["y"]
    assert len(held) == last and all(b > a for a, b in zip(held, held[1:]))  # one position more per step
    assert step_line(at).startswith(f"Step {last} of {last}: fed")
    slider.set_value(1).run()
    assert step_line(ok(at)).startswith(f"Step 1 of {last}: fed") and at.query_params["kv_step"] == "1"
    assert charts(at)["lesson_cache"]["data"][1]["x"] == [1]  # the chosen step marked
    assert [m.label for m in at.metric][1:] == ["without it", "saved"] and at.metric[0].value.endswith(" ms")


def test_an_empty_text_of_the_student_gets_a_message_not_a_traceback(app) -> None:
    at = ok(app(model=ED, lesson="no-peek-mask"))
    at.text_area(key="text").input("   ").run()
    at.radio(key="lesson_source").set_value("yours").run()
    assert not at.exception and "The text is empty" in at.error[0].value
    assert heading(at) == "4. No-peek mask" and at.button(key="lesson_next_bottom")  # the lesson goes on


def test_the_cost_step_plots_the_measured_quadratic(app) -> None:
    at = ok(app(model=ED, lesson="quadratic-cost"))
    table = at.dataframe[0].value
    assert len(table) == 8 and (table["time (ms)"] > 0).all()
    n = table["n"].to_numpy(dtype=float)
    np.testing.assert_allclose(table["scores + weights (KiB)"], 2 * 4 * 4 * n**2 / 1024)  # 4 heads, 2 float32 maps
    assert {"lesson_time", "lesson_memory"} <= set(charts(at))
    said = next(c.value for c in at.caption if "the measured time grows" in c.value)
    grew = re.search(r"From n = (\d+) to n = (\d+) the measured time grows (\d+\.\d)× and the memory (\d\.\d)×", said)
    ms = dict(zip(table["n"], table["time (ms)"], strict=True))
    low, high = int(grew[1]), int(grew[2])
    assert (low, high) == (n[3], n[-1])  # the measured length nearest half the longest, and the longest
    assert grew[3] == f"{ms[high] / ms[low]:.1f}" and grew[4] == "4.0"  # the table's medians, as the figure draws them
    assert re.search(r"the median of \d runs at each of 8 lengths", said)


# course.lesson, analysis.lesson and viz.lesson ------------------------------------------------------------------


def test_steps_have_unique_slugs_in_curriculum_order() -> None:
    assert len(set(SLUGS)) == 14 and SLUGS[0] == "embeddings" and SLUGS[-2:] == ("induction-heads", "induction-circuit")
    assert step_index("kv-cache") == 10 and step_index("nope") is None and step_index(3) is None


def test_every_course_text_is_a_step_and_every_step_has_a_titled_paragraph() -> None:
    assert sorted(path.stem for path in TEXTS.glob("*.md")) == sorted(SLUGS)
    for step in STEPS:
        assert step.title and not step.title.startswith("#") and len(step.text) > 200, step.slug
        assert "\n" not in step.text, step.slug  # one paragraph: the file's wrapped lines joined as markdown does


def recorded(ckpt, text: str) -> tuple[str, dict[str, torch.Tensor]]:
    """The first stack's name and the activations of one forward pass of `text`, run here independently."""
    ids = torch.tensor([encode_first_stack(ckpt, clean_text(text).text, [])])
    with torch.inference_mode():
        if ckpt.config.has_cross_attention:
            _, trace = ckpt.model(ids, ids[:, :1], activations=True)
            return "encoder", trace.activations
        _, trace = ckpt.model(ids, activations=True)
    return "decoder", trace.activations


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("kind", ["decoder-only", "encoder-decoder"])
def test_the_lessons_numbers_are_the_recorded_activations(tmp_path: Path, kind: str, norm: str) -> None:
    ckpt = load_checkpoint(make_tiny_checkpoint(tmp_path / "tiny", kind, seed=3, norm=norm))
    text = "The cat sat on the mat."
    result = stream(ckpt, text)
    stack, acts = recorded(ckpt, text)
    assert result.stack == stack  # the page runs without attention records (faster kernels): equal to 1e-5
    own = lambda name: acts[name][0].numpy()
    np.testing.assert_allclose(result.embedded, own(f"{stack}.embed"), atol=1e-5)
    np.testing.assert_allclose(result.hidden, own(f"{stack}.layers.0.feed_forward.hidden"), atol=1e-5)
    np.testing.assert_allclose(result.output, own(f"{stack}.output"), atol=1e-5)
    n_layers = len(stack_layers(ckpt))
    length = lambda name: np.linalg.norm(own(name), axis=-1).mean()
    for i in range(n_layers):
        points = [("resid_pre", "self_attn.out", "resid_mid"), ("resid_mid", "feed_forward.out", "resid_post")]
        expected = [[length(f"{stack}.layers.{i}.{p}") for p in sub] for sub in points]
        np.testing.assert_allclose(result.norms[i], expected, rtol=1e-5)
    assert result.hidden.shape == (len(result.pieces), ckpt.config.d_ff) and (result.hidden >= 0).all()
    assert result.norms.shape == (n_layers, 2, 3) and (result.norms > 0).all()
    np.testing.assert_allclose(result.norms[1:, 0, 0], result.norms[:-1, 1, 2], rtol=1e-5)  # out of one = into next
    d, d_ff = ckpt.config.d_model, ckpt.config.d_ff
    assert result.weights == (4 * (d * d + d), d * d_ff + d_ff + d_ff * d + d)  # W^Q,K,V,O; W1, W2 with biases


def test_the_pages_feed_forward_units_are_the_recorded_hidden_layer(app, good_dir: Path) -> None:
    at = ok(app(model=LM, lesson="feed-forward"))
    fig = charts(at)["lesson_ffn"]
    _, acts = recorded(load_checkpoint(good_dir / LM), SENTENCES["lm"])
    hidden = acts["decoder.layers.0.feed_forward.hidden"][0].numpy()
    units = fig["data"][0]["customdata"][0]
    drawn = decode_typed_array(fig["data"][0]["z"])
    np.testing.assert_allclose(drawn, hidden[:, [u - 1 for _, u in units]], atol=1e-5)  # hover counts from 1
    at.selectbox(key="lesson_jump").select("embeddings").run()
    embedded = decode_typed_array(charts(ok(at))["lesson_embeddings"]["data"][0]["z"])
    np.testing.assert_allclose(embedded, acts["decoder.embed"][0].numpy()[:, : embedded.shape[1]], atol=1e-5)


def stack_layers(ckpt):
    return ckpt.model.encoder.layers if ckpt.config.has_cross_attention else ckpt.model.decoder.layers


def test_the_measured_memory_is_exactly_quadratic_and_the_time_grows(tiny_checkpoints) -> None:
    ckpt = load_checkpoint(tiny_checkpoints["decoder-only"])
    cost = attention_cost(ckpt, (8, 16, 32, 64))
    heads = ckpt.config.n_heads
    assert cost.bytes == tuple(2 * heads * 4 * n * n for n in (8, 16, 32, 64))
    assert cost.bytes_fit[0] == pytest.approx(8 * heads) and cost.growth(cost.bytes) == (32, 64, 4.0)
    assert cost.repeats == 7 and cost.growth(cost.seconds)[2] == pytest.approx(cost.seconds[-1] / cost.seconds[2])
    assert all(s > 0 for s in cost.seconds) and cost.sublayer == "decoder.layers.0.self_attn"
    assert cost.clock == "CPU"  # torch on one thread (conftest): the thread's CPU time, steady on a busy machine
    assert cost_lengths(512) == (64, 128, 192, 256, 320, 384, 448, 512) and cost_lengths(64)[-1] == 64
    with pytest.raises(ValueError, match="at least 3 lengths"):
        attention_cost(ckpt, (8, 16))


def test_the_most_active_units_are_drawn_in_unit_order(tiny_checkpoints) -> None:
    result = stream(load_checkpoint(tiny_checkpoints["decoder-only"]), "The cat sat on the mat.")
    units = result.active_units(5)
    total = result.hidden.sum(axis=0)
    assert list(units) == sorted(units) and len(units) == 5
    assert total[units].min() >= np.delete(total, units).max()


@pytest.mark.parametrize("kind", ["decoder-only", "encoder-decoder"])
def test_decoding_is_timed_with_and_without_the_cache_on_the_same_tokens(tiny_checkpoints, kind: str) -> None:
    ckpt = load_checkpoint(tiny_checkpoints[kind])
    timing = cache_timing(ckpt, "The cat sat on the mat.", 6)
    written = analyze(ckpt, "The cat sat on the mat.", continuation=6 if kind == "decoder-only" else 0)
    expected = written.generated if kind == "decoder-only" else min(6, len(written.target_pieces) - 1)
    assert timing.tokens == expected and timing.with_cache > 0 and timing.without_cache > 0
    assert timing.clock == "CPU"


def test_the_shift_table_pairs_each_token_with_the_next(tiny_checkpoints) -> None:
    analysis = analyze(load_checkpoint(tiny_checkpoints["decoder-only"]), "The cat sat on the mat.")
    frame = shift_frame(analysis)
    assert frame["target (next token)"].tolist()[:-1] == frame["input (reads)"].tolist()[1:]
    assert len(frame) == len(analysis.target_pieces) - 1


def test_the_cache_saves_the_recomputed_positions() -> None:
    fig = cache_work(prompt=5, steps=4, step=2)
    without, with_ = (list(fig.data[i].y) for i in (0, 1))
    assert without == [5, 11, 18, 26] and with_ == [5, 6, 7, 8]
    with pytest.raises(ValueError):
        cache_work(5, 4, 0)


def test_only_the_steps_that_need_a_decoder_a_kind_or_long_inputs_ask_for_another_model() -> None:
    import dataclasses

    from model.config import ModelConfig, Published

    ours = ModelConfig(kind="decoder-only", vocab_size=40, positional="learned")  # lm-english's kind
    switches = Published(activation="swiglu", norm_type="rms", bias=False)
    llama = dataclasses.replace(ours, positional="rotary", published=switches)
    bert = ModelConfig(kind="encoder-only", vocab_size=40, positional="learned", published=Published(activation="gelu"))
    for config in (ours, llama, bert):
        refused = {s.slug for s in STEPS if not s.fits(config)}
        assert refused <= {
            "positional-encoding", "no-peek-mask", "cross-attention", "next-token", "kv-cache", "induction-heads",
            "induction-circuit",
        }  # fmt: skip
    assert {"embeddings", "feed-forward", "residual-layernorm"} <= {s.slug for s in STEPS if s.fits(bert)}
    # seed 003's centre-word model reads four words, always: no padding, no decoder, no lengths to time
    centre = dataclasses.replace(bert, max_len=4, published=Published(embed_scale=False, sum_outputs=True))
    refused = {s.slug for s in STEPS if not s.fits(centre)}
    assert {"padding-mask", "no-peek-mask", "kv-cache", "quadratic-cost"} <= refused
    assert {"embeddings", "scaled-dot-product", "multi-head", "feed-forward"} <= {
        s.slug for s in STEPS if s.fits(centre)
    }

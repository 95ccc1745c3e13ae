"""The Streamlit app, every page and main interaction, driven by streamlit.testing.v1.AppTest on tiny checkpoints."""

from __future__ import annotations

import io
import json
import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from page_text import shown_text
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

import analysis.worker as worker_module
from analysis.analyze import analyze
from inference import catalog
from inference.checkpoint import load_checkpoint
from inference.decoding import Sampling
from ui import state
from ui.cache import Source, export_bytes, head_ranking
from ui.charts import AVERAGE
from viz.style import PROJECTOR_FONT

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LM, ED = "lm-tiny", "translate-tiny"


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart(at: AppTest, key: str) -> dict:
    charts = {el.key: el for el in at.get("plotly_chart")}
    assert key in charts, f"no chart {key!r}; charts: {list(charts)}"
    return json.loads(charts[key].proto.spec)


def z(fig: dict, trace: int = 0) -> np.ndarray:
    return decode_typed_array(fig["data"][trace]["z"])


def frame(at: AppTest, column: str):
    """The first table shown (st.dataframe, or a top-k's HTML table: ui.widgets.small_table) with a column named
    `column` (st.dataframe keys are not exposed by AppTest)."""
    shown = [df.value for df in at.dataframe] + [html_table(el.proto.body) for el in at.get("html")]
    for table in shown:
        if table is not None and column in table.columns:
            return table
    raise AssertionError(f"no table with {column!r}: {[list(t.columns) for t in shown if t is not None]}")


def html_table(body: str) -> pd.DataFrame | None:
    """The cells of the one <table> in an st.html body as text (numbers where they parse), or None."""

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    if "<table" not in body:
        return None
    parser = Cells()
    parser.feed(body)
    head, *rows = parser.rows
    frame = pd.DataFrame(rows, columns=head)
    for column in frame.columns:
        try:
            frame[column] = pd.to_numeric(frame[column])
        except (ValueError, TypeError):
            pass
    return frame


def errors(at: AppTest) -> str:
    """The page's error messages as a reader sees them (Markdown's backslash escapes removed)."""
    return shown_text(" ".join(e.value for e in at.error))


def context_for(folder: Path, text: str) -> Source:
    """The Source the sidebar builds for checkpoint folder `folder` and `text`."""
    return Source.checkpoint(catalog.Entry(folder.name, folder), load_checkpoint(folder), catalog.stamp(folder), text)


# Explore ------------------------------------------------------------------------------------------------------------


def test_explore_shows_one_head_predictions_and_every_head(app) -> None:
    at = ok(app())
    assert at.title[0].value == "Explore" and at.selectbox(key="model").value == LM
    head = chart(at, "head_chart")
    w = z(head)
    assert w.dtype == np.float32 and w.shape[0] == w.shape[1] == len(head["layout"]["yaxis"]["ticktext"])
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-5)
    assert np.triu(w, 1).max() == 0.0  # masked self-attention: nothing above the diagonal
    top = frame(at, "probability")
    assert len(top) == 5 and list(top.columns) == ["rank", "token", "id", "probability"]
    grid = chart(at, "grid")
    mosaic = z(grid)
    assert mosaic.dtype == np.uint8 and mosaic.shape == (2 * w.shape[0], 4 * w.shape[1])
    assert {b.key for b in at.get("download_button")} >= {"dl_csv", "dl_json", "dl_npz"}


def test_switching_layer_and_head_never_reruns_the_model(app, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = worker_module.analyze_many
    monkeypatch.setattr(worker_module, "analyze_many", lambda c, rs: calls.extend(r.text for r in rs) or real(c, rs))
    at = app()
    calls.clear()  # the opening text is analysed here unless an earlier test left it in the cache
    at.text_area(key="text").input("A fresh sentence for counting.").run()
    assert calls == ["A fresh sentence for counting."]
    at.selectbox(key="layer").select(1).run()
    at.selectbox(key="head").select(3).run()
    assert "layer 2, head 4" in chart(ok(at), "head_chart")["layout"]["title"]["text"].replace("<br>", " ")
    at.selectbox(key="head").select(AVERAGE).run()
    fig = chart(ok(at), "head_chart")
    assert "average of heads" in fig["layout"]["title"]["text"].replace("<br>", " ")
    np.testing.assert_allclose(z(fig).sum(axis=1), 1.0, atol=1e-5)
    assert len(calls) == 1


def test_predictions_follow_the_chosen_position(app, good_dir: Path) -> None:
    at = app()
    at.selectbox(key="position").select(2).run()
    expected = analyze(load_checkpoint(good_dir / LM), at.text_area(key="text").value).predictions[2]
    assert frame(ok(at), "probability")["id"].tolist() == [t.id for t in expected]


def test_a_new_text_never_keeps_a_position_that_names_another_token(app, good_dir: Path) -> None:
    """A position chosen on one text must not stay on another: "Next token after" would show another token's guess."""
    at = app()
    at.text_area(key="text").input("The cat sat.").run()
    at.selectbox(key="position").select(1).run()
    longer = "The cat sat on the mat and then it slept all day."
    at.text_area(key="text").input(longer).run()
    analysis = analyze(load_checkpoint(good_dir / LM), longer)
    last = len(analysis.target_pieces) - 1
    assert at.selectbox(key="position").value == last
    assert frame(ok(at), "probability")["id"].tolist() == [t.id for t in analysis.predictions[last]]
    assert f"position {last + 1} of {last + 1}" in " ".join(c.value for c in at.caption)
    restored = ok(app(model=LM, text=longer, pos="3"))  # a shared link keeps its position (1-based)
    assert restored.selectbox(key="position").value == 2
    assert frame(restored, "probability")["id"].tolist() == [t.id for t in analysis.predictions[2]]
    assert restored.query_params["pos"] == "3"


def test_file_names_and_step_numbers_count_from_one(app) -> None:
    at = app(model=ED, text="Where is the station?")
    at.selectbox(key="layer").select(1).run()
    at.selectbox(key="head").select(3).run()
    configs = {el.key: json.loads(el.proto.config) for el in at.get("plotly_chart")}
    assert configs["head_chart"]["toImageButtonOptions"]["filename"].endswith("L2-H4")
    assert frame(ok(at), "next")["step"].tolist()[0] == 1


def test_encoder_decoder_output_and_attention_types(app) -> None:
    at = app()
    at.selectbox(key="model").select(ED).run()
    ok(at)
    assert at.radio(key="attention").value == "decoder.cross_attn"
    steps = frame(at, "top guesses")
    assert at.code and len(steps) >= 1 and steps["top guesses"].str.count(" · ").min() == 4  # top 5 in one cell
    cross = z(chart(at, "head_chart"))
    at.radio(key="attention").set_value("encoder.self_attn").run()
    enc = z(chart(ok(at), "head_chart"))
    assert enc.shape == (cross.shape[1], cross.shape[1])  # the source tokens, both ways
    at.radio(key="attention").set_value("decoder.self_attn").run()
    assert z(chart(ok(at), "head_chart")).shape == (cross.shape[0], cross.shape[0])


# bad input ----------------------------------------------------------------------------------------------------------


def test_empty_text_gives_a_message_not_a_traceback(app) -> None:
    at = app()
    at.text_area(key="text").input(" \n\t ").run()
    assert "empty" in errors(ok(at)) and not at.get("plotly_chart")


def test_html_control_characters_and_emoji_are_shown_safely(app) -> None:
    at = app()
    at.text_area(key="text").input("<script>alert('x')</script> & <b>bold</b> 😀\x07").run()
    ok(at)
    assert any("control character" in i.value for i in at.info)
    for key in ("head_chart", "grid"):
        spec = json.dumps(chart(at, key))
        assert "<script" not in spec and "<b>" not in spec
    assert "&lt;0x" in json.dumps(chart(at, "head_chart"))  # byte pieces such as <0x3C>, escaped


def test_text_longer_than_max_len_is_cut_with_a_warning(app) -> None:
    at = app()
    at.text_area(key="text").input("the cat sat on the mat " * 40).run()
    assert any("cut" in w.value for w in ok(at).warning)
    assert z(chart(at, "head_chart")).shape == (64, 64)


def test_broken_checkpoints_and_an_empty_folder(app, good_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(good_dir / LM, tmp_path / "a-bad-config")
    (tmp_path / "a-bad-config" / "config.json").write_text("{", encoding="utf-8")
    shutil.copytree(good_dir / LM, tmp_path / "b-bad-weights")
    (tmp_path / "b-bad-weights" / "model.safetensors").write_bytes(b"not safetensors")
    at = ok(app(tmp_path))
    assert at.selectbox(key="model").options == ["a-bad-config (cannot be read)", "b-bad-weights"]
    assert "cannot be loaded" in errors(at) and "model.safetensors" in errors(at)  # the first readable-looking one
    assert "b-bad-weights/model.safetensors" in errors(at) and str(tmp_path) not in errors(at)  # no server paths
    at.selectbox(key="model").select("a-bad-config").run()
    assert "cannot be loaded" in errors(ok(at)) and "not valid JSON" in errors(at)
    assert "a-bad-config/config.json" in errors(at) and str(tmp_path) not in errors(at)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No checkpoints found in “empty”" in errors(ok(app(empty))) and str(tmp_path) not in errors(app(empty))


# the other pages ----------------------------------------------------------------------------------------------------


def test_a_link_to_a_model_this_server_lacks_says_so(app) -> None:
    """An unknown `model=` opens the default model with a warning naming the link's model, never silently."""
    at = ok(app(model="gpt-7" + "x" * 200))
    said = " ".join(w.value for w in at.sidebar.warning)
    assert "gpt-7xxx" in said and "does not have" in said and len(said) < 300
    assert at.selectbox(key="model").value in {LM, ED}
    assert not ok(app(model=LM)).sidebar.warning  # a model it has: nothing to say


def test_the_model_the_server_was_started_with_is_the_one_a_bare_link_opens(app, monkeypatch, good_dir) -> None:
    """`python -m atlas app --model NAME` sets ATLAS_MODEL: a link without `model=` opens NAME, a link naming
    another model still opens that one; an unknown NAME stops the command with one line naming the models."""
    for name in (LM, ED):
        monkeypatch.setenv("ATLAS_MODEL", name)
        assert ok(app()).selectbox(key="model").value == name
    assert ok(app(model=LM)).selectbox(key="model").value == LM


def test_an_unknown_model_for_the_server_is_refused_in_one_line(good_dir, monkeypatch, capsys) -> None:
    from ui import serve

    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    monkeypatch.delenv("ATLAS_MODEL", raising=False)
    assert serve.main(["--model", "gpt-7"]) == 2
    err = capsys.readouterr().err.strip()
    assert "gpt-7" in err and LM in err and ED in err and "\n" not in err
    assert "ATLAS_MODEL" not in os.environ


def test_attention_math_page(app) -> None:
    at = app()
    at.switch_page("views/attention_math.py").run()
    ok(at)
    assert len(at.latex) >= 2 and any("softmax" in latex.value for latex in at.latex)  # the formula, under the figure
    # It opens on a query whose row the no-peek mask changes: some keys allowed, some hidden (not the last token,
    # whose row hides nothing).
    opened = at.selectbox(key="query").value
    steps = chart(ok(at), "steps_chart")
    masked = [row == ["−∞"] for row in steps["data"][1]["text"]]
    assert 0 < opened < len(at.selectbox(key="query").options) - 1 and any(masked) and not all(masked)
    at.selectbox(key="query").select(0).run()
    assert at.query_params["q"] == "1"  # as labelled: the first token
    steps = chart(ok(at), "steps_chart")
    assert steps["data"][1]["text"][1] == ["−∞"] and steps["data"][1]["text"][0] != ["−∞"]
    np.testing.assert_allclose(z(steps, 2).sum(), 1.0, atol=1e-5)
    assert chart(at, "output_chart")["data"][0]["z"]
    assert frame(at, "weight")["weight"].sum() == pytest.approx(1.0, abs=1e-5)


def test_positional_encoding_page(app) -> None:
    at = app()
    at.switch_page("views/positional.py").run()
    assert z(chart(ok(at), "pe_heatmap")).shape == (64, 32)
    assert len(chart(at, "pe_curves")["data"]) == 4
    at.slider(key="pe_positions").set_value(10).run()
    at.radio(key="pe_metric").set_value("dot product").run()
    ok(at)
    assert z(chart(at, "pe_heatmap")).shape == (10, 32)
    assert z(chart(at, "pe_similarity")).shape == (10, 10)


def test_masks_page_with_a_padded_batch(app) -> None:
    at = app()
    at.switch_page("views/masks.py").run()
    mask = z(chart(ok(at), "mask_decoder_self_attn"))
    assert mask.shape[0] == mask.shape[1] and mask.dtype == np.uint8 and (mask == np.tril(mask)).all()
    padding = z(chart(at, "mask_padding"))
    assert padding.shape[0] == 2 and padding[0].all() and not padding[1].all()
    at.text_input(key="second_text").input("").run()
    assert "Second sentence" in errors(ok(at))


def test_the_masks_page_opens_on_a_mask_that_forbids_something(app) -> None:
    """A translator's encoder mask is all ✓ on one unpadded text: the first tab is the decoder's no-peek mask."""
    at = app(model=ED)
    at.switch_page("views/masks.py").run()
    labels = [t.label for t in ok(at).tabs]
    assert labels[0].startswith("Decoder self") and any(label.startswith("Encoder") for label in labels), labels


def test_head_statistics_open_a_head_on_explore(app) -> None:
    at = app()
    at.switch_page("views/head_stats.py").run()
    table = frame(ok(at), "entropy_bits")
    assert len(table) == 8 and {"entropy_bits", "previous_token", "first_token", "diagonal"} <= set(table.columns)
    at.selectbox(key="stats_pick").select(6).run()  # layer 1, head 2
    at.button(key="open_head").click().run()
    ok(at)
    assert at.title[0].value == "Explore"
    assert "layer 2, head 3" in chart(at, "head_chart")["layout"]["title"]["text"].replace("<br>", " ")


# sharing ------------------------------------------------------------------------------------------------------------


def test_the_url_keeps_and_restores_the_view(app) -> None:
    at = app()
    at.selectbox(key="layer").select(1).run()
    at.selectbox(key="head").select(2).run()
    assert {k: at.query_params[k] for k in ("model", "L", "H")} == {"model": LM, "L": "2", "H": "3"}
    assert at.query_params["text"] == at.text_area(key="text").value
    restored = ok(app(model=ED, text="Where is the station?", attention="encoder.self_attn", L="2", H="4"))
    assert restored.selectbox(key="model").value == ED and restored.radio(key="attention").value == "encoder.self_attn"
    assert "layer 2, head 4" in chart(restored, "head_chart")["layout"]["title"]["text"].replace("<br>", " ")


def test_a_link_keeps_another_pages_choice_until_that_page_is_opened(app) -> None:
    at = ok(app(text="the cat sat on the mat", paper_q="3", rollout_L="1"))
    assert at.query_params["paper_q"] == "3"  # Explore has no such widget: the link keeps it
    at.switch_page("views/paper.py").run()
    assert ok(at).selectbox(key="paper_query").value == 2
    assert at.query_params["paper_q"] == "3"


@pytest.mark.parametrize(
    "page",
    ["views/explore.py", "views/paper.py", "views/attention_math.py", "views/masks.py", "views/rollout.py"]
    + ["views/head_stats.py", "views/ablation.py", "views/compare.py", "views/training.py"],
)
def test_a_rerun_looks_the_analysis_of_the_text_up_once(app, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page gets the Analysis once and hands it to every widget and chart."""
    text = "the cat sat on the mat"
    lookups = []
    real = worker_module.ModelWorker.cached
    monkeypatch.setattr(
        worker_module.ModelWorker, "cached", lambda w, t, *a, **k: lookups.append(t) or real(w, t, *a, **k)
    )
    at = app(text=text)
    at.switch_page(page).run()
    lookups.clear()
    at.run()
    assert ok(at).title and lookups.count(text) == 1


def test_a_key_declared_twice_differently_is_refused() -> None:
    assert state.url_key("test_only_number", int) == "test_only_number"
    state.url_key("test_only_number", int)  # a page declares its keys again on every rerun
    with pytest.raises(ValueError, match="declared twice"):
        state.session_key("test_only_number")


def test_exports_are_the_documented_formats(good_dir: Path) -> None:
    source = context_for(good_dir / ED, "abc")
    data = json.loads(export_bytes(source, "json"))
    assert data["format"] == 3 and len(data["attention"]) == 6
    arrays = np.load(io.BytesIO(export_bytes(source, "npz")))
    assert arrays["decoder.layers.1.cross_attn.weights"].ndim == 3


def test_an_unexpected_error_is_a_message_not_a_traceback() -> None:
    def script() -> None:
        from ui import errors

        @errors.safe
        def broken() -> None:
            raise RuntimeError("boom")

        broken()

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception and "RuntimeError: boom" in errors(at)


# Compare ------------------------------------------------------------------------------------------------------------


def test_compare_opens_on_the_presets_minimal_pair_and_follows_a_new_preset(app) -> None:
    at = app(text="The cat sat on the mat.")
    at.switch_page("views/compare.py").run()
    assert at.text_input(key="compare").value == "The dog sat on the mat."
    assert "compare_difference" in {el.key for el in ok(at).get("plotly_chart")}
    at.text_area(key="text").input("She opened the door and saw").run()
    assert at.text_input(key="compare").value == "He opened the door and saw"  # the default partner follows
    at.text_input(key="compare").input("She closed the door and saw").run()
    at.text_area(key="text").input("The cat sat on the mat.").run()
    assert at.text_input(key="compare").value == "She closed the door and saw"  # a typed one stays


def test_compare_shows_both_heads_and_their_difference_where_tokens_align(app, good_dir: Path) -> None:
    at = app(text="the cat sat on the mat")
    at.switch_page("views/compare.py").run()
    at.text_input(key="compare").input("the bat sat on the mat").run()
    a, b = chart(ok(at), "compare_first"), chart(at, "compare_second")
    ckpt = load_checkpoint(good_dir / LM)
    first, second = analyze(ckpt, "the cat sat on the mat"), analyze(ckpt, "the bat sat on the mat")
    sublayer = "decoder.layers.0.self_attn"
    np.testing.assert_allclose(z(a), first.sublayers[sublayer].weights[0], atol=1e-6)
    np.testing.assert_allclose(z(b), second.sublayers[sublayer].weights[0], atol=1e-6)
    assert len(first.target_pieces) == len(second.target_pieces)  # aligned: the difference is drawn
    np.testing.assert_allclose(z(chart(at, "compare_difference")), z(b) - z(a), atol=1e-6)
    longer = "a much longer second text than the first one was"
    at.text_input(key="compare").input(longer).run()
    assert "different token counts" in " ".join(c.value for c in ok(at).caption)
    n = len(first.target_pieces)  # the aligned part: the first text's positions, matched by position
    third = analyze(ckpt, longer).sublayers[sublayer].weights[0][:n, :n]
    np.testing.assert_allclose(z(chart(at, "compare_difference")), third - z(a), atol=1e-6)
    assert at.query_params["compare"] == longer
    at.text_input(key="compare").input("").run()
    assert "Second text" in errors(ok(at))
    at.button(key="compare_pair").click().run()
    assert at.text_area(key="text").value.endswith("too tired.") and at.text_input(key="compare").value.endswith(
        "wide."
    )


# Generate -----------------------------------------------------------------------------------------------------------


def test_generate_writes_a_continuation_and_steps_through_it(app, good_dir: Path) -> None:
    at = app(text="the cat sat")
    at.switch_page("views/generate.py").run()
    at.number_input(key="gen_tokens").set_value(5).run()
    assert ok(at).radio(key="gen_mode").value == "sampling", "the page opens on sampling"
    at.radio(key="gen_mode").set_value("greedy").run()
    assert "Holtzman et al. 2020" in " ".join(c.value for c in ok(at).caption), "why greedy text repeats"
    ckpt = load_checkpoint(good_dir / LM)
    written = analyze(ckpt, "the cat sat", continuation=5)
    assert written.continuation in at.code[0].value and written.generated > 1
    first = len(written.target_pieces) - written.generated
    at.slider(key="gen_step").set_value(2).run()
    position = first  # step 2 feeds the first written token
    row = chart(ok(at), "gen_self_row")["data"][0]["y"]
    expected = written.sublayers["decoder.layers.0.self_attn"].weights[0, position, : position + 1]
    np.testing.assert_allclose(decode_typed_array(row), expected, atol=1e-6)
    assert frame(at, "probability")["id"].tolist() == [t.id for t in written.predictions[position]]
    assert f"{position + 1} positions" in " ".join(c.value for c in at.caption)
    at.radio(key="gen_mode").set_value("sampling").run()
    at.number_input(key="gen_seed").set_value(7).run()
    once = at.code[0].value
    at.number_input(key="gen_seed").set_value(8).run()
    at.number_input(key="gen_seed").set_value(7).run()
    assert ok(at).code[0].value == once  # the same seed writes the same text


def test_generate_shows_the_layer_and_head_chosen_on_explore(app, good_dir: Path) -> None:
    at = app(text="the cat sat")
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(1).run()
    at.switch_page("views/generate.py").run()
    assert (ok(at).selectbox(key="layer").value, at.selectbox(key="head").value) == (1, 1)
    assert "layer 2,<br>head 2" in chart(at, "gen_self_row")["layout"]["title"]["text"]  # a wrapped title
    at.selectbox(key="head").set_value(0).run()
    at.switch_page("views/explore.py").run()
    assert ok(at).selectbox(key="head").value == 0  # and back: the choice made on Generate


def test_generate_steps_through_the_translators_output_with_its_cross_attention(app) -> None:
    at = app(model=ED, text="Where is the station?")
    at.switch_page("views/generate.py").run()
    assert "gen_cross_row" in {el.key for el in ok(at).get("plotly_chart")}
    at.slider(key="gen_step").set_value(1).run()
    assert "Cross-attention's keys and values" in " ".join(c.value for c in ok(at).caption)


def test_a_link_restores_the_generate_choices_and_absurd_values_are_kept_in_range(app, good_dir: Path) -> None:
    at = app(model=LM, text="the cat sat", gen_tokens="4", gen_mode="sampling", gen_seed="7", gen_temperature="0.5")
    at.switch_page("views/generate.py").run()
    ckpt = load_checkpoint(good_dir / LM)
    expected = analyze(ckpt, "the cat sat", continuation=4, sampling=Sampling(0.5, 40, 7))
    assert expected.continuation in ok(at).code[0].value
    assert at.query_params["gen_seed"] == "7" and at.query_params["gen_mode"] == "sampling"
    wild = app(model=LM, text="the cat sat", gen_tokens="99999", gen_mode="nonsense", gen_temperature="-3")
    wild.switch_page("views/generate.py").run()
    ok(wild)
    assert wild.number_input(key="gen_tokens").value == 32 and wild.radio(key="gen_mode").value == "sampling"


# Head ablation ------------------------------------------------------------------------------------------------------


def test_ablation_page_switches_heads_off_and_ranks_them(app, good_dir: Path) -> None:
    from analysis.ablation import ablation_effect

    at = app(text="the cat sat on the mat")
    at.switch_page("views/ablation.py").run()
    assert float(ok(at).metric[0].value) == 0.0  # nothing switched off yet
    at.multiselect(key="ablate_heads").select("decoder.layers.0.self_attn:1").run()
    expected = ablation_effect(
        load_checkpoint(good_dir / LM), "the cat sat on the mat", {"decoder.layers.0.self_attn": (1,)}
    )
    assert float(ok(at).metric[0].value) == pytest.approx(expected.kl, abs=1e-4) and expected.kl > 0
    after = [df.value for df in at.dataframe if "probability" in df.value.columns][1]
    assert after["probability"].tolist() == pytest.approx([p.prob for p in expected.after_top], abs=1e-6)
    at.button(key="ablate_rank").click().run()
    ranking = frame(ok(at), "KL (nats)")
    assert len(ranking) == 8 and ranking["KL (nats)"].is_monotonic_decreasing
    assert set(ranking["layer"]) == {1, 2} and set(ranking["head"]) == {1, 2, 3, 4}  # counted from 1
    assert at.query_params["ablate_heads"] == "decoder.self_attn-L1-H2" and at.query_params["ablate_mode"] == "zero"
    at.multiselect(key="ablate_heads").select("decoder.layers.1.self_attn:0").run()
    assert frame(ok(at), "KL (nats)").equals(ranking), "the ranking stays for the same text and mode"
    at.radio(key="ablate_mode").set_value("mean").run()
    assert not [df for df in ok(at).dataframe if "KL (nats)" in df.value.columns], "another mode: rank again"
    translator = app(model=ED, text="Where is the station?")
    translator.switch_page("views/ablation.py").run()
    translator.multiselect(key="ablate_heads").select("decoder.layers.0.cross_attn:0").run()
    steps = frame(ok(translator), "log p ablated")
    assert len(steps) >= 1 and len(translator.code) == 2


def test_head_ranking_runs_a_worker_job_per_sublayer_with_progress(good_dir: Path) -> None:
    """The ranking the page shows is head_importance's, built a sub-layer at a time between other sessions' work."""
    from analysis.ablation import head_importance

    calls = []
    table = head_ranking(context_for(good_dir / LM, "the cat sat"), "zero", lambda *a: calls.append(a))
    assert [(done, sublayers) for done, sublayers, _ in calls] == [(0, 2), (1, 2)]
    assert [sublayer for *_, sublayer in calls] == ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]
    expected = head_importance(load_checkpoint(good_dir / LM), "the cat sat")
    assert [(n, h) for n, h, _ in table] == [(n, h) for n, h, _ in expected]
    assert [kl for *_, kl in table] == pytest.approx([kl for *_, kl in expected], rel=1e-5)


def test_ablated_heads_and_mode_come_back_from_a_copied_link(app) -> None:
    heads = ["decoder.layers.0.self_attn:1", "decoder.layers.1.self_attn:0"]
    link = "decoder.self_attn-L1-H2,decoder.self_attn-L2-H1"  # 1-based, as the options are labelled
    at = app(text="the cat sat on the mat", ablate_heads=link, ablate_mode="mean")
    at.switch_page("views/ablation.py").run()
    assert at.multiselect(key="ablate_heads").value == heads
    assert at.radio(key="ablate_mode").value == "mean"
    assert float(ok(at).metric[0].value) > 0  # the restored heads are switched off, not only listed
    assert at.query_params["ablate_heads"] == link
    stale = app(text="the cat sat on the mat", ablate_heads="decoder.self_attn-L10-H1")
    stale.switch_page("views/ablation.py").run()
    assert ok(stale).multiselect(key="ablate_heads").value == []  # a head this model lacks is dropped


def test_projector_mode_comes_from_the_url_and_goes_back_into_it(app) -> None:
    at = app(text="the cat sat on the mat", projector="1")
    assert ok(at).toggle(key="projector").value is True
    assert at.query_params["projector"] == "True"
    assert chart(at, "head_chart")["layout"]["font"]["size"] == PROJECTOR_FONT  # large type
    at.toggle(key="projector").set_value(False).run()
    assert "projector" not in ok(at).query_params  # off: the link stays short
    assert chart(at, "head_chart")["layout"].get("font", {}).get("size") != PROJECTOR_FONT


@pytest.mark.parametrize("model", [LM, ED])
def test_characters_outside_the_vocabulary_are_named_in_the_page(app, model: str) -> None:
    at = ok(app(model=model, text="Hello 中文 😀"))
    notes = shown_text(" ".join(i.value for i in at.info))
    assert f"not in {model}'s vocabulary: 中 文 😀" in notes, notes
    plain = ok(app(model=model, text="the cat sat on the mat"))
    assert "vocabulary" not in " ".join(i.value for i in plain.info)


@pytest.mark.parametrize(("temperature", "expected"), [("nan", 0.8), ("inf", 2.0), ("-inf", 0.1), ("NaN", 0.8)])
def test_nan_and_infinities_in_a_link_are_kept_in_range_like_any_other_value(app, temperature, expected) -> None:
    at = app(model=LM, text="the cat sat", gen_mode="sampling", gen_temperature=temperature, gen_tokens="inf")
    at.switch_page("views/generate.py").run()
    ok(at)
    assert not at.error, errors(at)
    assert at.slider(key="gen_temperature").value == expected

"""viz/: pure functions from traces and arrays to figures and tables (no Streamlit)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly_data import decode_typed_array

from analysis.analyze import analyze, batch_masks, positional_table, positions_used
from analysis.record import Analysis
from inference import catalog
from inference.checkpoint import load_checkpoint
from inference.text import InputError
from model.transformer import sinusoidal_table
from training.tiny import make_tiny_checkpoint
from viz.arrays import block_average, quantize
from viz.heads import average_heads, grid_pick, head_frame, head_heatmap, heads_grid
from viz.labels import display_piece, escape, indexed_labels, plotly_labels, safe_filename
from viz.masks import mask_heatmap, padding_heatmap
from viz.positional import encoding_curves, encoding_heatmap, similarity, similarity_heatmap
from viz.stats import entropy_bits, head_scores, head_table
from viz.steps import attention_steps, output_figure, steps_figure, steps_table
from viz.style import chart_config, frozen
from viz.tables import generation_frame, top_k_frame


def rows_normalised(rng: np.random.Generator, *shape: int) -> np.ndarray:
    w = rng.random(shape).astype(np.float32)
    return w / w.sum(-1, keepdims=True)


def figure_json(fig) -> dict:
    return json.loads(fig.to_json())


@pytest.fixture(scope="module")
def checkpoints(tiny_checkpoints: dict[str, Path]):
    return {kind: load_checkpoint(path) for kind, path in tiny_checkpoints.items()}


@pytest.fixture(scope="module")
def traces(checkpoints) -> dict[str, Analysis]:
    texts = {"decoder-only": "The cat sat on the mat.", "encoder-decoder": "Where is the station?"}
    return {k: analyze(c, texts[k], max_tokens=6) for k, c in checkpoints.items()}


# labels ------------------------------------------------------------------------------------------------------------


def test_pieces_are_escaped_and_made_visible() -> None:
    assert escape("<script>alert(1)</script> & co") == "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"
    assert display_piece("▁the") == "▁the"
    assert display_piece("<0xF0>") == "<0xF0>"
    assert display_piece("a\u200bb\u202e") == "a\\u200bb\\u202e"
    assert display_piece("\x07") == "\\u0007"
    assert display_piece("") == "∅"
    assert plotly_labels(["<b>", "&"]) == ["&lt;b&gt;", "&amp;"]
    assert indexed_labels(["=cmd", "x"]) == ["1:=cmd", "2:x"]
    assert safe_filename("attention", "lm/../english", "L1") == "attention-lm____english-L1"


# one head -----------------------------------------------------------------------------------------------------------


def test_head_heatmap_sends_float32_typed_array_with_escaped_labels() -> None:
    w = rows_normalised(np.random.default_rng(0), 5, 5)
    pieces = ["<s>", "<script>", "&amp", "▁x", "▁x"]
    fig = head_heatmap(w, pieces, pieces, "a <b>title</b>")
    text = fig.to_json()
    assert '"bdata"' in text and "<script>" not in text and "<b>title" not in text
    trace = figure_json(fig)["data"][0]
    z = decode_typed_array(trace["z"])
    assert z.dtype == np.float32 and z.shape == (5, 5)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-6)
    assert trace["zmin"] == 0 and trace["zmax"] == 1 and trace["colorscale"][0][1] == "#00224e"  # cividis
    # one category per token, its escaped label: hover names the cell's own row and column, "query 2:… → key 3:…"
    assert trace["y"][1] == "2:&lt;script&gt;" and trace["x"][2] == "3:&amp;amp"
    assert trace["hovertemplate"] == "query %{y} → key %{x}: %{z:.3f}<extra></extra>" and "customdata" not in trace
    assert trace["texttemplate"] == "%{z:.2f}"  # short input: numbers printed in the cells
    layout = figure_json(fig)["layout"]
    assert layout["xaxis"]["type"] == layout["yaxis"]["type"] == "category"
    assert layout["xaxis"]["tickvals"] == trace["x"]  # positions from 1 in the labels: the two "▁x" stay apart
    assert layout["xaxis"]["ticktext"][3:] == ["4:▁x", "5:▁x"]


def test_head_heatmap_rejects_shapes_that_disagree_with_tokens() -> None:
    with pytest.raises(ValueError, match="does not match 3 query tokens × 4 key tokens"):
        head_heatmap(np.zeros((3, 5)), ["a"] * 3, ["b"] * 4)
    with pytest.raises(ValueError, match="2-D"):
        head_heatmap(np.zeros((2, 3, 3)), ["a"] * 3, ["b"] * 3)
    with pytest.raises(ValueError, match="heads, queries, keys"):
        average_heads(np.zeros((3, 3)))


def test_long_head_stays_within_its_budget() -> None:
    w = rows_normalised(np.random.default_rng(1), 256, 256)
    fig = head_heatmap(w, ["▁tok"] * 256, ["▁tok"] * 256)
    size = len(fig.to_json())
    # 256² float32 in base64 ≈ 350 kB, and each axis's 256 labels once (the cells' categories, which the hover
    # reads): 390 kB measured; 3.4 MB when every cell carried its own hover string (46 bytes a cell). The margin:
    # about 10 %, a longer title or colour bar, never a string a cell.
    assert size < 430_000, size
    layout = figure_json(fig)["layout"]
    assert len(layout["xaxis"]["tickvals"]) <= 48 and len(figure_json(fig)["data"][0]["x"]) == 256


def test_average_of_heads_keeps_rows_summing_to_one() -> None:
    w = rows_normalised(np.random.default_rng(2), 4, 6, 6)
    avg = average_heads(w)
    np.testing.assert_allclose(avg.sum(-1), 1.0, atol=1e-6)
    frame = head_frame(avg, list("abcdef"), list("abcdef"))
    assert frame.shape == (6, 6) and frame.index[0] == "1:a"


# all heads ----------------------------------------------------------------------------------------------------------


def test_grid_of_256_tokens_is_downsampled_uint8() -> None:
    layers, heads, t = 3, 4, 256
    w = rows_normalised(np.random.default_rng(3), layers, heads, t, t)
    fig = heads_grid(w, "grid", selected=(1, 2))
    data = figure_json(fig)["data"]
    mosaic = decode_typed_array(data[0]["z"])
    assert mosaic.dtype == np.uint8 and mosaic.shape == (layers * 64, heads * 64)
    expected = quantize(block_average(w[1, 2]))
    np.testing.assert_array_equal(mosaic[64:128, 128:192], expected)
    picks = np.asarray(data[1]["customdata"])
    assert picks.shape == (layers * heads, 2) and picks[-1].tolist() == [2, 3]
    assert len(fig.to_json()) < 250_000  # 12 thumbnails of 64×64 bytes, base64


def test_a_30_layer_9_head_grid_keeps_readable_rows_and_a_small_payload() -> None:
    """SmolLM2's 270 heads on 256 tokens: 27² tiles (not 64²: 1.1 M cells), rows ≥ 64 px, head labels on top."""
    from viz.heads import GRID_CELLS, GRID_ROW_PX

    layers, heads, t = 30, 9, 256
    w = np.full((layers, heads, t, t), 1 / t, dtype=np.float32)
    w[7, 4] = np.eye(t, dtype=np.float32)
    fig = heads_grid(w, "grid")
    spec = figure_json(fig)
    mosaic = decode_typed_array(spec["data"][0]["z"])
    assert mosaic.shape == (layers * 27, heads * 27) and mosaic.size <= GRID_CELLS
    np.testing.assert_array_equal(mosaic[7 * 27 : 8 * 27, 4 * 27 : 5 * 27], quantize(block_average(w[7, 4], 27)))
    layout = spec["layout"]
    assert (layout["height"] - 60) / layers >= GRID_ROW_PX and layout["xaxis"]["side"] == "top"
    assert len(fig.to_json()) < 400_000
    small = figure_json(heads_grid(w[:6, :8], "grid"))["layout"]  # a shallow grid: 90 px rows, labels below
    assert small["height"] == 600 and "side" not in small["xaxis"]


def test_block_average_and_quantize() -> None:
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_allclose(block_average(a, 2), [[2.5, 4.5], [10.5, 12.5]])
    assert block_average(a, 8).shape == (4, 4)
    b = rows_normalised(np.random.default_rng(4), 100, 100)
    small = block_average(b, 64)
    assert small.shape == (64, 64)
    assert small.mean() == pytest.approx(b.mean(), rel=0.05)
    assert quantize(np.array([0.0, 0.5, 1.0, 1.2])).tolist() == [0, 128, 255, 255]


def test_grid_pick_reads_the_clicked_tile() -> None:
    assert grid_pick({"points": [{"customdata": [1, 3], "x": 0, "y": 0}]}, 4) == (1, 3)
    assert grid_pick({"points": [{"customdata": {"0": 2, "1": 0}}]}, 4) == (2, 0)
    assert grid_pick({"points": [{"curve_number": 1, "point_index": 6}]}, 4) == (1, 2)
    assert grid_pick({"points": []}, 4) is None
    assert grid_pick(None, 4) is None


def test_chart_config_names_the_svg() -> None:
    config = chart_config("attention lm/1")
    assert config["toImageButtonOptions"] == {"format": "svg", "filename": "attention_lm_1"}


# statistics ---------------------------------------------------------------------------------------------------------


def test_stats_on_hand_made_heads() -> None:
    t = 6
    previous = np.zeros((t, t))
    previous[0, 0] = 1
    previous[np.arange(1, t), np.arange(t - 1)] = 1
    diagonal = np.eye(t)
    sink = np.zeros((t, t))
    sink[:, 0] = 1
    uniform = np.tril(np.ones((t, t)))
    uniform /= uniform.sum(-1, keepdims=True)
    causal = np.tril(np.ones((t, t), dtype=bool))
    frame = head_scores(np.stack([previous, diagonal, sink, uniform]), causal)
    assert frame["previous_token"].tolist()[:3] == [1.0, 0.0, pytest.approx(0.2)]
    assert frame["diagonal"][1] == 1.0 and frame["first_token"][2] == 1.0
    assert frame["entropy_bits"][:3].tolist() == [0.0, 0.0, 0.0]
    assert frame["mean_distance"][1] == 0.0 and frame["mean_distance"][0] == pytest.approx(5 / 6)
    assert entropy_bits(np.full(4, 0.25)) == pytest.approx(2.0)
    cross = head_scores(np.full((2, 3, 5), 0.2), None, self_attention=False)
    assert cross["mean_distance"].isna().all() and cross["first_token"].tolist() == pytest.approx([0.2, 0.2])
    with pytest.raises(ValueError, match="mask of shape"):
        head_scores(np.zeros((1, 3, 3)), np.ones((3, 4), dtype=bool))


def test_padding_queries_do_not_count() -> None:
    w = np.zeros((1, 3, 3))
    w[0, 0, 0] = w[0, 1, 0] = 1.0  # the third query is padding: an all-zero row
    mask = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=bool)
    assert head_scores(w, mask)["first_token"][0] == 1.0


def test_head_table_covers_every_head(traces) -> None:
    table = head_table(traces["encoder-decoder"])
    assert len(table) == 2 * 4 * 3  # 2 layers × 4 heads × (encoder self, decoder self, cross)
    assert list(dict.fromkeys(table["attention"])) == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    assert table.loc[table.attention == "decoder.cross_attn", "diagonal"].isna().all()
    lm = head_table(traces["decoder-only"])
    assert len(lm) == 8 and lm["entropy_bits"].between(0, 8).all()


# trace data, predictions, steps -------------------------------------------------------------------------------------


def test_analysis_sublayers_and_predictions(traces) -> None:
    ed = traces["encoder-decoder"]
    assert ed.attentions == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    cross = ed.sublayer("decoder.cross_attn", 1)
    assert cross.name == "decoder.layers.1.cross_attn" and (cross.stack, cross.layer, cross.type) == (
        "decoder",
        1,
        "cross_attn",
    )
    assert cross.weights.shape == (4, len(ed.target_pieces), len(ed.source_pieces))
    assert (cross.query_pieces, cross.key_pieces) == (ed.target_pieces, ed.source_pieces)
    assert ed.sublayer("encoder.self_attn", 0).query_pieces == ed.source_pieces
    assert ed.stacked("encoder.self_attn").shape[:2] == (2, 4)
    with pytest.raises(KeyError):
        ed.sublayer("decoder.cross_attn", 5)
    steps = generation_frame(ed)
    assert len(steps) == len(ed.target_pieces) and list(steps.columns[:3]) == ["step", "input", "next"]
    lm = traces["decoder-only"]
    top = top_k_frame(lm, -1)
    assert len(top) == 5 and top["probability"].is_monotonic_decreasing
    with pytest.raises(ValueError, match="outside"):
        top_k_frame(lm, 999)


def test_attention_steps_follow_the_recorded_head(traces) -> None:
    sublayer = traces["decoder-only"].sublayer("decoder.self_attn", 1)
    steps = attention_steps(sublayer, head=2, query=3)
    np.testing.assert_allclose(steps.scores, sublayer.scores[2, 3], atol=1e-6)
    assert steps.weights.sum() == pytest.approx(1.0, abs=1e-5)
    assert np.isneginf(steps.masked[4:]).all() and np.isfinite(steps.masked[:4]).all()
    np.testing.assert_allclose(steps.output, steps.weights @ sublayer.values[2], atol=1e-5)
    fig = figure_json(steps_figure(steps))
    assert fig["data"][1]["text"][5] == ["−∞"]  # masked cell shown as −∞
    np.testing.assert_allclose(decode_typed_array(fig["data"][2]["z"]).sum(), 1.0, atol=1e-5)
    assert figure_json(output_figure(steps))["data"][0]["z"]
    # keys and value dimensions are read counted from 1: the first key row at 1, the first dimension at 1
    assert decode_typed_array(fig["data"][0]["y"])[0] == 1 and fig["data"][3]["x0"] == 1
    assert figure_json(output_figure(steps))["data"][0]["x0"] == 1
    assert steps_table(steps)["weight"].sum() == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="outside"):
        attention_steps(sublayer, head=9, query=0)


# positional encoding ------------------------------------------------------------------------------------------------


def test_positional_views_sinusoidal_and_learned(checkpoints, tmp_path: Path) -> None:
    table = positional_table(checkpoints["decoder-only"])
    np.testing.assert_allclose(table, sinusoidal_table(*table.shape).numpy(), atol=1e-6)
    sim = similarity(table, 10, "cosine")
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-5)
    assert similarity(table, 10, "dot product")[0, 0] == pytest.approx(table.shape[1] / 2, rel=1e-4)
    heat = figure_json(encoding_heatmap(table, 20, used=7))
    assert decode_typed_array(heat["data"][0]["z"]).shape == (20, table.shape[1])
    curves = figure_json(encoding_curves(table, [0, 1], 20))
    assert [c["name"].split(" ·")[0] for c in curves["data"]] == ["dim 1", "dim 2"]  # counted from 1
    assert decode_typed_array(curves["data"][0]["x"])[0] == 1 and heat["data"][0]["y0"] == 1
    assert heat["layout"]["shapes"][0]["y0"] == 7.5  # the line under position 7, the last the input used
    assert "sin" in curves["data"][0]["name"] and "cos" in curves["data"][1]["name"]
    assert decode_typed_array(figure_json(similarity_heatmap(sim))["data"][0]["z"]).shape == (10, 10)
    with pytest.raises(ValueError, match="outside"):
        encoding_curves(table, [999])
    assert (
        positions_used(checkpoints["decoder-only"], "abc")
        == len(checkpoints["decoder-only"].tokenizer.encode("abc")) + 1
    )
    assert positions_used(checkpoints["decoder-only"], "  ") is None
    learned = load_checkpoint(make_tiny_checkpoint(tmp_path / "learned", positional="learned"))
    assert positional_table(learned).shape == (64, 32)
    assert similarity(positional_table(learned), 5).shape == (5, 5)


# masks --------------------------------------------------------------------------------------------------------------


def test_batch_masks_pad_the_shorter_sentence(checkpoints) -> None:
    batch = batch_masks(checkpoints["decoder-only"], ["The cat sat on the mat.", "Hi"])
    assert batch.causal and batch.stack == "decoder"
    n = int(batch.padding[1].sum())
    assert batch.padding[0].all() and not batch.padding[1, n:].any()
    assert batch.pieces[1][-1] == "<pad>"
    assert not batch.attention[1, :, n:].any() and not batch.attention[0][np.triu_indices(n, 1)].any()
    enc = batch_masks(checkpoints["encoder-decoder"], ["abc", "abcdef"])
    assert not enc.causal and enc.attention[1].all()
    with pytest.raises(InputError):
        batch_masks(checkpoints["decoder-only"], ["ok", "  "])
    fig = figure_json(mask_heatmap(batch.attention[1], batch.pieces[1], batch.pieces[1], "<i>m</i>"))
    assert decode_typed_array(fig["data"][0]["z"]).dtype == np.uint8
    assert "<i>" not in json.dumps(fig)
    assert figure_json(padding_heatmap(batch))["data"][0]["z"]
    with pytest.raises(ValueError, match="does not match"):
        mask_heatmap(np.ones((2, 2)), ["a"], ["b", "c"], "")


# checkpoints folder -------------------------------------------------------------------------------------------------


def test_catalog_lists_good_and_broken_checkpoints(tiny_checkpoints: dict[str, Path], tmp_path: Path, monkeypatch):
    shutil.copytree(tiny_checkpoints["decoder-only"], tmp_path / "lm-english")
    broken = tmp_path / "broken"
    shutil.copytree(tiny_checkpoints["decoder-only"], broken)
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "notes").mkdir()  # not a checkpoint: ignored
    monkeypatch.setenv(catalog.ENV_VAR, str(tmp_path))
    entries = catalog.list_checkpoints()
    assert [e.name for e in entries] == ["broken", "lm-english"]
    assert not entries[0].ok and "not valid JSON" in entries[0].error
    assert entries[1].ok and entries[1].kind == "decoder-only"
    assert catalog.list_checkpoints(tmp_path / "missing") == []
    assert catalog.preset_family("reverse", "encoder-decoder", {}) == "reverse"
    assert catalog.preset_family("x", "encoder-decoder", {"task": "translation"}) == "translate"
    assert catalog.preset_family("lm-english", "decoder-only", {}) == "lm"
    card = {"task": "t", "metrics": {"bleu": 12.345678, "split": "test", "test_sets": {"a": 1}, "signatures": ["x"]}}
    task, metrics = catalog.card_summary(card)
    assert task == "t" and metrics == [("bleu", "12.35"), ("split", "test")]  # nested tables stay on the card


def test_the_folder_stamp_changes_when_a_checkpoint_is_added_or_replaced(tiny_checkpoints, tmp_path: Path) -> None:
    """The sidebar lists checkpoints again only when this stamp changes (ui.checkpoint_entries)."""
    shutil.copytree(tiny_checkpoints["decoder-only"], tmp_path / "lm-english")
    first = catalog.folder_stamp(tmp_path)
    assert first == catalog.folder_stamp(tmp_path) and [name for name, _ in first] == ["lm-english"]
    shutil.copytree(tiny_checkpoints["encoder-decoder"], tmp_path / "translate")
    second = catalog.folder_stamp(tmp_path)
    assert [name for name, _ in second] == ["lm-english", "translate"]
    card = tmp_path / "translate" / "card.json"
    os.utime(card, (card.stat().st_atime, card.stat().st_mtime + 10))  # replaced later
    assert catalog.folder_stamp(tmp_path) != second
    assert catalog.folder_stamp(tmp_path / "missing") == ()


def test_the_cached_checkpoint_list_follows_whether_packages_are_listed(
    tiny_checkpoints, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One folder, one stamp: the list with the installed packages and the one without are two cache entries, so a
    process that lists them after one that did not (tests, a bench) never gets the shorter list."""
    from ui import cache

    shutil.copytree(tiny_checkpoints["decoder-only"], tmp_path / "lm-english")
    asked: list[bool] = []

    def listed(root: Path, packages: bool | None = None) -> list:
        asked.append(packages)
        return [f"{root.name}:{packages}"]

    monkeypatch.setattr(catalog, "list_checkpoints", listed)
    monkeypatch.setenv(catalog.PRETRAINED_VAR, "0")
    without = cache.checkpoints(tmp_path)
    monkeypatch.setenv(catalog.PRETRAINED_VAR, "1")
    assert cache.checkpoints(tmp_path) != without
    assert asked == [False, True]


def test_a_frozen_figure_thaws_to_the_same_json_and_select_head_leaves_it_unchanged() -> None:
    """ui caches frozen figures shared by every session: thawing and outlining a head must not alter them."""
    import copy
    import json

    import plotly.io as pio

    from viz.heads import select_head
    from viz.style import frozen, thaw

    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(6), size=(2, 3, 6)).astype(np.float32)  # (L, H, Tq, Tk)
    grid = heads_grid(w, "grid")
    spec = frozen(grid)
    before = copy.deepcopy(spec)
    assert json.loads(pio.to_json(thaw(spec), validate=False)) == json.loads(pio.to_json(grid, validate=False))
    outlined = select_head(spec, (1, 2))
    assert spec == before  # the cached dict is untouched
    assert outlined.to_dict()["layout"]["shapes"][-1] == heads_grid(w, "grid", (1, 2)).to_dict()["layout"]["shapes"][-1]
    assert len(outlined.to_dict()["layout"]["shapes"]) == len(spec["layout"]["shapes"]) + 1


@pytest.mark.parametrize("n", [5, 20, 60])  # numbers in cells; hover names pieces; hover names positions
def test_swap_head_gives_the_heatmap_built_for_that_head(n: int) -> None:
    import json

    from viz.heads import swap_head
    from viz.style import frozen

    rng = np.random.default_rng(n)
    heads = rng.dirichlet(np.ones(n), size=(2, n)).astype(np.float32)
    pieces = [f"t{i}<b>" for i in range(n)]
    template = frozen(head_heatmap(heads[0], pieces, pieces, "layer 1, head 1"))
    kept = json.dumps(template)
    swapped = swap_head(template, heads[1], "layer 1, head <2>")
    assert swapped == frozen(head_heatmap(heads[1], pieces, pieces, "layer 1, head <2>"))
    assert json.dumps(template) == kept  # the shared template is untouched
    with pytest.raises(ValueError, match="do not fit"):
        swap_head(template, heads[1][:-1], "x")


@pytest.mark.parametrize("n", [4, 20, 60])
def test_charts_built_without_validation_are_what_plotly_validates(n: int) -> None:
    """head_heatmap and heads_grid write Plotly's JSON by hand (viz.style.unvalidated): validating the same dicts
    must accept every property and give the same JSON (a misspelt key would raise here)."""
    import json

    import plotly.io as pio

    rng = np.random.default_rng(n)
    pieces = [f"t{i}<&>" for i in range(n)]
    w = rng.dirichlet(np.ones(n), size=(2, 3, n)).astype(np.float32)
    for fig in (head_heatmap(w[0, 0], pieces, pieces, "t <b>"), heads_grid(w, "g"), heads_grid(w, "g", (1, 2))):
        validated = go.Figure(fig.to_dict())
        assert json.loads(pio.to_json(validated)) == json.loads(pio.to_json(fig, validate=False))


def test_difference_heatmap_is_second_minus_first_on_merged_labels() -> None:
    from viz.compare import difference_heatmap, merged_labels

    rng = np.random.default_rng(1)
    a, b = rng.dirichlet(np.ones(4), size=4).astype(np.float32), rng.dirichlet(np.ones(4), size=4).astype(np.float32)
    first, second = ["▁the", "▁cat", "▁sat", "<b>"], ["▁the", "▁dog", "▁sat", "<b>"]
    fig = difference_heatmap(a, b, (first, second), (first, second), "diff")
    np.testing.assert_allclose(fig.data[0].z, b - a)
    assert fig.layout.xaxis.ticktext[1] == "2:▁cat / ▁dog" and fig.layout.xaxis.ticktext[0] == "1:▁the"
    assert merged_labels(first, second)[0] == merged_labels(first, first)[0]  # equal pieces: one label
    assert "&lt;b&gt;" in fig.layout.xaxis.ticktext[3]  # escaped
    go.Figure(fig.to_dict())  # valid Plotly
    with pytest.raises(ValueError, match="do not align"):
        merged_labels(first, first[:3])


def test_generation_figures_row_cache_and_their_numbers() -> None:
    from viz.generation import attention_row, cache_growth, kv_cache_numbers

    assert kv_cache_numbers(n_layers=3, d_model=256, positions=10) == 2 * 3 * 10 * 256
    row = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    fig = attention_row(row, ["<s>", "<b>", "▁cat"], "step 3", own=2)
    np.testing.assert_allclose(fig.data[0].y, row)
    assert fig.layout.xaxis.ticktext[1] == "2:&lt;b&gt;"  # counted from 1, escaped
    assert fig.data[0].marker.color[2] != fig.data[0].marker.color[0]  # the query's own position stands out
    go.Figure(fig.to_dict())  # valid Plotly
    growth = cache_growth([10, 20, 30], step=2)
    assert list(growth.data[1].x) == [2] and growth.data[1].y[0] == pytest.approx(20 * 4 / 1024)
    go.Figure(growth.to_dict())
    with pytest.raises(ValueError, match="does not match"):
        attention_row(row, ["a", "b"], "x")
    many = attention_row(np.full(69, 1 / 69), [f"t{i}" for i in range(69)], "in a column", most=16)
    assert len(many.layout.xaxis.ticktext) <= 16  # a half-width chart names fewer keys than a full one


def test_long_titles_wrap_after_a_comma_and_the_chart_grows_to_hold_them() -> None:
    from viz.heads import swap_head
    from viz.style import TITLE_CHARS, frozen, wrap_title

    assert wrap_title("Self-attention (masked), layer 2, average of heads") == [
        "Self-attention (masked), layer 2,",
        "average of heads",
    ]
    assert wrap_title("Encoder self-attention, layer 1") == ["Encoder self-attention, layer 1"]
    assert all(len(line) <= TITLE_CHARS for line in wrap_title("word " * 40))
    w = np.full((3, 3), 1 / 3)
    short = head_heatmap(w, ["a", "b", "c"], ["a", "b", "c"], "Short title").to_plotly_json()["layout"]
    long = head_heatmap(w, ["a", "b", "c"], ["a", "b", "c"], "x" * 30 + ", " + "y" * 30).to_plotly_json()["layout"]
    assert long["title"]["text"] == "x" * 30 + ",<br>" + "y" * 30
    assert long["margin"]["t"] - short["margin"]["t"] == long["height"] - short["height"] == 22
    swapped = swap_head(frozen(head_heatmap(w, list("abc"), list("abc"), "x" * 30 + ", " + "y" * 30)), w, "Short title")
    assert (swapped["layout"]["height"], swapped["layout"]["margin"]["t"]) == (short["height"], short["margin"]["t"])


def test_cell_numbers_need_a_box_wide_enough_for_every_column() -> None:
    from viz.style import PROJECTOR_CELL_FONT, PROJECTOR_FONT, cell_numbers_css, cell_numbers_width, for_projector

    pieces = [f"t{i}" for i in range(10)]
    small = head_heatmap(np.full((10, 10), 0.1), pieces, pieces, "ten tokens")
    wider = head_heatmap(np.full((14, 14), 1 / 14), pieces + list("abcd"), pieces + list("abcd"), "fourteen")
    assert 300 < cell_numbers_width(small) < cell_numbers_width(wider)  # more columns need more room
    assert cell_numbers_width(head_heatmap(np.full((20, 20), 0.05), ["x"] * 20, ["x"] * 20, "none")) == 0  # no text
    css = cell_numbers_css("head_chart", 420)
    assert ".st-key-head_chart{container-type:inline-size}" in css and "(max-width:420px)" in css
    big = for_projector(small)
    assert big.layout.font.size == PROJECTOR_FONT and big.data[0].textfont.size == PROJECTOR_CELL_FONT
    assert big.layout.xaxis.tickfont.size == PROJECTOR_FONT == 20  # ticks as large as the page's text
    assert cell_numbers_width(big) > cell_numbers_width(head_heatmap(np.full((10, 10), 0.1), pieces, pieces, "x"))
    # A frozen figure (what the chart caches hold) is measured as it is, to the same width as its Figure.
    for fig in (small, wider, big, heads_grid(np.full((2, 3, 4, 4), 0.25), "grid")):
        assert cell_numbers_width(frozen(fig)) == cell_numbers_width(fig)


def test_a_chart_on_a_projector_is_no_taller_than_the_first_view_leaves_room_for() -> None:
    from viz.style import PROJECTOR_MOST_HEIGHT, for_projector

    pieces = [f"t{i}" for i in range(30)]
    tall = for_projector(head_heatmap(np.full((30, 30), 1 / 30), pieces, pieces, "thirty tokens"))
    assert tall.layout.height == PROJECTOR_MOST_HEIGHT
    short = for_projector(go.Figure(layout={"height": 200, "title": {"text": "a strip"}}))
    assert short.layout.height < PROJECTOR_MOST_HEIGHT  # a short chart keeps its own height


def test_cell_numbers_print_in_a_type_their_rows_fit_or_not_at_all() -> None:
    """In projector mode the translator's 11 rows of 13 px (a 420 px chart, its tilted key labels in 20 px type)
    print in 11 px type, not 16; rows too short for CELL_FONT_MIN print none; a chart whose rows fit is untouched."""
    from viz.style import CELL_FONT_MIN, cell_fonts, fit_cell_numbers, for_projector

    title = "Cross-attention (decoder → encoder), layer 2, head 2"  # two lines, as Explore's

    def heatmap(n: int, key: str) -> go.Figure:
        return head_heatmap(np.full((n, n), 1 / n), [f"t{i}" for i in range(n)], [key] * (n - 1) + ["</s>"], title)

    plain = frozen(heatmap(11, "▁please"))
    assert cell_fonts(plain) == {} and fit_cell_numbers(plain) is plain  # 11 px in rows of about 18 px
    projected = for_projector(heatmap(11, "▁please"))
    fonts = cell_fonts(projected)
    assert CELL_FONT_MIN <= fonts[0] <= 11  # rows of about 13.8 px (measured in chromium)
    fitted = fit_cell_numbers(frozen(projected))  # a frozen figure gives a frozen one: what the page sends
    assert fitted["data"][0]["textfont"]["size"] == fonts[0] and fitted["data"][0]["texttemplate"] == "%{z:.2f}"
    projected_fitted = fit_cell_numbers(projected)
    assert frozen(projected_fitted) == fitted  # the Figure's way and the frozen dict's give the same chart
    cramped = for_projector(heatmap(16, "▁a_long_piece"))  # 16 rows under longer tilted labels: none fits
    assert cell_fonts(cramped) == {0: 0} and fit_cell_numbers(cramped).data[0].texttemplate is None
    spec = frozen(cramped)
    fitted_spec = fit_cell_numbers(spec)
    assert "texttemplate" not in fitted_spec["data"][0] and frozen(fit_cell_numbers(cramped)) == fitted_spec
    assert spec["data"][0]["texttemplate"] == "%{z:.2f}"  # a cached figure is never changed


def test_a_phones_strip_has_fewer_tokens_a_line_whose_text_fits_a_phone() -> None:
    from analysis.forced import ForcedRow
    from viz.forced import NARROW_BOX_PX, NARROW_LEAST, PER_LINE, frozen_strips, probability_strip, probability_strips
    from viz.style import cell_numbers_width, frozen

    pieces = ["▁I", "▁don", "'", "t", "▁have", "▁to", "▁say", "▁miserable", "▁world", "s"] * 6
    rows = [ForcedRow(i, i, p, 0.3, 1, i, p, 0.3) for i, p in enumerate(pieces)]
    wide, narrow = probability_strips(rows, "How sure the model was of what it wrote")
    assert wide.to_plotly_json() == probability_strip(rows, "How sure the model was of what it wrote").to_plotly_json()
    assert cell_numbers_width(wide) > NARROW_BOX_PX >= cell_numbers_width(narrow) > 0
    per_line = len(narrow.data[0].z[0])
    assert NARROW_LEAST <= per_line < PER_LINE and narrow.data[0].showscale is False
    more = probability_strip(rows, "x", per_line + 1, narrow.data[0].textfont.size, colorbar=False)
    assert cell_numbers_width(more) > NARROW_BOX_PX  # the most tokens a line that fit
    short = [ForcedRow(i, i, "a", 0.3, 1, i, "a", 0.3) for i in range(20)]
    assert len(probability_strips(short, "x").narrow.data[0].z[0]) == PER_LINE  # short pieces keep their lines
    for some in (rows, short, rows[:1]):  # what the page keeps: the same as the Figures frozen, no Figure built
        assert frozen_strips(some, "t") == tuple(frozen(strip) for strip in probability_strips(some, "t"))


def test_the_certainty_strip_prints_its_percentages_in_a_chart_of_the_pages_width() -> None:
    """Each cell holds a piece over its percentage on two lines: the width it needs is its longest line's, so that
    at 1024 px (a chart about 940 px wide) the numbers are shown, not hidden as too wide."""
    from analysis.forced import ForcedRow
    from viz.forced import probability_strip
    from viz.style import cell_numbers_width, for_projector

    rows = [ForcedRow(i, i, "▁Ankunft", 0.58, 1, i, "▁Ankunft", 0.58) for i in range(12)]
    strip = probability_strip(rows, "How sure the model was of its output")
    assert 0 < cell_numbers_width(strip) < 900
    assert 0 < cell_numbers_width(for_projector(probability_strip(rows, "x"))) < 940


def test_a_one_line_certainty_strip_has_two_colour_bar_ticks_that_cannot_overlap() -> None:
    from analysis.forced import ForcedRow
    from viz.forced import probability_strip

    row = ForcedRow(0, 5, "o", 0.9, 1, 5, "o", 0.9)
    assert list(probability_strip([row] * 3, "x").data[0].colorbar.tickvals) == [0.0, 1.0]
    assert list(probability_strip([row] * 20, "x").data[0].colorbar.tickvals) == [0.0, 0.5, 1.0]

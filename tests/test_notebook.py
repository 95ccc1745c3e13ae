"""The notebook API (atlas.api) and its example, examples/attention_atlas.ipynb.

The notebook runs headless (nbclient, the `python3` kernel of this interpreter, from the repository's root): no cell
fails, every figure cell shows a Plotly figure, plotly.js is embedded once and nothing is loaded from a CDN, and the
Hugging Face section draws the tiny model's own weights. The committed notebook keeps its figures, without the
plotly.js copy (its first cell says why), and stays small. The API's figures equal the app's (ui.charts), its layers
and heads count from 1, and its traces read back.

`python tests/test_notebook.py` executes the notebook and saves it as committed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `python tests/test_notebook.py`
    sys.path.insert(0, str(ROOT))

import atlas  # noqa: E402
from analysis.record import Analysis  # noqa: E402
from inference.checkpoint import CheckpointError  # noqa: E402
from tests.plotly_data import decode_typed_array  # noqa: E402

NOTEBOOK = ROOT / "examples" / "attention_atlas.ipynb"
CELL_TIMEOUT = 180  # seconds per cell: loading lm-english takes about 5 s on a busy 2-core machine
PLOTLY_JSON = "application/vnd.plotly.v1+json"
LIBRARY = "* plotly.js v"  # the licence header plotly.min.js starts with: the one output that embeds the library
CDNS = ("cdn.plot.ly", "cdn.jsdelivr", "cdnjs.", "unpkg.com")
MAX_COMMITTED_BYTES = 1_000_000  # the repository's size budget is tight: the plotly.js copy (4.8 MB) stays out
TEXT = "The cat sat on the mat because it was tired."

# The notebook's tiny random GPT-2 and its input (section 2), built again here to check its figures.
GPT2 = {"n_layer": 2, "n_head": 2, "n_embd": 16, "vocab_size": 50, "n_positions": 32, "bos_token_id": 0}
GPT2 |= {"eos_token_id": 0, "attn_implementation": "eager"}
GPT2_IDS = [5, 17, 3, 42, 8, 23, 11, 30]


# --- running the notebook ------------------------------------------------------------------------------------------


def execute(path: Path = NOTEBOOK) -> Any:
    """The notebook at `path`, every cell run in order in a fresh kernel started in the repository's root; a cell
    that raises stops the run with nbclient's CellExecutionError."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",  # jupyter_client runs a kernelspec's "python" as sys.executable: this venv's
        timeout=CELL_TIMEOUT,
        record_timing=False,  # no timestamps in the committed file: rerunning it changes only what it shows
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()
    return nb


def is_library(output: dict) -> bool:
    return LIBRARY in output.get("data", {}).get("text/html", "")


def without_library(nb: Any) -> Any:
    """The notebook without the output that embeds plotly.js (every figure's data stays)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not is_library(o)]
    return nb


def outputs(nb: Any) -> list[dict]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]


def figure_cells(nb: Any, tag: str = "figure") -> list[Any]:
    return [c for c in nb.cells if tag in c.metadata.get("tags", [])]


def figure_of(cell: Any) -> dict:
    """The Plotly figure (JSON) a cell shows."""
    shown = [o["data"][PLOTLY_JSON] for o in cell.outputs if PLOTLY_JSON in o.get("data", {})]
    assert len(shown) == 1, f"{cell.source!r} shows {len(shown)} Plotly figures"
    return shown[0]


@pytest.fixture(scope="module")
def executed() -> Any:
    return execute()


# --- the notebook --------------------------------------------------------------------------------------------------


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_no_cell_of_the_notebook_fails(executed) -> None:
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "every code cell ran"
    errors = [o for o in outputs(executed) if o["output_type"] == "error"]
    stderr = [o["text"] for o in outputs(executed) if o.get("name") == "stderr"]
    assert errors == [] and stderr == [], "no error, and no warning for a reader to wonder about"


@pytest.mark.slow  # runs the notebook (40 s): in the full suite, not the everyday tier
def test_every_figure_cell_shows_a_plotly_figure_as_json_and_as_html(executed) -> None:
    cells = figure_cells(executed)
    assert len(cells) == 8  # head, heads, paper, rollout, mask; the Hugging Face head and heads; the trace read back
    for cell in cells:
        figure = figure_of(cell)
        assert figure["data"] and figure["data"][0]["type"] in ("heatmap", "scatter"), cell.source
        html = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {}) and not is_library(o)]
        assert len(html) == 1 and "plotly-graph-div" in html[0] and "Plotly.newPlot" in html[0], cell.source


@pytest.mark.slow  # runs the notebook (40 s): in the full suite, not the everyday tier
def test_plotly_js_is_embedded_once_and_nothing_is_loaded_from_a_cdn(executed) -> None:
    library = [o for o in outputs(executed) if is_library(o)]
    assert len(library) == 1, "the first figure embeds plotly.js, once"
    assert "<script src" not in library[0]["data"]["text/html"]  # inline: the library's own text names CDNs
    for output in outputs(executed):
        if is_library(output):
            continue
        text = json.dumps(output)
        assert not [cdn for cdn in CDNS if cdn in text], text[:200]
        assert 'src=\\"http' not in text and 'import \\"http' not in text


def tiny_gpt2_attentions() -> list[np.ndarray]:
    """The notebook's tiny GPT-2, built again: each layer's weights, (heads, tokens, tokens)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**GPT2)).eval()
    with torch.no_grad():
        out = model(torch.tensor([GPT2_IDS]), output_attentions=True)
    return [layer[0].numpy() for layer in out.attentions]


@pytest.mark.slow  # runs the notebook (40 s): in the full suite, not the everyday tier
def test_the_hugging_face_figures_show_the_tiny_models_own_attention(executed) -> None:
    from viz.heads import heads_grid
    from viz.style import frozen

    attentions = tiny_gpt2_attentions()
    head_cell, grid_cell = figure_cells(executed, "hugging-face")
    assert "layer=2, head=1" in head_cell.source
    z = decode_typed_array(figure_of(head_cell)["data"][0]["z"])
    np.testing.assert_allclose(z, attentions[1][0], atol=1e-6)
    grid = decode_typed_array(figure_of(grid_cell)["data"][0]["z"])
    expected = decode_typed_array(frozen(heads_grid(np.stack(attentions)))["data"][0]["z"])
    assert grid.shape == expected.shape and np.abs(grid.astype(int) - expected.astype(int)).max() <= 1  # uint8 tiles


@pytest.mark.slow  # runs the notebook (40 s): in the full suite, not the everyday tier
def test_the_committed_notebook_is_small_and_shows_what_it_computes_now(executed) -> None:
    import nbformat

    assert NOTEBOOK.stat().st_size < MAX_COMMITTED_BYTES
    committed = nbformat.read(NOTEBOOK, as_version=4)
    assert not [o for o in outputs(committed) if is_library(o)]
    assert not [cdn for cdn in CDNS if cdn in NOTEBOOK.read_text(encoding="utf-8")]
    saved, fresh = figure_cells(committed), figure_cells(executed)
    titles = [figure_of(c)["layout"]["title"]["text"] for c in saved]
    assert titles == [figure_of(c)["layout"]["title"]["text"] for c in fresh], "run `python tests/test_notebook.py`"


# --- the API -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lm_english():
    return atlas.load("lm-english")


@pytest.fixture(scope="module")
def lm_analysis(lm_english) -> Analysis:
    return atlas.analyze(lm_english, TEXT)


@pytest.fixture(scope="module")
def translation(tiny_checkpoints) -> tuple[Any, Analysis]:
    ckpt = atlas.load(tiny_checkpoints["encoder-decoder"])
    return ckpt, atlas.analyze(ckpt, "abc", target="cba")


def app_context(ckpt: Any, analysis: Analysis) -> Any:
    """What an app page hands ui.charts: the checkpoint, its text and its Analysis."""
    from inference.catalog import Entry
    from ui.cache import Source

    return Source.checkpoint(Entry(ckpt.name, ckpt.path), ckpt, -1.0, analysis.text).with_analysis(analysis)


def same_figure(ours: Any, apps: dict) -> None:
    """`ours` (a Figure) equals the app's frozen figure: its z arrays equal, everything else identical."""
    from viz.style import frozen

    mine = frozen(ours)
    for a, b in zip(mine["data"], apps["data"], strict=True):
        a, b = dict(a), dict(b)  # copies: the app's figure is its cache's
        np.testing.assert_array_equal(decode_typed_array(a.pop("z", [])), decode_typed_array(b.pop("z", [])))
        assert a == b
    assert mine["layout"] == apps["layout"]


def test_the_pages_cached_head_is_head_views_figure(lm_english, lm_analysis, translation) -> None:
    """Explore's one-head chart is not built by viz.heads.head_view each time: ui.charts swaps a head's weights and
    title into its layer's frozen template. The swap must draw head_view's figure, value-weighted too. (The grid
    needs no such test: page and API both return viz.heads.grid_view.)"""
    from ui import charts

    shown = app_context(lm_english, lm_analysis)
    same_figure(atlas.head(lm_analysis, 4, 6), charts.head_chart(shown, "decoder.self_attn", 3, 5))
    same_figure(atlas.head(lm_analysis, 1, "average"), charts.head_chart(shown, "decoder.self_attn", 0, charts.AVERAGE))
    same_figure(atlas.head(lm_analysis, 2, 3, norms=True), charts.head_chart(shown, "decoder.self_attn", 1, 2, True))
    ckpt, analysis = translation  # an encoder-decoder opens on its cross-attention, as the page does
    same_figure(atlas.head(analysis, 2, 3), charts.head_chart(app_context(ckpt, analysis), "decoder.cross_attn", 1, 2))


def test_norms_draw_the_value_weighted_shares_and_say_so(lm_analysis) -> None:
    shares = lm_analysis.value_weighted().sublayer("decoder.self_attn", 1).weights
    fig = atlas.head(lm_analysis, 2, 3, norms=True)
    np.testing.assert_array_equal(fig.data[0].z, shares[2])
    assert fig.layout.title.text.endswith("head 3, weight × value norm")
    grid = atlas.heads(lm_analysis, norms=True)
    assert grid.layout.title.text.replace("<br>", " ") == "Self-attention (masked): every head, weight × value norm"
    assert not atlas.heads(lm_analysis).layout.title.text.endswith("norm")


def test_the_other_views_draw_the_analysis(lm_analysis, translation) -> None:
    from analysis.rollout import analysis_rollout

    sublayer = lm_analysis.sublayers["decoder.layers.2.self_attn"]
    rollout = atlas.rollout(lm_analysis, 3, heads=[1, 2], residual=False)
    maps = analysis_rollout(lm_analysis, "decoder.self_attn", False, [0, 1]).maps
    np.testing.assert_array_equal(rollout.data[0].z, maps[2])
    assert rollout.layout.title.text.startswith("Rollout: Self-attention (masked),<br>layers 1–3, heads 1, 2")
    np.testing.assert_array_equal(atlas.mask(lm_analysis).data[0].z, sublayer.mask.astype(np.uint8))
    lines = atlas.paper(lm_analysis, 3, head=2, query=4)
    assert lines.layout.title.text.replace("<br>", " ").endswith(f"layer 3, head 2, query 4:{sublayer.query_pieces[3]}")
    assert len(atlas.paper(lm_analysis, 3).data) > sublayer.n_heads  # a legend entry and its lines per head
    _, analysis = translation
    assert atlas.rollout(analysis, attention="decoder.cross_attn").layout.title.text.startswith("Rollout: Decoder")
    stats = atlas.head_stats(lm_analysis)
    assert len(stats) == 6 * 8 and stats["layer"].min() == 1 and stats["head"].max() == 8  # from 1, as the page


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: atlas.head(a, 0, 1), "layer 0 is out of range: Self-attention (masked) has layers 1 to 6"),
        (lambda a: atlas.head(a, 7, 1), "layer 7 is out of range: Self-attention (masked) has layers 1 to 6"),
        (lambda a: atlas.head(a, 6, 9), "head 9 is out of range: layer 6 of Self-attention (masked) has heads 1 to 8"),
        (lambda a: atlas.head(a, 1, 0), "head 0 is out of range"),
        (lambda a: atlas.head(a, 1.5, 1), "layer must be a whole number from 1 to 6, not 1.5"),
        (lambda a: atlas.heads(a, "encoder.self_attn"), "no 'encoder.self_attn' attention: choose one of"),
        (lambda a: atlas.paper(a, 1, head=9), "head 9 is out of range"),
        (lambda a: atlas.paper(a, 1, query=14), "query position 14 is out of range: the text has query positions 1"),
        (lambda a: atlas.rollout(a, 7), "layer 7 is out of range"),
        (lambda a: atlas.rollout(a, heads=[1, 9]), "head 9 is out of range"),
        (lambda a: atlas.rollout(a, heads=[]), "no head to average"),
        (lambda a: atlas.mask(a, "decoder.cross_attn"), "choose one of 'decoder.self_attn'"),
    ],
)
def test_layers_and_heads_count_from_one_and_a_number_out_of_range_names_the_range(lm_analysis, call, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(lm_analysis)


def test_the_first_layer_and_head_are_one_and_the_last_are_the_counts(lm_analysis) -> None:
    first = atlas.head(lm_analysis, 1, 1)
    last = atlas.head(lm_analysis, 6, 8)
    np.testing.assert_array_equal(first.data[0].z, lm_analysis.sublayers["decoder.layers.0.self_attn"].weights[0])
    np.testing.assert_array_equal(last.data[0].z, lm_analysis.sublayers["decoder.layers.5.self_attn"].weights[7])


@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_a_saved_trace_reads_back_as_the_analysis(lm_analysis, tmp_path, suffix) -> None:
    from analysis.export import to_json, to_npz_bytes

    path = atlas.save(lm_analysis, tmp_path / f"cat.{suffix}")
    data = path.read_bytes()
    if suffix == "json":  # what the app's export writes
        assert data == to_json(lm_analysis).encode("utf-8")
    else:
        with np.load(io.BytesIO(data)) as ours, np.load(io.BytesIO(to_npz_bytes(lm_analysis))) as apps:
            assert ours.files == apps.files
            for key in ours.files:
                np.testing.assert_array_equal(ours[key], apps[key])
    back = atlas.read_trace(data, path.name)
    assert back.kind == lm_analysis.kind and back.target_pieces == lm_analysis.target_pieces
    assert list(back.sublayers) == list(lm_analysis.sublayers)
    for name, sublayer in lm_analysis.sublayers.items():
        np.testing.assert_allclose(back.sublayers[name].weights, sublayer.weights, atol=1e-6)
        np.testing.assert_array_equal(back.sublayers[name].mask, sublayer.mask)


def test_save_refuses_other_suffixes_and_read_trace_names_a_bad_file(lm_analysis, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"save writes a \.json trace or an \.npz archive, not \.csv"):
        atlas.save(lm_analysis, tmp_path / "cat.csv")
    with pytest.raises(atlas.TraceError, match="cat.json"):
        atlas.read_trace(b"[1, 2]", "cat.json")


def test_rank_heads_is_head_ablations_ranking_counted_from_one(lm_english) -> None:
    from analysis.ablation import head_importance

    table = head_importance(lm_english, "the cat sat", "mean")
    ranked = atlas.rank_heads(lm_english, "the cat sat", mode="mean")
    assert len(ranked) == 6 * 8 and ranked["KL (nats)"].is_monotonic_decreasing
    assert set(ranked["attention"]) == {"Self-attention (masked)"}
    assert list(zip(ranked["layer"], ranked["head"])) == [(int(n.split(".")[2]) + 1, h + 1) for n, h, _ in table]
    np.testing.assert_allclose(ranked["KL (nats)"], [kl for *_, kl in table], rtol=1e-6)
    with pytest.raises(ValueError, match="mode is 'zero' or 'mean', not 'half'"):
        atlas.rank_heads(lm_english, "the cat sat", mode="half")


def test_logit_attribution_counts_from_one_and_its_parts_sum_to_the_logit(lm_english) -> None:
    text = "The cat sat on the mat because it was"
    table = atlas.logit_attribution_scores(lm_english, text, position=3, token="▁sat", versus="dog")
    assert table.attrs["position"] == 3 and (table.attrs["token"], table.attrs["versus"]) == ("▁sat", "▁dog")
    assert table["contribution"].sum() == pytest.approx(table.attrs["logit"], abs=1e-3)
    heads = table[table["part"] == "head"]
    assert len(heads) == 48 and set(heads["layer"]) == set(range(1, 7)) and set(heads["head"]) == set(range(1, 9))
    assert heads["contribution"].is_monotonic_decreasing
    assert set(table["part"]) == {"head", "feed-forward", "embeddings", "positions", "biases"}
    figure = atlas.logit_attribution(lm_english, text, position=3, token="▁sat", versus="dog")
    z = np.asarray(figure.data[0].z, dtype=float)  # layer × head
    for row in heads.itertuples():
        assert z[row.layer - 1, row.head - 1] == pytest.approx(row.contribution, abs=1e-9)
    assert "‘▁sat’ versus ‘▁dog’" in figure.layout.title.text and "after 3:▁cat" in figure.layout.title.text
    last = atlas.logit_attribution_scores(lm_english, text)  # the next token after the text, the top guess
    top = atlas.analyze(lm_english, text).predictions[-1][0]
    assert (last.attrs["position"], last.attrs["token"]) == (11, top.piece)
    with pytest.raises(ValueError, match="they count from 1"):
        atlas.logit_attribution(lm_english, text, position=0)
    with pytest.raises(ValueError, match="'mat' is not one token of this model: it reads as ▁ma \\+ t"):
        atlas.logit_attribution(lm_english, text, token="mat")


def test_the_logit_lens_has_a_row_per_layer_and_ends_on_the_prediction(lm_english, translation) -> None:
    figure = atlas.logit_lens(lm_english, "The cat sat on the mat")
    z = np.asarray(figure.data[0].z, dtype=float)
    assert z.shape == (7, 8) and list(figure.data[0].y) == ["embeddings"] + [f"layer {i}" for i in range(1, 7)]
    guesses = atlas.analyze(lm_english, "The cat sat on the mat").predictions
    assert list(figure.data[0].text[-1]) == [g[0].piece for g in guesses]
    np.testing.assert_allclose(z[-1], [g[0].prob for g in guesses], atol=1e-5)
    ckpt, _ = translation
    rows = np.asarray(atlas.logit_lens(ckpt, "Where is the station?").data[0].z).shape[0]
    assert rows == ckpt.config.n_decoder_layers + 1


def test_patch_is_comparess_patching_counted_from_one() -> None:
    from analysis.patching import patch

    model = atlas.load("induction")
    clean = "freedom election movies garden river freedom election movies garden"
    corrupted = "freedom election movies garden river window science market doctor"
    expected = patch(model, clean, corrupted, "heads")
    table = atlas.patch_scores(model, clean, corrupted)
    assert (table.attrs["answer"], table.attrs["versus"]) == ("▁river", "▁freedom")
    best = table.iloc[0]
    assert (best["layer"], best["head"]) == (2, 1) and best["restored"] == pytest.approx(expected.scores[1, 0])
    np.testing.assert_allclose(np.asarray(atlas.patch(model, clean, corrupted).data[0].z), expected.scores)
    stream = atlas.patch_scores(model, clean, corrupted, what="residual")
    assert set(stream["position"]) == set(range(1, 11)) and "10:▁garden/▁doctor" in set(stream["token"])
    rough = atlas.patch_scores(model, clean, corrupted, answer="river", versus=expected.versus, approximate=True)
    assert rough.attrs["approximate"] and rough.iloc[0]["layer"] == 2
    with pytest.raises(ValueError, match="attribution patching approximates the heads only"):
        atlas.patch(model, clean, corrupted, what="residual", approximate=True)


def test_value_weighted_draws_in_every_view(lm_analysis) -> None:
    shares = atlas.value_weighted(lm_analysis)
    sublayer = lm_analysis.sublayers["decoder.layers.3.self_attn"]
    np.testing.assert_allclose(shares.sublayers[sublayer.name].weights, sublayer.value_weighted().weights)
    figure = atlas.head(shares, 4, 6)
    np.testing.assert_allclose(
        np.asarray(figure.data[0].z, dtype=float), sublayer.value_weighted().weights[5], atol=1e-6
    )
    with pytest.raises(TypeError, match="value_weighted takes an Analysis"):
        atlas.value_weighted("cat")  # type: ignore[arg-type]


# Names the notebook does not call, and why: from_transformer_lens needs TransformerLens's cache
# (tests/test_imported.py and tests/test_transformer_lens.py cover it); AnalysisWarning is raised, not called, by a
# text over the context, which the notebook's texts are not (tests/test_any_model.py covers it).
NOT_IN_THE_NOTEBOOK = {"from_transformer_lens", "AnalysisWarning"}


def test_the_notebook_calls_every_name_of_the_api() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    missing = [n for n in atlas.__all__ if f"atlas.{n}" not in code and n not in NOT_IN_THE_NOTEBOOK]
    assert missing == [], f"examples/attention_atlas.ipynb never calls {missing}"


def test_notebook_arguments_of_the_wrong_kind_are_one_clear_error_each(lm_analysis, tmp_path) -> None:
    with pytest.raises(CheckpointError, match="load takes a checkpoint's folder or name .*, not NoneType"):
        atlas.load(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="its folder .*missing does not exist; create it first"):
        atlas.save(lm_analysis, tmp_path / "missing" / "cat.json")
    with pytest.raises(TypeError, match="save writes an Analysis .*, not NoneType"):
        atlas.save(None, tmp_path / "cat.json")  # type: ignore[arg-type]
    with pytest.raises(atlas.TraceError, match="file name is a string"):
        atlas.read_trace(b"{}", None)  # type: ignore[arg-type]


def test_load_finds_a_bare_name_in_the_checkpoints_folder(lm_english, tiny_checkpoints, monkeypatch) -> None:
    from inference.catalog import checkpoints_dir

    assert lm_english.name == "lm-english" and lm_english.path == checkpoints_dir() / "lm-english"
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tiny_checkpoints["decoder-only"].parent))
    assert atlas.load("tiny-lm").config.kind == "decoder-only"
    assert atlas.load(tiny_checkpoints["decoder-only"]).name == "tiny-lm"  # a path, as is
    with pytest.raises(CheckpointError, match=r"no-such-model: .* \(there: .*tiny-lm"):
        atlas.load("no-such-model")


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_importing_atlas_loads_no_plotly_and_the_api_no_streamlit() -> None:
    code = (
        "import sys, atlas\n"
        "before = {m.split('.')[0] for m in sys.modules}\n"
        "atlas.head\n"
        "after = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(before & {'plotly', 'pandas', 'torch', 'streamlit'}), sorted(after & {'plotly', 'streamlit'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "['plotly']"]


def test_offline_embeds_plotly_js_and_names_no_cdn() -> None:
    import plotly.io as pio

    from atlas.api.figures import EMBEDDED, OFFLINE

    before = pio.renderers.default
    try:
        atlas.offline()
        assert pio.renderers.default == OFFLINE
        bundle = {}
        for name in OFFLINE.split("+"):
            bundle |= pio.renderers[name].to_mimebundle({"data": [{"type": "heatmap", "z": [[1]]}], "layout": {}})
        assert set(bundle) == {PLOTLY_JSON, "text/html"}
        assert "<script src" not in bundle["text/html"] and not [c for c in CDNS if c in bundle["text/html"]]
        assert pio.renderers[EMBEDDED].connected is False  # activate() embeds the library, from the package
    finally:
        pio.renderers.default = before


if __name__ == "__main__":  # execute the notebook and save it as committed: outputs kept, the plotly.js copy not
    import nbformat

    nbformat.write(without_library(execute()), NOTEBOOK)
    print(f"{NOTEBOOK.relative_to(ROOT)}: {NOTEBOOK.stat().st_size:,} bytes")

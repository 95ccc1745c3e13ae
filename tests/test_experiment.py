"""Seed 003's experiment: the centre-word model, its text, its 4-bit checkpoints, the command that trains the table,
the shipped table, and the Experiment page and Explore on its models (AppTest)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from test_app import frame, html_table

from analysis.analyze import analyze
from inference.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from inference.experiment import PRUNED, ROWS, SEED_BEST, table
from inference.quantized import dequantize, quantize
from inference.text import InputError, centre_context
from inference.tokenizer import Tokenizer
from model.config import ConfigError, ModelConfig, Published
from model.factory import build_model
from viz.labels import display_piece
from viz.style import MASKED

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
ZOO = [ROOT / "checkpoints" / row.name for row in ROWS]
TOKENIZER = ZOO[0] / "tokenizer.model"


def centre_config(**overrides) -> ModelConfig:
    fields = dict(
        kind="encoder-only", vocab_size=30, d_model=16, n_heads=4, n_encoder_layers=2, n_decoder_layers=0, d_ff=32,
        dropout=0.0, max_len=4, positional="learned", norm="post", tie_embeddings=False,
        published=Published(embed_scale=False, sum_outputs=True),
    )  # fmt: skip
    return ModelConfig(**{**fields, **overrides})


# The model ----------------------------------------------------------------------------------------------------------


def test_the_centre_word_model_scores_the_sum_of_its_outputs() -> None:
    torch.manual_seed(0)
    model = build_model(centre_config()).eval()
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    logits, trace = model(ids, activations=True)
    assert logits.shape == (2, 1, 30)
    summed = trace.activations["encoder.output"].sum(dim=1)  # (B, d_model)
    assert torch.allclose(logits[:, 0], model.generator(summed), atol=1e-5)
    assert list(trace.attention) == ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"]
    assert trace.attention["encoder.layers.0.self_attn"].weights.shape == (2, 4, 4, 4)
    assert bool(trace.attention["encoder.layers.0.self_attn"].mask.all())  # no mask: every word sees every word


def test_shared_layers_apply_one_layers_weights_twice_and_count_them_once() -> None:
    config = centre_config(published=Published(embed_scale=False, sum_outputs=True, shared_layers=True))
    torch.manual_seed(0)
    model = build_model(config).eval()
    assert sum(p.numel() for p in model.parameters()) == config.n_parameters
    assert not any(name.startswith("encoder.layers.1.") for name in model.state_dict())
    unshared = centre_config()
    assert config.n_parameters < unshared.n_parameters == sum(p.numel() for p in build_model(unshared).parameters())
    ids = torch.tensor([[5, 6, 7, 8]])
    _, trace = model(ids)
    first, second = (trace.attention[f"encoder.layers.{i}.self_attn"].weights for i in (0, 1))
    assert not torch.allclose(first, second)  # the same weights, on the first application's output
    layer, mask = model.encoder.layers[0], trace.attention["encoder.layers.0.self_attn"].mask
    by_hand = layer(layer(model.with_positions(model.embed(ids), 0)[0], mask, False)[0], mask, False)[0]
    assert torch.allclose(model(ids)[0][:, 0], model.generator(by_hand.sum(dim=1)), atol=1e-5)


def test_the_switches_belong_to_an_encoder_alone() -> None:
    with pytest.raises(ConfigError, match="encoder-only"):
        dataclasses.replace(centre_config(), kind="decoder-only", n_encoder_layers=0, n_decoder_layers=2)
    with pytest.raises(ConfigError, match="sum_outputs"):
        Published(shared_layers=True)
    with pytest.raises(ConfigError, match="BERT"):
        Published(sum_outputs=True, mlm_head=True)


# The text -----------------------------------------------------------------------------------------------------------


def test_the_words_around_the_blank_are_what_the_model_reads() -> None:
    notes: list[str] = []
    assert centre_context("The cat ___ on the mat.", 2, notes) == ["the", "cat", "on", "the"]
    assert "the cat ___ on the" in notes[0] and "left out" in notes[0]
    notes = []
    assert centre_context("old man ___ to the", 2, notes) == ["old", "man", "to", "the"] and notes == []
    assert centre_context("Once upon a time", 2, []) == ["once", "upon", "a", "time"]  # four words: blank in the middle
    for text, message in (
        ("the ___ on the mat", "1 before it"),
        ("a ___ b ___ c", "2 blanks"),
        ("The capital of France is", "missing word"),
    ):
        with pytest.raises(InputError, match=message):
            centre_context(text, 2, [])


def test_a_whole_word_tokenizer_keeps_one_position_for_each_unknown_word() -> None:
    tok = Tokenizer.from_file(TOKENIZER)
    ids = tok.encode("the zzzz qqqq man")
    assert len(ids) == 4 and ids[1] == ids[2] == tok.unk_id  # sentencepiece alone gives 3 ids here


# 4-bit checkpoints --------------------------------------------------------------------------------------------------


def test_a_4_bit_checkpoint_loads_the_weights_it_quantised(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model(centre_config(d_model=32, vocab_size=2004, tie_embeddings=True))
    save_checkpoint(tmp_path / "m", model, TOKENIZER.read_bytes(), {"task": "t", "data": {}, "hyperparameters": {},
                    "metrics": {}, "command": "c"}, bits=4)  # fmt: skip
    loaded = load_checkpoint(tmp_path / "m").model
    expected = dequantize(quantize(model.state_dict()))
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    assert loaded.generator.weight.data_ptr() == loaded.embed.lut.weight.data_ptr()  # tied: stored once, tied again
    from safetensors.torch import load_file, save_file

    path = tmp_path / "m" / "model.safetensors"
    stored = load_file(str(path))
    packed = next(name for name in stored if name.endswith(".int4"))
    from inference.checkpoint import read_metadata

    meta = read_metadata(path)
    save_file({**stored, packed: stored[packed].to(torch.int32)}, str(path), metadata=meta)
    with pytest.raises(CheckpointError, match="uint8"):
        load_checkpoint(tmp_path / "m")


# The command --------------------------------------------------------------------------------------------------------


def tiny_data(folder: Path) -> Path:
    """5-grams of the shipped vocabulary's words, with a pattern to learn: the centre is the word after the second."""
    tok = Tokenizer.from_file(TOKENIZER)
    words = [tok.pieces([i])[0].removeprefix("▁") for i in range(4, 204)]
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for split, n in (("train", 3000), ("valid", 300), ("test", 300)):
        lines = []
        for _ in range(n):
            a, b, d, e = rng.integers(0, 199, size=4)
            lines.append(" ".join(words[i] for i in (a, b, b + 1, d, e)))
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copyfile(TOKENIZER, folder / "tokenizer.model")
    sources = {"task": "fivegram", "sources": [{"name": "synthetic", "license": "test data"}]}
    (folder / "sources.json").write_text(json.dumps(sources), encoding="utf-8")
    return folder


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_the_command_trains_evaluates_and_prunes_then_resumes_row_by_row(tmp_path: Path, capsys) -> None:
    from training.experiment import main

    data, out = tiny_data(tmp_path / "data"), tmp_path / "out"
    args = ["--data", str(data), "--out", str(out), "--rows", "fivegram-1L-1H", "fivegram-1L-16H", "--steps", "40"]
    assert main(args) == 0
    cards = {p.name: json.loads((p / "card.json").read_text()) for p in out.iterdir()}
    assert set(cards) == {"fivegram-1L-1H", "fivegram-1L-16H"}
    for name, card in cards.items():
        metrics = card["metrics"]
        assert metrics["split"] == "test" and metrics["examples"] == 300
        assert 0 <= metrics["accuracy"] <= 1 and metrics["loss"] > 0
        assert card["training"]["finished"] and card["training"]["seconds"] > 0
        assert card["experiment"]["parameters"] == load_checkpoint(out / name).config.n_parameters
        assert np.asarray(card["experiment"]["mean_attention"]).shape[1:] == (1 if "1H" in name else 16, 4, 4)
    pruning = cards["fivegram-1L-16H"]["experiment"]["pruning"]
    assert [p["removed"] for p in pruning["curve"]] == list(range(17))
    assert pruning["curve"][0]["accuracy"] == cards["fivegram-1L-16H"]["metrics"]["accuracy"]
    assert "pruning" not in cards["fivegram-1L-1H"]["experiment"]
    assert analyze(load_checkpoint(out / "fivegram-1L-16H"), "the old man ___ to the river").blank
    stamp = (out / "fivegram-1L-1H" / "model.safetensors").stat().st_mtime_ns
    capsys.readouterr()
    assert main(args) == 0
    assert "done already" in capsys.readouterr().err
    assert (out / "fivegram-1L-1H" / "model.safetensors").stat().st_mtime_ns == stamp
    assert main(["--out", str(out), "--table"]) == 0  # docs/checkpoints.md's table, from the cards
    printed = capsys.readouterr().out
    accuracy = cards["fivegram-1L-16H"]["metrics"]["accuracy"]
    assert "| `fivegram-1L-16H` | 1 × 16 |" in printed and f"**{accuracy:.4f}**" in printed
    assert "fivegram-1L-16H: accuracy" in printed and "most important heads" in printed


# The shipped table --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ZOO, ids=[f.name for f in ZOO])
def test_every_model_of_the_table_ships_with_its_figures(folder: Path) -> None:
    ckpt = load_checkpoint(folder)
    card, config = ckpt.card, ckpt.config
    assert config.switches.sum_outputs and config.max_len == 4
    assert card["experiment"]["parameters"] == config.n_parameters == sum(p.numel() for p in ckpt.model.parameters())
    assert card["metrics"]["split"] == "test" and 0.1 < card["metrics"]["accuracy"] < 0.6
    assert card["command"].startswith("python -m atlas experiment")
    attention = np.asarray(card["experiment"]["mean_attention"])
    assert attention.shape == (config.n_encoder_layers, config.n_heads, 4, 4)
    assert np.allclose(attention.sum(axis=-1), 1, atol=0.01)  # each query's weights, averaged, still sum to 1
    if folder.name in PRUNED:
        curve = card["experiment"]["pruning"]["curve"]
        assert len(curve) == config.n_encoder_layers * config.n_heads + 1
        assert curve[0]["accuracy"] == card["metrics"]["accuracy"]


def test_the_shipped_table_has_every_row_and_the_reports_figures_beside() -> None:
    rows = table({f.name: load_checkpoint(f).card for f in ZOO})
    assert [r["name"] for r in rows] == [row.name for row in ROWS]
    by_name = {r["name"]: r for r in rows}
    assert by_name["fivegram-3L-8H"]["seed_accuracy"] == SEED_BEST
    assert by_name["fivegram-3L-16H"]["seed_accuracy"] is None  # the report ran no 3 × 16
    assert sum(f.stat().st_size for d in ZOO for f in d.iterdir()) < 3.2e6


# The app ------------------------------------------------------------------------------------------------------------


@pytest.fixture
def zoo_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for folder in ZOO:
        shutil.copytree(folder, tmp_path / folder.name)
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    return tmp_path


def test_the_experiment_page_shows_the_table_the_charts_and_the_curves(zoo_only: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/experiment.py").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    shown = frame(at, "seed 003 accuracy")
    assert list(shown["model"]) == [row.name for row in ROWS]  # one row per model
    assert float(shown.set_index("model").loc["fivegram-3L-8H", "seed 003 accuracy"]) == SEED_BEST
    report = [t for el in at.get("html") if (t := html_table(el.proto.body)) is not None and "here" in t.columns]
    assert len(report) == 1 and len(report[0]) == 12  # the report's Table 1, every row
    charts = {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    assert {"accuracy_chart", "time_chart", "pruning_chart", "remaining_heads"} <= set(charts)
    for axis in ("yaxis", "yaxis2"):  # each panel's accuracy axis spans a tenth at least: no cliff out of 0.01
        low, high = charts["accuracy_chart"]["layout"][axis]["range"]
        assert high - low >= 0.1 - 1e-9 and 0 <= low < high <= 1
    chosen = at.selectbox(key="pruned_model").value
    accuracy = load_checkpoint(zoo_only / chosen).card["metrics"]["accuracy"]
    curve = next(t for t in charts["pruning_chart"]["data"] if t["name"] == chosen)
    assert curve["x"][0] == 0 and curve["y"][0] == accuracy  # the first point: the model's own accuracy
    at.slider(key="heads_removed").set_value(5).run()
    assert not at.exception
    grid = json.loads(next(el for el in at.get("plotly_chart") if el.key == "remaining_heads").proto.spec)
    covers = [s for s in grid["layout"]["shapes"] if s["type"] == "rect" and s.get("fillcolor") == MASKED]
    assert len(covers) == 5  # the five removed heads, covered


def test_a_model_of_the_table_opens_on_explore_and_guesses_the_blank(zoo_only: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/experiment.py").run()
    at.selectbox(key="experiment_model").set_value("fivegram-3L-8H").run()
    at.button(key="experiment_open").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="model").value == "fivegram-3L-8H" and at.title[0].value == "Explore"
    at.switch_page("views/explore.py")  # AppTest runs the page it was given, not the one the app switched to
    at.text_area(key="text").set_value("she opened the ___ and saw").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    top = frame(at, "probability")
    expected = analyze(load_checkpoint(zoo_only / "fivegram-3L-8H"), "she opened the ___ and saw").predictions[0]
    assert list(top["token"]) == [display_piece(p.piece) for p in expected][: len(top)]
    assert any("the word between" in c.value.lower() for c in at.caption)
    spec = json.loads(next(el for el in at.get("plotly_chart")).proto.spec)
    heat = next(t for t in spec["data"] if t["type"] == "heatmap")
    from plotly_data import decode_typed_array

    z = decode_typed_array(heat["z"]) if isinstance(heat["z"], dict) else np.asarray(heat["z"])
    assert z.shape == (4, 4)


PAGES = ("explore", "lesson", "generate", "paper", "attention_math", "positional", "masks", "rollout", "head_stats",
         "ablation", "compare", "training")  # fmt: skip


# The everyday tier opens the pages a 5-gram model is first shown on; the others run in CI (slow).
EVERYDAY = ("explore", "lesson", "attention_math")


@pytest.mark.parametrize("page", [pytest.param(p, marks=[] if p in EVERYDAY else [pytest.mark.slow]) for p in PAGES])
def test_every_page_works_on_a_model_of_the_table(zoo_only: Path, page: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = "fivegram-2Ls-1H"
    at.run()
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]

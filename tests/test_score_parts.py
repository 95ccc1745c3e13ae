"""Why a head attends (analysis.score_parts): the table of query parts × key parts sums to the model's own raw score,
in float64 within 1e-6, on every shipped checkpoint (every attention type, a first and a last layer) and on tiny
seeded models of the paper's post-norm, a pre-norm, GPT-2's, Llama's (RMSNorm, rotary, grouped-query, no biases)
and BERT's (token types and a norm over the embeddings) switches; the stream's parts add up to the recorded stream;
a float32 model's table sums to its score as closely as float32 allows; bad choices are one-line errors."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from analysis.score_parts import pass_inputs, score_parts, stream_parts
from inference.checkpoint import load_checkpoint
from model.config import ModelConfig, Published
from model.factory import build_model
from model.forward import forward
from model.names import attention_type, layer_name
from viz.score_parts import largest_cells, score_parts_frame, score_parts_heatmap

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (ROOT / "checkpoints").iterdir() if (p / "config.json").is_file())
TEXTS = {"encoder-only": "the old man ___ to the", "other": "The cat sat on the mat because it was"}
SIZES = {"vocab_size": 40, "d_model": 32, "n_heads": 4, "d_ff": 48, "max_len": 24, "dropout": 0.1}
GPT2 = Published(activation="gelu_tanh", embed_scale=False)
LLAMA = Published(n_kv_heads=2, norm_type="rms", activation="swiglu", bias=False, embed_scale=False)
BERT = Published(activation="gelu", embed_scale=False, embed_norm=True, n_token_types=2, norm_eps=1e-12)
VARIANTS = {
    "post-norm translator": ("encoder-decoder", {}),
    "pre-norm translator": ("encoder-decoder", {"norm": "pre", "positional": "learned"}),
    "pre-norm language model": ("decoder-only", {"norm": "pre"}),
    "GPT-2": ("decoder-only", {"norm": "pre", "positional": "learned", "published": GPT2}),
    "Llama": ("decoder-only", {"norm": "pre", "positional": "rotary", "published": LLAMA}),
    "BERT": ("encoder-only", {"positional": "learned", "published": BERT}),
}


def tiny(kind: str, **fields) -> torch.nn.Module:
    layers = {"n_encoder_layers": 2 if kind != "decoder-only" else 0}
    layers["n_decoder_layers"] = 2 if kind != "encoder-only" else 0
    torch.manual_seed(0)
    model = build_model(ModelConfig(kind=kind, **SIZES, **layers, **fields)).eval()
    with torch.no_grad():  # norms start as the identity: give them gains and biases of their own
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm | torch.nn.RMSNorm):
                module.weight.uniform_(0.5, 1.5)
                if getattr(module, "bias", None) is not None:
                    module.bias.normal_(0.0, 0.3)
    return model


def sums_to_the_score(model, ids, source, places) -> None:
    """For the first and last sub-layer of each attention type, head 1 and the last head, at each (query, key) of
    `places`: the table sums to the score."""
    _, trace = forward(model, ids, source, record=True)
    firsts_and_lasts = {}
    for sublayer in trace.attention:
        firsts_and_lasts.setdefault(attention_type(sublayer), [sublayer, sublayer])[1] = sublayer
    for sublayer in {b for pair in firsts_and_lasts.values() for b in pair}:
        record = trace.attention[sublayer]
        n_heads, n_queries, n_keys = record.scores.shape[1:]
        for head in {0, n_heads - 1}:
            for query, key in places(n_queries, n_keys):
                parts = score_parts(model, ids, source, sublayer, head, query, key)
                assert parts.score == pytest.approx(float(record.scores[0, head, query, key].detach()), abs=1e-12)
                assert parts.total == pytest.approx(parts.score, abs=1e-6), (sublayer, head, query, key)
                assert parts.table.shape == (len(parts.query_parts), len(parts.key_parts))


def corners(n_queries: int, n_keys: int) -> list[tuple[int, int]]:
    return [(n_queries - 1, 0), (n_queries // 2, n_keys - 1)]  # a masked key too: its raw score exists


@pytest.mark.parametrize("name", SHIPPED)
def test_the_parts_sum_to_the_raw_score_on_every_shipped_checkpoint(name: str) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / name)
    text = TEXTS["encoder-only" if not ckpt.config.has_decoder else "other"]
    target = (ckpt.config.bos_id, *ckpt.tokenizer.encode("Die Katze"))  # a translator's decoder input
    ids, source = pass_inputs(ckpt, text, target if ckpt.config.has_cross_attention else ())
    if ckpt.config.has_decoder and not ckpt.config.has_cross_attention:
        ids, source = torch.tensor([[ckpt.config.bos_id, *ckpt.tokenizer.encode(text)]]), None
    sums_to_the_score(copy.deepcopy(ckpt.model).double(), ids, source, corners)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_parts_sum_to_the_raw_score_on_the_published_variants(variant: str) -> None:
    kind, fields = VARIANTS[variant]
    model = tiny(kind, **fields).double()
    ids = torch.randint(4, SIZES["vocab_size"], (1, 7), generator=torch.Generator().manual_seed(1))
    source = ids.flip(1) if kind == "encoder-decoder" else None
    sums_to_the_score(model, ids, source, corners)


def test_the_streams_parts_add_up_to_the_recorded_stream() -> None:
    for kind, fields in VARIANTS.values():
        model = tiny(kind, **fields).double()
        ids = torch.randint(4, SIZES["vocab_size"], (1, 6), generator=torch.Generator().manual_seed(2))
        source = ids if kind == "encoder-decoder" else None
        _, trace = forward(model, ids, source, record=True, activations=True)
        for stack in ("encoder", "decoder"):
            if f"{stack}.output" not in trace.activations:
                continue
            torch.testing.assert_close(
                sum(stream_parts(model, trace, stack).values()), trace.activations[f"{stack}.output"][0]
            )
            second = f"{layer_name(stack, 1)}.self_attn"
            torch.testing.assert_close(
                sum(stream_parts(model, trace, stack, stop=second).values()),
                trace.activations[f"{layer_name(stack, 1)}.resid_pre"][0],
            )


def test_a_float32_models_table_sums_to_its_score_as_float32_allows() -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "translate-en-de")
    target = (ckpt.config.bos_id, *ckpt.tokenizer.encode("Wo ist der Bahnhof?"))
    ids, source = pass_inputs(ckpt, "Where is the station?", target)
    parts = score_parts(ckpt.model, ids, source, "decoder.layers.1.cross_attn", 2, 3, 1)
    assert parts.total == pytest.approx(parts.score, rel=1e-5, abs=1e-5)
    assert parts.key_parts[:2] == ("token embeddings", "positions")  # the encoder's stream, not the decoder's
    assert "L3 H8" in parts.key_parts and "L1 cross H1" not in parts.key_parts  # every encoder layer's heads
    assert "L2 H1" in parts.query_parts and "L2 cross H1" not in parts.query_parts  # only what came before


def test_the_figure_and_tables_show_the_cells_that_sum_to_the_score() -> None:
    model = tiny("decoder-only", norm="pre").double()
    ids = torch.arange(4, 10)[None]
    parts = score_parts(model, ids, None, "decoder.layers.1.self_attn", 1, 5, 2)
    frame = score_parts_frame(parts.query_parts, parts.key_parts, parts.table)
    assert frame.to_numpy().sum() == pytest.approx(parts.score, abs=1e-6)
    fig = score_parts_heatmap(frame, "Why")
    go.Figure(fig.to_dict())  # valid Plotly, though built without validation
    assert np.allclose(np.array(fig.data[0].z), parts.table)
    assert fig.layout.title.text == "Why"  # the sums are said beside it: in the title they wrapped it to 4 lines
    assert fig.data[0].colorbar.title.text == "part of q·k/√dₖ"  # the score's own units, not a share of it
    assert list(fig.layout.xaxis.ticktext) == list(frame.columns)  # every part named where they fit
    assert list(fig.layout.yaxis.ticktext) == list(frame.index)
    top = largest_cells(frame, 3)
    assert list(top.columns) == ["query part", "key part", "contribution", "share of all"]
    assert abs(top["contribution"].iloc[0]) == pytest.approx(np.abs(parts.table).max())


def test_a_choice_out_of_range_is_a_one_line_error() -> None:
    model = tiny("decoder-only", norm="pre")
    ids = torch.arange(4, 10)[None]
    with pytest.raises(ValueError, match="head 9 is out of range: decoder.layers.0.self_attn has heads 1 to 4"):
        score_parts(model, ids, None, "decoder.layers.0.self_attn", 8, 0, 0)
    with pytest.raises(ValueError, match="key 7 is out of range"):
        score_parts(model, ids, None, "decoder.layers.0.self_attn", 0, 0, 6)
    with pytest.raises(ValueError, match="no sub-layer 'decoder.layers.5.self_attn'"):
        score_parts(model, ids, None, "decoder.layers.5.self_attn", 0, 0, 0)


def test_the_notebook_counts_from_one_and_its_table_sums_to_the_pages_score() -> None:
    import atlas

    lm = atlas.load("lm-english")
    text = "The cat sat on the mat because it"
    split = atlas.score_parts(lm, text, layer=3, head=2, query=8, key=3)
    sublayer = atlas.analyze(lm, text).sublayer("decoder.self_attn", 2)
    assert split.score == pytest.approx(float(sublayer.scores[1, 7, 2]), abs=1e-5)  # the page's raw score, from 1
    assert split.table.to_numpy().sum() == pytest.approx(split.score, abs=1e-5)
    assert (split.layer, split.head, split.query, split.key, split.masked) == (3, 2, 8, 3, False)
    assert split.key_token == "3:▁cat" and split.table.index[0] == "token embeddings"
    assert "L2 H8" in split.table.index and "L3 H1" not in split.table.index
    assert split.figure().data[0].type == "heatmap" and f"{split.score:+.4f}" in split.figure().layout.title.text
    with pytest.raises(ValueError, match="key position 99 is out of range"):
        atlas.score_parts(lm, text, layer=1, head=1, query=1, key=99)
    with pytest.raises(TypeError, match="score_parts takes a loaded model"):
        atlas.score_parts(sublayer, text, layer=1, head=1, query=1, key=1)


def test_a_querys_whole_row_of_keys_comes_from_one_pass_and_equals_each_key_alone(monkeypatch) -> None:
    from analysis import score_parts as module

    for variant in ("post-norm translator", "Llama"):
        kind, fields = VARIANTS[variant]
        model = tiny(kind, **fields).double()
        ids = torch.randint(4, SIZES["vocab_size"], (1, 7), generator=torch.Generator().manual_seed(2))
        source = ids.flip(1) if kind == "encoder-decoder" else None
        for sublayer in ("decoder.layers.1.self_attn", "decoder.layers.1.cross_attn")[: 2 if source is not None else 1]:
            n_keys = 7
            alone = [score_parts(model, ids, source, sublayer, 1, 5, key) for key in range(n_keys)]
            passes = []
            traced = module.forward
            counting = lambda *a, passes=passes, traced=traced, **k: passes.append(1) or traced(*a, **k)
            monkeypatch.setattr(module, "forward", counting)
            row = module.row_parts(model, ids, source, sublayer, 1, 5, [6, *range(6)])
            monkeypatch.setattr(module, "forward", traced)
            assert passes == [1] and [parts.key for parts in row] == [6, *range(6)]
            for parts in row:
                expected = alone[parts.key]
                assert (parts.query_parts, parts.key_parts) == (expected.query_parts, expected.key_parts)
                np.testing.assert_allclose(parts.table, expected.table, rtol=0, atol=1e-12)
                assert (parts.score, parts.masked) == (expected.score, expected.masked)


def test_the_notebook_splits_a_whole_row_of_keys_in_one_call() -> None:
    import atlas

    lm = atlas.load("lm-english")
    text = "The cat sat on the mat because it"
    row = atlas.score_parts(lm, text, layer=3, head=2, query=8, key=range(1, 10))
    assert [split.key for split in row] == list(range(1, 10)) and row[-1].masked and not row[0].masked
    one = atlas.score_parts(lm, text, layer=3, head=2, query=8, key=3)
    assert row[2].key_token == one.key_token == "3:▁cat" and row[2].score == one.score
    np.testing.assert_allclose(row[2].table.to_numpy(), one.table.to_numpy(), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="key position 99 is out of range"):
        atlas.score_parts(lm, text, layer=1, head=1, query=1, key=[1, 99])
    with pytest.raises(ValueError, match="non-empty list"):
        atlas.score_parts(lm, text, layer=1, head=1, query=1, key=[])

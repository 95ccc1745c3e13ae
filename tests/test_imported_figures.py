"""A Hugging Face model's attention, imported (analysis.imported.from_huggingface, or from_transformer_lens as a
TransformerLens cache holds it), draws the figures the same model draws when the app loads it: a tiny random GPT-2
and BERT, built and saved here as the Hugging Face folders the app reads (config.json, model.safetensors,
tokenizer.json), loaded by the app's own loader and analysed as the app does; the same transformers model then runs
on the very ids the app read, and every figure of atlas.api (each head's heatmap, the grid of heads, the Paper view,
rollout, the mask, the head statistics) is compared: its data arrays to 1e-5, everything else exactly, but for the
titles, which may name where the attention came from. No download."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")
from plotly_data import decode_typed_array  # noqa: E402
from test_pretrained_loaders import bert_tokenizer  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

import atlas.api as atlas  # noqa: E402
from analysis.imported import from_huggingface, from_transformer_lens  # noqa: E402
from analysis.record import Analysis  # noqa: E402
from inference.text import encode_first_stack  # noqa: E402
from viz.paper import BUCKET_WIDTH, BUCKETS  # noqa: E402
from viz.style import frozen  # noqa: E402

ATOL = 1e-5  # our model and transformers compute the same weights in float32, in another order
TEXT = "the cat sat on the mat"
END = "<|endoftext|>"
MERGES = [("Ġ", "c"), ("Ġc", "a"), ("Ġca", "t"), ("Ġ", "s"), ("a", "t"), ("Ġs", "at"), ("Ġ", "t"), ("h", "e")]


def gpt2_tokenizer() -> Tokenizer:
    """Byte-level BPE as GPT-2's tokenizer.json has it, in miniature: the 256 byte symbols, a few merges,
    <|endoftext|> last."""
    tokens = sorted(pre_tokenizers.ByteLevel.alphabet()) + ["".join(pair) for pair in MERGES] + [END]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, MERGES))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(END, special=True, normalized=False)])
    return tok


def tiny_gpt2() -> transformers.GPT2LMHeadModel:
    """2 layers × 4 heads; initialised wide (0.3, not 0.02), so that heads attend sharply and differ."""
    vocab = gpt2_tokenizer().get_vocab_size()
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=vocab,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=vocab - 1,
        eos_token_id=vocab - 1,
        initializer_range=0.3,
        attn_implementation="eager",
    )
    return transformers.GPT2LMHeadModel(config).eval()


def tiny_bert() -> transformers.BertForMaskedLM:
    """BERT as bert-base-uncased is published, with its masked-LM head; 2 layers × 4 heads, initialised wide."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=bert_tokenizer().get_vocab_size(),
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=48,
        max_position_embeddings=32,
        initializer_range=0.3,
        attn_implementation="eager",
    )
    return transformers.BertForMaskedLM(config).eval()


@pytest.fixture(scope="module", params=["gpt2", "bert", "transformer_lens"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, Analysis]:
    """(the app's Analysis, the imported one) of TEXT by one tiny model; "transformer_lens": the GPT-2's attention
    as a TransformerLens cache holds it (`blocks.{l}.attn.hook_pattern`, [batch, heads, queries, keys])."""
    bert = request.param == "bert"
    reference, tokenizer = (tiny_bert(), bert_tokenizer()) if bert else (tiny_gpt2(), gpt2_tokenizer())
    folder = tmp_path_factory.mktemp("published") / f"tiny-{request.param}"
    reference.save_pretrained(folder, safe_serialization=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    ckpt = atlas.load(folder)
    apps = atlas.analyze(ckpt, TEXT)
    # the ids the app's model read: GPT-2's start with <|endoftext|>, BERT's are [CLS] text [SEP]
    ids = encode_first_stack(ckpt, apps.text, [])
    pieces = apps.target_pieces if apps.kind == "decoder-only" else apps.source_pieces
    assert tuple(ckpt.tokenizer.pieces(ids)) == pieces
    with torch.no_grad():
        outputs = reference(torch.tensor([ids]), output_attentions=True)
    if request.param == "transformer_lens":
        cache = {f"blocks.{i}.attn.hook_pattern": a.numpy() for i, a in enumerate(outputs.attentions)}
        return apps, from_transformer_lens(cache, pieces, name="tiny-gpt2")
    return apps, from_huggingface(outputs, pieces, name=f"tiny-{request.param}")


def n_layers(analysis: Analysis) -> int:
    return len(analysis.layers(analysis.attentions[0]))


def series(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A frozen figure's series as plotly.js receives them, their typed arrays decoded."""
    return [
        {k: decode_typed_array(v) if isinstance(v, dict) and "bdata" in v else v for k, v in s.items()}
        for s in spec["data"]
    ]


def assert_same_figure(ours: Any, theirs: Any, steps: int = 0, derived: tuple[str, ...] = ()) -> None:
    """Series by series, the same keys: float arrays equal to ATOL, integer arrays to `steps`, everything else
    identical but the keys `derived` (what a figure prints of its own arrays: compared through them). The layouts
    are identical but for their titles."""
    mine, other = frozen(ours), frozen(theirs)
    for a, b in zip(series(mine), series(other), strict=True):
        assert a.keys() == b.keys()
        for key in a.keys() - set(derived):
            if isinstance(a[key], np.ndarray) and a[key].dtype.kind in "fiu":
                atol = ATOL if a[key].dtype.kind == "f" else steps
                np.testing.assert_allclose(a[key].astype(np.float64), b[key], rtol=0, atol=atol, err_msg=key)
            else:
                assert a[key] == b[key], key
    untitled = [{k: v for k, v in spec["layout"].items() if k != "title"} for spec in (mine, other)]
    assert untitled[0] == untitled[1]


def test_the_imported_weights_are_the_apps(pair) -> None:
    apps, imported = pair
    assert imported.kind == apps.kind and list(imported.sublayers) == list(apps.sublayers)
    for name, sublayer in apps.sublayers.items():
        ours = imported.sublayers[name]
        np.testing.assert_allclose(ours.weights, sublayer.weights, rtol=0, atol=ATOL)
        assert (ours.query_pieces, ours.key_pieces) == (sublayer.query_pieces, sublayer.key_pieces)
        assert np.array_equal(ours.mask, sublayer.mask)


def test_every_heads_heatmap_is_the_apps(pair) -> None:
    apps, imported = pair
    for layer in range(1, n_layers(apps) + 1):
        for head in [*range(1, apps.n_heads + 1), "average"]:
            assert_same_figure(atlas.head(imported, layer, head), atlas.head(apps, layer, head))


def test_the_grid_of_heads_is_the_apps(pair) -> None:
    apps, imported = pair
    # the grid quantises each weight to a step of 1/255: weights 1e-6 apart may round to neighbouring steps
    assert_same_figure(atlas.heads(imported), atlas.heads(apps), steps=1)


def test_the_paper_view_draws_the_apps_lines(pair) -> None:
    apps, imported = pair
    # A line is drawn from the threshold (0.1) up, with its bucket's opacity (viz.paper: edges every 0.05): equal
    # weights draw equal lines where none lies within ATOL of an edge, as these seeded models' weights do not.
    edges = np.arange(2, BUCKETS) * BUCKET_WIDTH  # 0.1 to 0.95; 1.0 is in the last bucket, below 0.1 undrawn
    weights = apps.stacked(apps.attentions[0]).ravel()
    assert np.abs(weights[:, None] - edges).min() > ATOL, "a weight sits on a bucket's edge: choose another seed"
    for layer in range(1, n_layers(apps) + 1):
        for head in [None, *range(1, apps.n_heads + 1)]:
            assert_same_figure(atlas.paper(imported, layer, head), atlas.paper(apps, layer, head))


def test_rollout_and_mask_are_the_apps(pair) -> None:
    apps, imported = pair
    for layer in range(1, n_layers(apps) + 1):
        for residual in (True, False):
            assert_same_figure(
                atlas.rollout(imported, layer, residual=residual),
                atlas.rollout(apps, layer, residual=residual),
                derived=("text",),  # each cell's number: z to 2 decimals
            )
    assert_same_figure(atlas.mask(imported), atlas.mask(apps))


def test_the_head_statistics_are_the_apps(pair) -> None:
    apps, imported = pair
    ours, theirs = atlas.head_stats(imported), atlas.head_stats(apps)
    numbers = ours.select_dtypes("float").columns
    pd.testing.assert_frame_equal(ours.drop(columns=numbers), theirs.drop(columns=numbers))
    np.testing.assert_allclose(ours[numbers].to_numpy(), theirs[numbers].to_numpy(), rtol=0, atol=ATOL)

"""analysis.imported: attention computed elsewhere (plain arrays, Hugging Face outputs, a TransformerLens cache, a
trace file this app exported) becomes an Analysis equal to its source, and every bad input is one TraceError whose
message names what disagrees. The Hugging Face models are tiny, random and built here: nothing is downloaded."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis import imported
from analysis.analyze import analyze
from analysis.export import FORMAT, to_json, to_json_object, to_npz_bytes
from analysis.imported import (
    TraceError,
    arrays,
    checks,
    from_arrays,
    from_huggingface,
    from_transformer_lens,
    read_trace,
    trace,
)
from analysis.record import Analysis
from inference.checkpoint import load_checkpoint
from training.tiny import make_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TOKENS = ["The", "Ġcat", "Ġsat", "."]
IDS = [[5, 7, 9, 3, 11]]


def normalized(shape: tuple[int, ...], causal: bool, seed: int = 0) -> np.ndarray:
    """Random attention weights [..., T, T]: rows sum to 1, and with `causal` nothing above the diagonal."""
    weights = np.random.default_rng(seed).random(shape)
    if causal:
        weights = np.tril(weights)
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def causal_layers(layers: int = 2, heads: int = 2, tokens: int = 4) -> list[np.ndarray]:
    return list(normalized((layers, heads, tokens, tokens), causal=True))


def tokens_for(ids: list[list[int]]) -> list[str]:
    return [f"t{i}" for i in ids[0]]


# --- tiny Hugging Face models --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_outputs():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=16,
        vocab_size=50,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        return model(torch.tensor(IDS), output_attentions=True)


@pytest.fixture(scope="module")
def bert_outputs():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = BertModel(config).eval()
    with torch.no_grad():
        return model(torch.tensor(IDS), output_attentions=True)


@pytest.fixture(scope="module")
def bart_outputs():
    from transformers import BartConfig, BartModel

    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=50,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = BartModel(config).eval()
    with torch.no_grad():
        return model(torch.tensor(IDS), decoder_input_ids=torch.tensor([[2, 5, 6]]), output_attentions=True)


def assert_imported(analysis: Analysis, name: str, n_heads: int) -> None:
    """What every imported Analysis leaves empty (analysis.imported's docstring)."""
    assert analysis.checkpoint == name
    assert analysis.predictions == () and analysis.target_ids == ()
    assert analysis.kv_heads == analysis.n_heads == n_heads
    assert analysis.positional == imported.UNKNOWN_POSITIONAL
    first = analysis.target_pieces if analysis.kind == "decoder-only" else analysis.source_pieces
    assert analysis.first_positional_encoding.shape == (len(first), 0)
    assert analysis.text == " ".join(first)
    for sublayer in analysis.sublayers.values():
        assert sublayer.scores is None and sublayer.values is None
        assert sublayer.weights.dtype == np.float32 and sublayer.mask.dtype == bool


def test_huggingface_gpt2_is_decoder_only_with_the_models_own_weights(gpt2_outputs) -> None:
    tokens = tokens_for(IDS)
    analysis = from_huggingface(gpt2_outputs, tokens, name="tiny-gpt2")
    assert analysis.kind == "decoder-only"
    assert list(analysis.sublayers) == ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]
    assert analysis.source_pieces is None and analysis.target_pieces == tuple(tokens)
    causal = np.tril(np.ones((5, 5), dtype=bool))
    for sublayer, expected in zip(analysis.sublayers.values(), gpt2_outputs.attentions):
        assert np.allclose(sublayer.weights, expected[0].numpy(), atol=1e-6)
        assert np.array_equal(sublayer.mask, causal)
        assert sublayer.query_pieces == sublayer.key_pieces == tuple(tokens)
    assert_imported(analysis, "tiny-gpt2", 2)


def test_huggingface_bert_is_encoder_only_every_cell_allowed(bert_outputs) -> None:
    tokens = tokens_for(IDS)
    analysis = from_huggingface(bert_outputs, tokens)
    assert analysis.kind == "encoder-only"
    assert list(analysis.sublayers) == ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"]
    assert analysis.source_pieces == tuple(tokens) and analysis.target_pieces == ()
    for sublayer, expected in zip(analysis.sublayers.values(), bert_outputs.attentions):
        assert np.allclose(sublayer.weights, expected[0].numpy(), atol=1e-6)
        assert sublayer.mask.all() and sublayer.mask.shape == (5, 5)
    assert_imported(analysis, "huggingface", 2)


def test_huggingface_numpy_outputs_and_an_explicit_kind(gpt2_outputs, bert_outputs) -> None:
    as_numpy = {"attentions": tuple(a.numpy() for a in gpt2_outputs.attentions)}
    analysis = from_huggingface(as_numpy, tokens_for(IDS), kind="decoder-only")
    for sublayer, expected in zip(analysis.sublayers.values(), gpt2_outputs.attentions):
        assert np.allclose(sublayer.weights, expected[0].numpy(), atol=1e-6)
    # a causal model's weights read both ways are still valid weights; the reverse is refused below
    assert from_huggingface(gpt2_outputs, tokens_for(IDS), kind="encoder-only").kind == "encoder-only"
    with pytest.raises(TraceError, match=r"layer 1, head 1, query 1 \('t5'\) gives weight .* to key 2 .*causal"):
        from_huggingface(bert_outputs, tokens_for(IDS), kind="decoder-only")


def test_huggingface_one_token_is_read_as_causal() -> None:
    one = {"attentions": (np.ones((1, 2, 1, 1), dtype=np.float32),)}
    assert from_huggingface(one, ["a"]).kind == "decoder-only"


def test_huggingface_encoder_decoder(bart_outputs) -> None:
    source, target = tokens_for(IDS), ["<s>", "Wo", "?"]
    analysis = from_huggingface(bart_outputs, target, source_tokens=source, name="tiny-bart")
    assert analysis.kind == "encoder-decoder"
    assert list(analysis.sublayers) == [
        "encoder.layers.0.self_attn",
        "encoder.layers.1.self_attn",
        "decoder.layers.0.self_attn",
        "decoder.layers.0.cross_attn",
        "decoder.layers.1.self_attn",
        "decoder.layers.1.cross_attn",
    ]
    for layer in range(2):
        for attention, outputs, shape in (
            ("encoder.self_attn", bart_outputs.encoder_attentions, (5, 5)),
            ("decoder.self_attn", bart_outputs.decoder_attentions, (3, 3)),
            ("decoder.cross_attn", bart_outputs.cross_attentions, (3, 5)),
        ):
            sublayer = analysis.sublayer(attention, layer)
            assert np.allclose(sublayer.weights, outputs[layer][0].numpy(), atol=1e-6)
            expected = np.tril(np.ones(shape, dtype=bool)) if attention == "decoder.self_attn" else np.ones(shape, bool)
            assert np.array_equal(sublayer.mask, expected)
    assert analysis.sublayer("decoder.cross_attn", 0).key_pieces == tuple(source)
    assert analysis.output_text == "<s> Wo ?"
    assert_imported(analysis, "tiny-bart", 2)


def test_huggingface_outputs_without_attentions() -> None:
    with pytest.raises(TraceError, match=r"no attentions: call the model with output_attentions=True"):
        from_huggingface({"logits": np.zeros((1, 4, 50))}, TOKENS)
    with pytest.raises(TraceError, match=r'no attentions: .*attn_implementation="eager"'):  # sdpa: a None a layer
        from_huggingface({"attentions": (None, None)}, TOKENS)
    with pytest.raises(TraceError, match=r"lack cross_attentions"):
        from_huggingface({"encoder_attentions": causal_layers(), "decoder_attentions": causal_layers()}, TOKENS)


# --- TransformerLens -----------------------------------------------------------------------------------------------


def test_transformer_lens_cache(gpt2_outputs) -> None:
    cache = {f"blocks.{i}.attn.hook_pattern": a.numpy() for i, a in enumerate(gpt2_outputs.attentions)}
    cache["blocks.0.hook_resid_pre"] = np.zeros((1, 5, 16))  # other hooks are ignored
    analysis = from_transformer_lens(cache, tokens_for(IDS))
    assert analysis.kind == "decoder-only" and analysis.checkpoint == "transformer_lens"
    for sublayer, expected in zip(analysis.sublayers.values(), gpt2_outputs.attentions):
        assert np.allclose(sublayer.weights, expected[0].numpy(), atol=1e-6)
    assert_imported(analysis, "transformer_lens", 2)


def test_transformer_lens_cache_with_a_layer_missing_or_none() -> None:
    layers = causal_layers(3)
    cache = {f"blocks.{i}.attn.hook_pattern": layers[i][None] for i in (0, 2)}
    with pytest.raises(TraceError, match=r"none for layer 2 \(blocks\.1\.attn\.hook_pattern\)"):
        from_transformer_lens(cache, TOKENS)
    with pytest.raises(TraceError, match=r"no blocks\.\{l\}\.attn\.hook_pattern"):
        from_transformer_lens({"blocks.0.hook_resid_pre": np.zeros(3)}, TOKENS)


# --- plain arrays --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["list", "4-D", "list with batch", "5-D with batch", "torch", "nested lists"])
def test_arrays_round_trip(shape: str) -> None:
    layers = causal_layers()
    given = {
        "list": layers,
        "4-D": np.stack(layers),
        "list with batch": [layer[None] for layer in layers],
        "5-D with batch": np.stack(layers)[:, None],
        "torch": [torch.from_numpy(layer)[None] for layer in layers],
        "nested lists": [layer.tolist() for layer in layers],
    }[shape]
    analysis = from_arrays(given, TOKENS, name="mine")
    assert analysis.kind == "decoder-only" and analysis.target_pieces == tuple(TOKENS)
    assert [b.layer for b in analysis.sublayers.values()] == [0, 1]
    for sublayer, expected in zip(analysis.sublayers.values(), layers):
        assert np.allclose(sublayer.weights, expected, atol=1e-7)
        assert np.array_equal(sublayer.mask, np.tril(np.ones((4, 4), dtype=bool)))
    assert_imported(analysis, "mine", 2)


def test_arrays_encoder_only_and_encoder_decoder() -> None:
    both_ways = list(normalized((3, 2, 4, 4), causal=False))
    analysis = from_arrays(both_ways, TOKENS, kind="encoder-only")
    assert list(analysis.sublayers) == [f"encoder.layers.{i}.self_attn" for i in range(3)]
    assert all(b.mask.all() for b in analysis.sublayers.values())
    assert analysis.prediction_pieces == tuple(TOKENS)

    source = ["a", "b", "c"]
    encoder = normalized((2, 2, 3, 3), causal=False, seed=1)
    cross = normalized((2, 2, 4, 3), causal=False, seed=2)
    decoder = np.stack(causal_layers())
    analysis = from_arrays(decoder, TOKENS, kind="encoder-decoder", source_tokens=source, encoder=encoder, cross=cross)
    assert np.allclose(analysis.stacked("encoder.self_attn"), encoder)
    assert np.allclose(analysis.stacked("decoder.self_attn"), decoder)
    assert np.allclose(analysis.stacked("decoder.cross_attn"), cross)
    assert analysis.sublayer("decoder.cross_attn", 1).mask.shape == (4, 3)


# --- export → read_trace -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder_only_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("encoder-only")
    return make_tiny_checkpoint(root / "tiny-bert", "encoder-only", seed=0, n_encoder_layers=2, n_decoder_layers=0)


@pytest.fixture(scope="module")
def analyses(tiny_checkpoints: dict[str, Path], encoder_only_checkpoint: Path) -> dict[str, Analysis]:
    """One Analysis of each kind by a real tiny checkpoint, as the app makes it."""
    return {
        "decoder-only": analyze(load_checkpoint(tiny_checkpoints["decoder-only"]), "The cat sat on the mat."),
        "encoder-decoder": analyze(
            load_checkpoint(tiny_checkpoints["encoder-decoder"]), "Where is it?", target="Wo ist es?"
        ),
        "encoder-only": analyze(load_checkpoint(encoder_only_checkpoint), "A dog ran."),
    }


def exported(analysis: Analysis, suffix: str) -> bytes:
    return to_json(analysis).encode("utf-8") if suffix == "json" else to_npz_bytes(analysis)


@pytest.mark.parametrize("suffix", ["json", "npz"])
@pytest.mark.parametrize("kind", ["decoder-only", "encoder-decoder", "encoder-only"])
def test_export_read_trace_round_trip(analyses: dict[str, Analysis], kind: str, suffix: str) -> None:
    original = analyses[kind]
    read = read_trace(exported(original, suffix), f"trace.{suffix}")
    atol = 5.1e-7 if suffix == "json" else 0  # JSON rounds to 6 decimals; the npz holds the float32s
    assert (read.checkpoint, read.kind, read.positional) == (original.checkpoint, original.kind, original.positional)
    assert read.source_pieces == original.source_pieces and read.target_pieces == original.target_pieces
    assert read.kv_heads == original.kv_heads and read.n_heads == original.n_heads
    assert list(read.sublayers) == list(original.sublayers)
    for name, sublayer in original.sublayers.items():
        got = read.sublayers[name]
        assert got.query_pieces == sublayer.query_pieces and got.key_pieces == sublayer.key_pieces
        assert np.array_equal(got.mask, sublayer.mask)
        assert np.allclose(got.weights, sublayer.weights, rtol=0, atol=atol)
        allowed = np.broadcast_to(sublayer.mask, sublayer.scores.shape)
        assert np.allclose(got.scores[allowed], sublayer.scores[allowed], rtol=0, atol=atol + 1e-6)
        assert np.isnan(got.scores[~allowed]).all()
        assert got.values is None
    assert np.allclose(read.first_positional_encoding, original.first_positional_encoding, rtol=0, atol=atol + 1e-6)
    assert len(read.predictions) == len(original.predictions) > 0
    for got, top in zip(read.predictions, original.predictions):
        assert [(p.piece, p.id) for p in got] == [(p.piece, p.id) for p in top]
        assert np.allclose([p.prob for p in got], [p.prob for p in top], rtol=0, atol=5.1e-7)
    assert read.prediction_pieces == original.prediction_pieces
    assert read.text == original.text and read.output_text == original.output_text and read.target_ids == ()


def test_a_trace_written_before_text_was_kept_reads_its_pieces(analyses: dict[str, Analysis]) -> None:
    """A format-3 file without `text` and `output_text`: the first stack's tokens joined, and an encoder-decoder's
    output read from its pieces (words, not '▁' markers); a wrong or huge value is refused, naming the key."""
    for kind, original in analyses.items():
        obj = to_json_object(original)
        obj.pop("text")
        obj.pop("output_text", None)
        read = read_trace(json.dumps(obj).encode(), "old.json")
        first = original.target_pieces if kind == "decoder-only" else original.source_pieces
        assert read.text == " ".join(first)
        if kind == "encoder-decoder":
            assert read.output_text == "".join(original.target_pieces[1:]).replace("▁", " ").strip()
            assert "▁" not in read.output_text
    obj = to_json_object(analyses["encoder-decoder"])
    for bad, said in ((["x"], "not a string"), ("x" * (imported.MAX_TEXT_CHARS + 1), "more than the")):
        obj["output_text"] = bad
        with pytest.raises(TraceError, match=f'x.json: "output_text" .*{said}'):
            read_trace(json.dumps(obj).encode(), "x.json")


def test_read_trace_grouped_key_value_heads(analyses: dict[str, Analysis]) -> None:
    obj = to_json_object(analyses["decoder-only"])  # 4 heads
    obj["kv_head_of_query_head"] = [0, 0, 1, 1]
    read = read_trace(json.dumps(obj).encode(), "gqa.json")
    assert read.kv_heads == 2 and [read.kv_head(h) for h in range(4)] == [0, 0, 1, 1]
    obj["kv_head_of_query_head"] = [0, 1, 0, 1]
    with pytest.raises(TraceError, match=r"gqa\.json: kv_head_of_query_head \[0, 1, 0, 1\] does not group"):
        read_trace(json.dumps(obj).encode(), "gqa.json")


# --- bad inputs: one TraceError each, naming what disagrees ---------------------------------------------------------


def expect(message: str, call, *args, **kwargs) -> TraceError:
    with pytest.raises(TraceError, match=message) as info:
        call(*args, **kwargs)
    assert isinstance(info.value, ValueError)
    return info.value


def test_shapes_against_the_tokens() -> None:
    layers = causal_layers()
    expect(r"^layer 1's attention has 4 query positions but 5 tokens were given$", from_arrays, layers, TOKENS + ["!"])
    wide = [np.concatenate([layer, np.zeros((2, 4, 1), np.float32)], axis=-1) for layer in layers]
    expect(r"^layer 1's attention has 5 key positions but 4 tokens were given$", from_arrays, wide, TOKENS)
    expect(r"layer 2's attention has shape \(4, 4\): expected 3 axes", from_arrays, [layers[0], layers[1][0]], TOKENS)
    expect(r"attentions has shape \(2, 4, 4\): expected \[layers, heads", from_arrays, layers[0], TOKENS)


def test_a_batch_of_two_is_refused() -> None:
    batch = np.stack([np.stack(causal_layers())] * 2, axis=1)  # [layers, batch 2, heads, T, T]
    expect(r"^layer 1's attention holds a batch of 2 inputs .*pass one input", from_arrays, batch, TOKENS)
    hf = {"attentions": tuple(torch.from_numpy(layer) for layer in batch)}
    expect(r"^layer 1's attention holds a batch of 2 inputs", from_huggingface, hf, TOKENS)


def test_every_layer_has_the_same_number_of_heads() -> None:
    layers = [causal_layers(1, heads=2)[0], causal_layers(1, heads=3)[0]]
    expect(
        r"^layer 2 has 3 heads but layer 1 has 2: every layer must have the same number", from_arrays, layers, TOKENS
    )


def test_nan_and_infinity_name_the_layer() -> None:
    layers = causal_layers()
    layers[1][0, 2, 1] = np.nan
    expect(
        r"^layer 2 holds 1 NaN or infinite weights \(the first: head 1, query 3, key 2\)$", from_arrays, layers, TOKENS
    )
    layers[1][0, 2, 1] = np.inf
    expect(r"^layer 2 holds 1 NaN or infinite weights", from_arrays, layers, TOKENS)


def test_rows_must_sum_to_one_and_weights_lie_in_0_1() -> None:
    layers = causal_layers()
    layers[0][1, 2] *= 0.9
    expect(r"^layer 1, head 2, query 3 \('Ġsat'\): its weights sum to 0\.9, not 1", from_arrays, layers, TOKENS)
    scores = [np.tril(np.full((2, 4, 4), 3.0, np.float32))] * 2  # raw scores, not a softmax
    expect(r"^layer 1, head 1, query 1, key 1: weight 3 is outside \[0, 1\]", from_arrays, scores, TOKENS)
    nearly = causal_layers()  # within the tolerance: float16 weights are only this exact
    nearly[0][0, 3] *= 1 + imported.WEIGHT_TOLERANCE / 2
    from_arrays(nearly, TOKENS)


def test_bfloat16_attention_is_checked_to_its_own_precision_and_the_message_says_which() -> None:
    """A GPU's bf16 softmax: rows sum to 1 within a few thousandths, more than float32's tolerance allows."""
    torch.manual_seed(0)
    scores = torch.randn(2, 2, 64, 64).masked_fill(~torch.ones(64, 64, dtype=torch.bool).tril(), float("-inf"))
    bf16 = torch.softmax(scores.bfloat16(), dim=-1)  # computed in bf16, as on the GPU
    sums = bf16.float().sum(-1)
    assert float((sums - 1).abs().max()) > imported.WEIGHT_TOLERANCE, "the case the issue met: off by more than 1e-3"
    tokens = [f"t{i}" for i in range(64)]
    analysis = from_arrays(list(bf16), tokens)
    assert analysis.sublayer("decoder.self_attn", 0).weights.dtype == np.float32
    off = list(bf16.float().numpy())  # the same numbers claimed as float32 are refused, the message saying so
    expect(r"not 1 \(within 0\.001, for attention given in float32\)", from_arrays, off, tokens)
    wrong = bf16.clone()
    wrong[0, 1, 5] *= 0.9
    expect(r"not 1 \(within 0\.01, for attention given in bfloat16\)", from_arrays, list(wrong), tokens)


def test_tokens_kind_and_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = causal_layers()
    expect(r"^tokens must be a list of strings, one per position, not str$", from_arrays, layers, "The cat sat.")
    expect(r"^tokens: token 2 is int 7, not a string$", from_arrays, layers, ["The", 7, "sat", "."])
    expect(r"^tokens is empty", from_arrays, layers, [])
    expect(r"^unknown kind 'causal': expected one of", from_arrays, layers, TOKENS, kind="causal")
    expect(r"^source_tokens given for a decoder-only model", from_arrays, layers, TOKENS, source_tokens=["a"])
    expect(
        r"^an encoder-decoder needs cross",
        from_arrays,
        layers,
        TOKENS,
        kind="encoder-decoder",
        source_tokens=TOKENS,
        encoder=layers,
    )
    monkeypatch.setattr(checks, "MAX_TOKENS", 3)  # each bound is read where it is checked
    expect(r"^tokens has 4 tokens, more than the 3 allowed$", from_arrays, layers, TOKENS)
    monkeypatch.setattr(arrays, "MAX_LAYERS", 1)
    expect(r"^attentions has 2 layers, more than the 1 allowed$", from_arrays, layers, TOKENS[:3])
    monkeypatch.setattr(arrays, "MAX_LAYERS", 256)
    monkeypatch.setattr(checks, "MAX_HEADS", 1)
    expect(r"^layer 1 has 2 heads: expected 1 to 1$", from_arrays, [layer[:, :3, :3] for layer in layers], TOKENS[:3])


@pytest.fixture(scope="module")
def lm_trace(analyses: dict[str, Analysis]) -> dict:
    return to_json_object(analyses["decoder-only"])


def read_object(obj: dict, filename: str = "trace.json") -> Analysis:
    return read_trace(json.dumps(obj).encode("utf-8"), filename)


def test_oversized_file_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "MAX_FILE_BYTES", 100)
    expect(r"^big\.json: 101 bytes, more than the 100 bytes a trace file may be$", read_trace, b"[" * 101, "big.json")
    expect(r"^big\.npz: 101 bytes", read_trace, b"\0" * 101, "big.npz")


def test_not_a_trace(lm_trace: dict) -> None:
    expect(r"^t\.json: not valid JSON", read_trace, b"{not json", "t.json")
    expect(r"^t\.json: not UTF-8 text", read_trace, b"\xff\xfe{}", "t.json")
    expect(r"^t\.json: not a trace: a JSON list", read_trace, b"[1, 2]", "t.json")
    expect(r"^t\.json: not a trace: it has no \"format\" key", read_trace, b'{"kind": "decoder-only"}', "t.json")
    lacking = {k: v for k, v in lm_trace.items() if k not in ("attention", "kind")}
    expect(r"^trace\.json: not a trace: missing 'kind', 'attention'$", read_object, lacking)
    expect(r"^t\.txt: a trace is a \.json or \.npz file", read_trace, b"{}", "t.txt")
    expect(r"^t\.npz: not an \.npz archive", read_trace, b"{}", "t.npz")
    buffer = io.BytesIO()
    np.savez(buffer, weights=np.zeros(3))
    expect(r"^t\.npz: not a trace: no meta\.json array", read_trace, buffer.getvalue(), "t.npz")


def test_npz_is_read_without_pickle() -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **{"meta.json": np.array([{"format": 3}], dtype=object)})  # an object array is a pickle
    expect(
        r"^t\.npz: array 'meta\.json' holds objects, which only a pickle holds", read_trace, buffer.getvalue(), "t.npz"
    )


def test_wrong_format_version(lm_trace: dict, analyses: dict[str, Analysis]) -> None:
    expect(r"^trace\.json: trace format 2; this reader reads format 3 only", read_object, {**lm_trace, "format": 2})
    archive = np.load(io.BytesIO(to_npz_bytes(analyses["decoder-only"])))
    arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(arrays["meta.json"].tobytes()) | {"format": 1}
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    expect(
        rf"^old\.npz: trace format 1; this reader reads format {FORMAT} only", read_trace, buffer.getvalue(), "old.npz"
    )


def test_a_damaged_trace_names_the_file_sublayer_and_cell(lm_trace: dict) -> None:
    def damaged(change) -> dict:
        obj = json.loads(json.dumps(lm_trace))
        change(obj["attention"][1])
        return obj

    def halve(entry: dict) -> None:
        entry["weights"][0][2] = [w / 2 for w in entry["weights"][0][2]]

    expect(
        r"^trace\.json: layer 2 \(decoder\.layers\.1\.self_attn\), head 1, query 3 .*: its weights sum to 0\.5",
        read_object,
        damaged(halve),
    )

    def peek(entry: dict) -> None:
        entry["weights"][1][0][1] = 0.5

    expect(
        r"^trace\.json: layer 2 .*, head 2, query 1 .* gives weight 0\.5 to key 2 .*the trace's mask forbids",
        read_object,
        damaged(peek),
    )
    expect(
        r"^trace\.json: decoder\.layers\.1\.self_attn's queries differ from the trace's target_tokens$",
        read_object,
        damaged(lambda e: e["queries"].reverse()),
    )
    expect(
        r"^trace\.json: decoder\.layers\.1\.self_attn: its layer is 7 but its name says 1$",
        read_object,
        damaged(lambda e: e.update(layer=7)),
    )
    expect(
        r"^trace\.json: a decoder-only model has no encoder\.self_attn sub-layers",
        read_object,
        damaged(lambda e: e.update(name="encoder.layers.1.self_attn", stack="encoder")),
    )
    nan_text = json.dumps(damaged(lambda e: e["weights"][0][0].__setitem__(0, float("nan"))))
    expect(r"^t\.json: layer 2 .* holds 1 NaN or infinite weights", read_trace, nan_text.encode(), "t.json")
    heads = damaged(lambda e: e.update(weights=e["weights"][:3], scores=e["scores"][:3]))
    expect(r"^trace\.json: layer 2 has 3 heads but layer 1 has 4: every layer", read_object, heads)


# Crafted fields: each case is (kind, where in the trace object, the value put there, what the message says). A lone
# surrogate ("\ud800", a JSON escape UTF-8 cannot write) read here would break every page and export of it later.
CRAFTED = {
    "a lone surrogate in the checkpoint": (
        "decoder-only",
        ("checkpoint",),
        "tiny\ud800",
        r"checkpoint holds \\ud800 at character 5, half of a UTF-16 surrogate pair",
    ),
    "a lone surrogate in the text": (
        "decoder-only",
        ("text",),
        "the \udcff cat",
        r'"text" holds \\udcff at character 5',
    ),
    "a lone surrogate in the output": ("encoder-decoder", ("output_text",), "\ud83d", r'"output_text" holds \\ud83d'),
    "a lone surrogate in a token": ("decoder-only", ("target_tokens", 1), "\ud800", r"target_tokens: token 2 holds"),
    "a lone surrogate in a source token": (
        "encoder-decoder",
        ("source_tokens", 0),
        "a\udfff",
        r"source_tokens: token 1",
    ),
    "a lone surrogate in a prediction": (
        "decoder-only",
        ("predictions", 2, "top", 0, "token"),
        "\ud800",
        r"predictions at position 3: a token holds \\ud800",
    ),
    "a grouped-query map of all -1": (
        "decoder-only",
        ("kv_head_of_query_head",),
        [-1, -1, -1, -1],
        r"kv_head_of_query_head must list one key/value head \(an integer, 0 to 3 as the file counts\)",
    ),
    "a key/value head past the last head": ("decoder-only", ("kv_head_of_query_head",), [0, 0, 4, 4], "0 to 3"),
}
CRAFTED_SUBLAYERS = {  # JSON only: an .npz's sub-layers are its arrays' names, its tokens the meta's
    "a number where a sub-layer's queries belong": (
        ("attention", 0, "queries"),
        7,
        r"entry 1's 'queries' is a number, not a list",
    ),
    "null where a sub-layer's keys belong": (
        ("attention", 1, "keys"),
        None,
        r"entry 2's 'keys' is null, not a list of tokens$",
    ),
    "a lone surrogate in a sub-layer's name": (
        ("attention", 0, "name"),
        "decoder.layers.0.self_attn\ud800",
        r"entry 1: 'decoder\.layers\.0\.self_attn\\ud800' is not an attention sub-layer's name as the app writes it",
    ),
    "a layer in Arabic-Indic digits": (("attention", 0, "name"), "decoder.layers.\u0660.self_attn", "sub-layer's name"),
    "a layer with a leading zero": (("attention", 1, "name"), "decoder.layers.01.self_attn", "sub-layer's name"),
}


def crafted(analysis: Analysis, where: tuple, value, suffix: str) -> bytes:
    """`analysis` exported with the field at `where` (a path into the JSON object) replaced by `value`, as a JSON
    trace or an .npz (whose meta.json holds every field but the arrays)."""
    obj = to_json_object(analysis)
    *path, last = where
    parent = obj
    for step in path:
        parent = parent[step]
    parent[last] = value
    if suffix == "json":
        return json.dumps(obj).encode("utf-8")  # ensure_ascii: a lone surrogate goes in as its \\ud800 escape
    with np.load(io.BytesIO(to_npz_bytes(analysis))) as archive:
        arrays = {key: archive[key] for key in archive.files}
    meta = {k: v for k, v in obj.items() if k not in ("attention", "positional_encoding")}
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def refused_in_one_writable_line(data: bytes, filename: str, message: str) -> None:
    error = expect(rf"^{filename.replace('.', '[.]')}: .*{message}", read_trace, data, filename)
    assert "\n" not in str(error) and str(error).encode("utf-8")  # a page shows it: it must be text itself


@pytest.mark.parametrize("suffix", ["json", "npz"])
@pytest.mark.parametrize(("kind", "where", "value", "message"), CRAFTED.values(), ids=CRAFTED.keys())
def test_a_crafted_field_is_one_trace_error_naming_it(analyses, suffix, kind, where, value, message) -> None:
    refused_in_one_writable_line(crafted(analyses[kind], where, value, suffix), f"crafted.{suffix}", message)


@pytest.mark.parametrize(("where", "value", "message"), CRAFTED_SUBLAYERS.values(), ids=CRAFTED_SUBLAYERS.keys())
def test_a_crafted_sublayer_is_one_trace_error_naming_it(analyses, where, value, message) -> None:
    refused_in_one_writable_line(crafted(analyses["decoder-only"], where, value, "json"), "crafted.json", message)


def test_a_file_name_utf8_cannot_write_is_shown_escaped(lm_trace: dict) -> None:
    """A Linux name of bytes that are not UTF-8 reaches Python as surrogateescape'd characters."""
    name = b"caf\xe9.json".decode("utf-8", "surrogateescape")
    error = expect(r"^caf\\udce9\.json: not a trace", read_trace, b"[1]", name)
    assert str(error).encode("utf-8")
    assert read_trace(json.dumps(lm_trace).encode(), name).checkpoint == lm_trace["checkpoint"]


def test_arrays_with_a_lone_surrogate_in_a_token_or_the_name_are_refused() -> None:
    layers = causal_layers()
    expect(r"^tokens: token 3 holds \\ud800 at character 2", from_arrays, layers, ["The", "cat", "s\ud800", "."])
    expect(r"^name holds \\udce9 at character 4", from_arrays, layers, TOKENS, name="caf\udce9")


def test_importable_without_torch() -> None:
    """Like analysis.record: the module and its plain-array path need no torch."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np\n"
        "from analysis.imported import from_arrays\n"
        "print(from_arrays(np.ones((1, 1, 2, 2)) / 2, ['a', 'b'], kind='encoder-only').kind)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "encoder-only"


def test_imported_attention_exports_without_scores_and_reads_back() -> None:
    """Attention from elsewhere has no scores: the export writes them as null (JSON) or leaves them out (npz)."""
    rng = np.random.default_rng(0)
    tokens = ["a", "b", "c"]
    raw = rng.random((2, 2, 3, 3)) * np.tril(np.ones((3, 3)))
    analysis = from_arrays(raw / raw.sum(axis=-1, keepdims=True), tokens)
    for data, filename in ((to_json(analysis).encode(), "t.json"), (to_npz_bytes(analysis), "t.npz")):
        back = read_trace(data, filename)
        assert list(back.sublayers) == list(analysis.sublayers)
        for name, sublayer in analysis.sublayers.items():
            assert np.allclose(back.sublayers[name].weights, sublayer.weights, atol=1e-6)
            assert back.sublayers[name].scores is None

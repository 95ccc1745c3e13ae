"""Both models: config validation, the trace's names, shapes, masks and positions, padding and batching
invariance, causality, no NaN anywhere, and cached decoding equal to a full recomputation."""

from __future__ import annotations

import pytest
import torch

from model.config import ConfigError, ModelConfig
from model.factory import build_model
from model.names import parse_sublayer_name
from model.trace import Trace
from model.transformer import DecoderOnlyLM, EncoderDecoder, sinusoidal_table

ATOL = 1e-5
VARIANTS = {
    "post-sinusoidal-tied": {},
    "pre-learned-untied": {"norm": "pre", "positional": "learned", "tie_embeddings": False},
}


def run(model, source: torch.Tensor | None, target: torch.Tensor, record: bool = True):
    """(logits, trace) of either kind: the encoder-decoder reads `source`, the language model ignores it."""
    with torch.no_grad():
        if model.config.has_cross_attention:
            return model(source, target, record=record)
        return model(target, record=record)


def pad_to(rows: list[torch.Tensor], length: int, pad_id: int = 0) -> torch.Tensor:
    out = torch.full((len(rows), length), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


@pytest.fixture(params=list(VARIANTS))
def variant_model(request, kind, make_model):
    """Both kinds × post-norm/sinusoidal/tied and pre-norm/learned/untied."""
    return make_model(kind, seed=5, **VARIANTS[request.param])


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kind": "encoder"}, "kind"),
        ({"d_model": 30, "n_heads": 4}, "d_model"),
        ({"d_model": 30, "n_heads": 4}, "n_heads"),
        ({"d_model": 9, "n_heads": 3}, "d_model"),  # sinusoidal positions need an even d_model
        ({"vocab_size": 0}, "vocab_size"),
        ({"vocab_size": "100"}, "vocab_size"),
        ({"d_model": True}, "d_model"),
        ({"n_heads": 0}, "n_heads"),
        ({"d_ff": -1}, "d_ff"),
        ({"max_len": 0}, "max_len"),
        ({"n_decoder_layers": 0}, "n_decoder_layers"),
        ({"n_encoder_layers": -1}, "n_encoder_layers"),
        ({"kind": "encoder-decoder", "n_encoder_layers": 0}, "n_encoder_layers"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"dropout": "0.1"}, "dropout"),
        ({"dropout": "abc"}, "dropout"),
        ({"dropout": None}, "dropout"),
        ({"positional": "alibi"}, "positional"),
        ({"norm": "sandwich"}, "norm"),
        ({"pad_id": 64}, "pad_id"),
        ({"eos_id": -1}, "eos_id"),
        ({"bos_id": 0}, "bos_id"),  # the same id as pad
        ({"tie_embeddings": "no"}, "tie_embeddings"),
    ],
)
def test_an_invalid_config_raises_config_error_naming_the_field(overrides: dict, field: str) -> None:
    fields = {"kind": "decoder-only", "vocab_size": 64, "n_encoder_layers": 0, **overrides}
    with pytest.raises(ConfigError, match=field):
        ModelConfig(**fields)


def test_config_from_dict_names_unknown_and_missing_keys_and_round_trips() -> None:
    config = ModelConfig(kind="encoder-decoder", vocab_size=64, d_model=16, n_heads=2)
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="d_modle"):
        ModelConfig.from_dict({**config.to_dict(), "d_modle": 3})
    data = config.to_dict()
    del data["vocab_size"]
    with pytest.raises(ConfigError, match="vocab_size"):
        ModelConfig.from_dict(data)
    with pytest.raises(ConfigError, match="JSON object"):
        ModelConfig.from_dict([1, 2])


def test_a_config_is_frozen() -> None:
    config = ModelConfig(kind="decoder-only", vocab_size=64, n_encoder_layers=0)
    with pytest.raises(AttributeError):
        config.d_model = 64  # type: ignore[misc]


def test_model_classes_refuse_a_config_of_the_other_kind() -> None:
    lm_config = ModelConfig(kind="decoder-only", vocab_size=64, d_model=16, n_heads=2, n_encoder_layers=0)
    ed_config = ModelConfig(kind="encoder-decoder", vocab_size=64, d_model=16, n_heads=2)
    with pytest.raises(ValueError, match="encoder-decoder"):
        EncoderDecoder(lm_config)
    with pytest.raises(ValueError, match="decoder-only"):
        DecoderOnlyLM(ed_config)
    assert isinstance(build_model(lm_config), DecoderOnlyLM)
    assert isinstance(build_model(ed_config), EncoderDecoder)


# ---------------------------------------------------------------- the trace


def test_trace_names_are_exactly_the_sublayers_of_the_config_in_computation_order(make_model, make_ids, gen) -> None:
    model = make_model("encoder-decoder", n_encoder_layers=2, n_decoder_layers=3)
    _, trace = run(model, make_ids(gen, 2, 5), make_ids(gen, 2, 4))
    expected = [f"encoder.layers.{i}.self_attn" for i in range(2)] + [
        f"decoder.layers.{i}.{t}" for i in range(3) for t in ("self_attn", "cross_attn")
    ]
    assert list(trace.attention) == expected
    assert set(trace.attention) == set(expected)

    lm = make_model("decoder-only", n_decoder_layers=3)
    _, trace = run(lm, None, make_ids(gen, 2, 4))
    assert list(trace.attention) == [f"decoder.layers.{i}.self_attn" for i in range(3)]


def test_trace_shapes_masks_and_metadata_of_the_encoder_decoder(enc_dec, make_ids, gen) -> None:
    src, tgt = make_ids(gen, 2, 6), make_ids(gen, 2, 4)
    h = enc_dec.config.n_heads
    _, trace = run(enc_dec, src, tgt)
    assert isinstance(trace, Trace) and trace.kind == "encoder-decoder" and trace.query_offset == 0
    assert torch.equal(trace.source_ids, src) and torch.equal(trace.target_ids, tgt)
    assert set(trace.masks) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    expected_shape = {"encoder.self_attn": (6, 6), "decoder.self_attn": (4, 4), "decoder.cross_attn": (4, 6)}
    for key, (tq, tk) in expected_shape.items():
        assert trace.masks[key].shape == (2, tq, tk) and trace.masks[key].dtype == torch.bool
    for name, rec in trace.attention.items():
        stack, _, type_ = parse_sublayer_name(name)
        tq, tk = expected_shape[f"{stack}.{type_}"]
        for tensor in (rec.scores, rec.weights):
            assert tensor.shape == (2, h, tq, tk), name
        assert rec.keys.shape == rec.values.shape == (2, h, tk, enc_dec.config.d_head)
        assert torch.equal(rec.mask, trace.masks[f"{stack}.{type_}"])


def test_trace_shapes_and_masks_of_the_language_model(lm, make_ids, gen) -> None:
    ids = make_ids(gen, 3, 7)
    _, trace = run(lm, None, ids)
    assert trace.kind == "decoder-only" and trace.source_ids is None and torch.equal(trace.target_ids, ids)
    assert set(trace.masks) == {"decoder.self_attn"}
    assert set(trace.positional_encoding) == {"decoder"}
    for rec in trace.attention.values():
        assert rec.weights.shape == rec.scores.shape == (3, lm.config.n_heads, 7, 7)


def test_sublayer_names_parse_into_stack_layer_and_type() -> None:
    assert parse_sublayer_name("decoder.layers.1.cross_attn") == ("decoder", 1, "cross_attn")
    assert parse_sublayer_name("encoder.layers.0.self_attn") == ("encoder", 0, "self_attn")
    for bad in ("decoder.blocks.1.cross_attn", "decoder.layers.x.self_attn", "decoder.layers.1.mlp", "decoder"):
        with pytest.raises(ValueError):
            parse_sublayer_name(bad)


def test_positional_rows_are_the_sinusoidal_table_rows(enc_dec, lm, make_ids, gen) -> None:
    cfg = enc_dec.config
    table = sinusoidal_table(cfg.max_len, cfg.d_model)
    _, trace = run(enc_dec, make_ids(gen, 1, 9), make_ids(gen, 1, 5))
    assert set(trace.positional_encoding) == {"encoder", "decoder"}
    assert trace.positional_encoding["encoder"].shape == (9, cfg.d_model)
    assert torch.equal(trace.positional_encoding["encoder"], table[:9])
    assert torch.equal(trace.positional_encoding["decoder"], table[:5])
    _, trace = run(lm, None, make_ids(gen, 1, 11))
    assert torch.equal(
        trace.positional_encoding["decoder"], sinusoidal_table(lm.config.max_len, lm.config.d_model)[:11]
    )


def test_learned_positional_rows_are_the_rows_of_the_learned_parameter(kind, make_model, make_ids, gen) -> None:
    model = make_model(kind, positional="learned")
    assert isinstance(model.positions.table, torch.nn.Parameter)
    _, trace = run(model, make_ids(gen, 1, 6), make_ids(gen, 1, 4))
    assert torch.equal(trace.positional_encoding["decoder"], model.positions.table[:4])
    if kind == "encoder-decoder":
        assert torch.equal(trace.positional_encoding["encoder"], model.positions.table[:6])
    assert not torch.equal(model.positions.table[:4], sinusoidal_table(4, model.config.d_model))


def test_the_first_layer_attends_over_scaled_embeddings_plus_positions(kind, make_model, make_ids, gen) -> None:
    model = make_model(kind)  # post-norm: the first attention's input is the sum itself
    ids = make_ids(gen, 2, 6)
    _, trace = run(model, ids, ids)
    stack = "encoder" if kind == "encoder-decoder" else "decoder"
    attn = getattr(model, stack).layers[0].self_attn
    x = model.embed.lut.weight[ids] * model.config.d_model**0.5 + sinusoidal_table(6, model.config.d_model)
    with torch.no_grad():
        expected = attn.w_k(x).view(2, 6, model.config.n_heads, -1).transpose(1, 2)
    torch.testing.assert_close(trace.attention[f"{stack}.layers.0.self_attn"].keys, expected, atol=1e-5, rtol=0)


def test_the_fused_path_gives_the_same_logits_and_records_no_scores_or_weights(variant_model, make_ids, gen) -> None:
    """record=False runs scaled_dot_product_attention; with padded and all-padding rows it must agree too."""
    src, tgt = padded_batch(variant_model.config.kind, make_ids, gen)
    logits, trace = run(variant_model, src, tgt)
    logits_fused, trace_fused = run(variant_model, src, tgt, record=False)
    torch.testing.assert_close(logits_fused, logits, atol=1e-5, rtol=1e-5)
    assert list(trace_fused.attention) == list(trace.attention)
    for name, rec in trace_fused.attention.items():
        assert rec.scores is None and rec.weights is None, name
        assert torch.equal(rec.mask, trace.attention[name].mask), name
        torch.testing.assert_close(rec.keys, trace.attention[name].keys)


def test_a_sequence_longer_than_max_len_is_rejected(lm, make_ids, gen) -> None:
    with pytest.raises(ValueError, match="max_len"):
        run(lm, None, make_ids(gen, 1, lm.config.max_len + 1))


# ---------------------------------------------------------------- masks, weights, NaN


def padded_batch(kind: str, make_ids, gen) -> tuple[torch.Tensor, torch.Tensor]:
    """Row 0 real, row 1 padded at the end, row 2 entirely padding (source and target)."""
    src = make_ids(gen, 3, 7)
    tgt = make_ids(gen, 3, 5)
    src[1, 4:] = 0
    tgt[1, 2:] = 0
    src[2] = 0
    tgt[2] = 0
    return src, tgt


def test_no_nan_anywhere_with_padded_queries_and_an_all_padding_sequence(variant_model, make_ids, gen) -> None:
    src, tgt = padded_batch(variant_model.config.kind, make_ids, gen)
    logits, trace = run(variant_model, src, tgt)
    assert torch.isfinite(logits).all()
    for name, rec in trace.attention.items():
        for tensor in (rec.scores, rec.weights, rec.keys, rec.values):
            assert torch.isfinite(tensor).all(), name
        assert torch.all(rec.weights[2] == 0), name  # the all-padding row attends nowhere


def test_weight_rows_sum_to_one_and_masked_weights_are_exactly_zero(variant_model, make_ids, gen) -> None:
    src, tgt = padded_batch(variant_model.config.kind, make_ids, gen)
    _, trace = run(variant_model, src, tgt)
    for name, rec in trace.attention.items():
        mask = rec.mask[:, None].expand_as(rec.weights)
        assert torch.all(rec.weights[~mask] == 0), name
        rows = mask.any(-1)
        assert rows.any()
        sums = rec.weights.sum(-1)[rows]
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-6, rtol=0)
        assert torch.all(rec.weights.sum(-1)[~rows] == 0)


def test_padded_keys_and_padded_queries_are_masked(enc_dec, make_ids, gen) -> None:
    src, tgt = padded_batch("encoder-decoder", make_ids, gen)
    _, trace = run(enc_dec, src, tgt)
    enc = trace.masks["encoder.self_attn"]
    assert enc[1, :4, :4].all() and not enc[1, :, 4:].any() and not enc[1, 4:].any()
    cross = trace.masks["decoder.cross_attn"]
    assert cross[1, :2, :4].all() and not cross[1, :, 4:].any() and not cross[1, 2:].any()
    assert not trace.masks["decoder.self_attn"][2].any()


def test_decoder_self_attention_is_exactly_zero_above_the_diagonal(variant_model, make_ids, gen) -> None:
    src, tgt = padded_batch(variant_model.config.kind, make_ids, gen)
    tgt[0] = make_ids(gen, 5)
    _, trace = run(variant_model, src, tgt)
    names = [n for n in trace.attention if n.startswith("decoder.") and n.endswith("self_attn")]
    assert len(names) == variant_model.config.n_decoder_layers
    for name in names:
        weights = trace.attention[name].weights
        above = torch.ones(5, 5, dtype=torch.bool).triu(1)
        assert torch.all(weights[..., above] == 0), name
        assert torch.all(weights[0][..., ~above] > 0), name  # and nothing else is masked in the full row
    assert not trace.masks["decoder.self_attn"][..., torch.ones(5, 5, dtype=torch.bool).triu(1)].any()


def test_the_future_cannot_change_the_past(model, make_ids, gen) -> None:
    src, tgt = make_ids(gen, 1, 5), make_ids(gen, 1, 6)
    changed = tgt.clone()
    changed[0, 4:] = torch.tensor([7, 8]) if int(tgt[0, 4]) != 7 else torch.tensor([9, 10])
    a, _ = run(model, src, tgt)
    b, _ = run(model, src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4], atol=ATOL, rtol=0)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


# ---------------------------------------------------------------- padding and batching invariance


@pytest.mark.parametrize("pad", ["source", "target", "both"])
def test_appending_padding_leaves_real_positions_unchanged_encoder_decoder(pad, make_model, make_ids, gen) -> None:
    for variant in VARIANTS.values():
        model = make_model("encoder-decoder", seed=7, **variant)
        src, tgt = make_ids(gen, 1, 6), make_ids(gen, 1, 5)
        padded_src = pad_to([src[0]], 10) if pad in ("source", "both") else src
        padded_tgt = pad_to([tgt[0]], 8) if pad in ("target", "both") else tgt
        logits, trace = run(model, src, tgt)
        logits_p, trace_p = run(model, padded_src, padded_tgt)
        torch.testing.assert_close(logits_p[:, :5], logits, atol=ATOL, rtol=ATOL)
        for name, rec in trace.attention.items():
            rec_p = trace_p.attention[name]
            tq, tk = rec.weights.shape[-2:]
            torch.testing.assert_close(rec_p.weights[..., :tq, :tk], rec.weights, atol=1e-6, rtol=0)
            assert torch.all(rec_p.weights[..., :tq, tk:] == 0), name


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_appending_padding_leaves_real_positions_unchanged_language_model(variant, make_model, make_ids, gen) -> None:
    model = make_model("decoder-only", seed=7, **VARIANTS[variant])
    ids = make_ids(gen, 1, 7)
    logits, trace = run(model, None, ids)
    logits_p, trace_p = run(model, None, pad_to([ids[0]], 12))
    torch.testing.assert_close(logits_p[:, :7], logits, atol=ATOL, rtol=ATOL)
    for name, rec in trace.attention.items():
        torch.testing.assert_close(trace_p.attention[name].weights[..., :7, :7], rec.weights, atol=1e-6, rtol=0)


def test_a_padded_batch_of_three_equals_three_single_runs(variant_model, make_ids, gen) -> None:
    src_lens, tgt_lens = [5, 8, 3], [4, 2, 6]
    sources = [make_ids(gen, n) for n in src_lens]
    targets = [make_ids(gen, n) for n in tgt_lens]
    logits_b, trace_b = run(variant_model, pad_to(sources, 8), pad_to(targets, 6))
    is_ed = variant_model.config.has_cross_attention
    for i, (src, tgt) in enumerate(zip(sources, targets)):
        logits, trace = run(variant_model, src[None], tgt[None])
        t = len(tgt)
        torch.testing.assert_close(logits_b[i, :t], logits[0], atol=ATOL, rtol=ATOL)
        for name, rec in trace.attention.items():
            rec_b = trace_b.attention[name]
            tq, tk = rec.weights.shape[-2:]
            torch.testing.assert_close(rec_b.weights[i, :, :tq, :tk], rec.weights[0], atol=1e-6, rtol=0)
            torch.testing.assert_close(rec_b.scores[i, :, :tq, :tk], rec.scores[0], atol=ATOL, rtol=ATOL)
        if is_ed:
            cross_b, cross = trace_b.masks["decoder.cross_attn"], trace.masks["decoder.cross_attn"]
            assert torch.equal(cross_b[i, :t, : len(src)], cross[0])


# ---------------------------------------------------------------- cached decoding


def decode_cached(model, src: torch.Tensor | None, tgt: torch.Tensor, chunks: list[int]):
    """Feed `tgt` in chunks, each continuing the previous trace (`past`); returns the logits concatenated, the
    traces of the chunks and the last trace."""
    with torch.no_grad():
        past, logits, traces, start = None, [], [], 0
        for size in chunks:
            chunk = tgt[:, start : start + size]
            out, past = model(src, chunk, past=past) if model.config.has_cross_attention else model(chunk, past=past)
            logits.append(out)
            traces.append((start, past))
            start += size
        assert start == tgt.shape[1]
    return torch.cat(logits, dim=1), traces, past


@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 1, 2]])
def test_cached_decoding_equals_full_recomputation(variant_model, chunks, make_ids, gen) -> None:
    src, tgt = make_ids(gen, 2, 6), make_ids(gen, 2, 7)
    src[1, 4:] = 0  # a padded source in the batch
    full_logits, full_trace = run(variant_model, src, tgt)
    logits, traces, cache = decode_cached(variant_model, src, tgt, chunks)
    assert cache.target_valid.shape == (2, 7)
    torch.testing.assert_close(logits, full_logits, atol=ATOL, rtol=ATOL)
    table = full_trace.positional_encoding["decoder"]
    for start, trace in traces:
        size = trace.target_ids.shape[1]
        assert trace.query_offset == start
        assert torch.equal(trace.positional_encoding["decoder"], table[start : start + size])
        decoder = {k for k in full_trace.masks if k.startswith("decoder.")}
        assert set(trace.masks) == (set(full_trace.masks) if start == 0 else decoder)  # the encoder runs once
        for name, rec in trace.attention.items():
            if name.startswith("encoder."):
                assert torch.equal(rec.weights, full_trace.attention[name].weights)
                continue
            full = full_trace.attention[name]
            tk = rec.weights.shape[-1]
            assert tk == (start + size if name.endswith("self_attn") else 6)
            torch.testing.assert_close(rec.weights, full.weights[:, :, start : start + size, :tk], atol=1e-6, rtol=0)
            assert torch.equal(rec.mask, full.mask[:, start : start + size, :tk])


def test_cached_decoding_of_a_padded_target_equals_full_recomputation_at_real_positions(model, make_ids, gen) -> None:
    src, tgt = make_ids(gen, 2, 5), make_ids(gen, 2, 6)
    tgt[1, 3:] = 0
    full_logits, _ = run(model, src, tgt)
    logits, _, _ = decode_cached(model, src, tgt, [1] * 6)
    torch.testing.assert_close(logits[0], full_logits[0], atol=ATOL, rtol=ATOL)
    torch.testing.assert_close(logits[1, :3], full_logits[1, :3], atol=ATOL, rtol=ATOL)
    assert torch.isfinite(logits).all()

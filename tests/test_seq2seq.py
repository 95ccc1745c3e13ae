"""`transformers` encoder-decoders (Marian, BART, T5) run by their own forward: `atlas.analyze` gives every head of
the encoder, the decoder and the cross-attention on the source and the greedy output (or a given target), equal
within 1e-5 to the library's eager pass computed here, and the translator's tools take them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import atlas

transformers = pytest.importorskip("transformers")
from seq2seq_models import FAMILIES, OTHER, SOURCE, TARGET, tiny, word_tokenizer  # noqa: E402

TOL = 1e-5


def eager_pass(model, source_ids, target_ids):
    """The library's own eager forward with its attentions: what every number here is checked against."""
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            return model(
                input_ids=torch.tensor([source_ids]),
                decoder_input_ids=torch.tensor([target_ids]),
                output_attentions=True,
                return_dict=True,
            )
    finally:
        model.set_attn_implementation(before)


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_head_equals_the_eager_pass_on_the_greedy_output(family, tokenizer):
    model = tiny(family)
    analysis = atlas.analyze(model, SOURCE, tokenizer=tokenizer, max_tokens=6)
    source = tokenizer(SOURCE)["input_ids"]
    greedy = model.generate(
        input_ids=torch.tensor([source]), do_sample=False, num_beams=1, max_new_tokens=6, min_new_tokens=1
    )[0].tolist()
    assert list(analysis.target_ids) == greedy
    assert analysis.kind == "encoder-decoder"
    assert analysis.attentions == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    out = eager_pass(model, source, greedy)
    stacks = {"encoder.self_attn": out.encoder_attentions, "decoder.self_attn": out.decoder_attentions}
    stacks["decoder.cross_attn"] = out.cross_attentions
    for attention, layers in stacks.items():
        for layer, weights in enumerate(layers):
            sublayer = analysis.sublayer(attention, layer)
            np.testing.assert_allclose(sublayer.weights, weights[0].numpy(), atol=TOL)
    probs = torch.softmax(out.logits[0].double(), -1)
    for position, row in enumerate(analysis.predictions):
        assert row[0].id == int(probs[position].argmax())
        assert abs(row[0].prob - float(probs[position].max())) < TOL
    assert model.config._attn_implementation == "sdpa"  # switched back after the call


@pytest.mark.parametrize("family", FAMILIES)
def test_a_given_target_is_the_decoder_input_after_the_start_token(family, tokenizer):
    model = tiny(family)
    analysis = atlas.analyze(model, SOURCE, tokenizer=tokenizer, target=TARGET)
    start = model.config.decoder_start_token_id
    expected = [start, *tokenizer(text_target=TARGET)["input_ids"]]
    assert list(analysis.target_ids) == expected
    assert analysis.target_pieces[1:3] == ("die", "Katze")
    out = eager_pass(model, tokenizer(SOURCE)["input_ids"], expected)
    cross = analysis.sublayer("decoder.cross_attn", 1).weights
    np.testing.assert_allclose(cross, out.cross_attentions[1][0].numpy(), atol=TOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_views_draw_an_encoder_decoder(family, tokenizer):
    analysis = atlas.analyze(tiny(family), SOURCE, tokenizer=tokenizer, target=TARGET)
    for figure in (
        atlas.head(analysis, 2, 1),
        atlas.heads(analysis),
        atlas.paper(analysis, 1),
        atlas.rollout(analysis, attention="decoder.cross_attn"),
        atlas.mask(analysis),
    ):
        assert figure.data
    assert len(atlas.head_stats(analysis)) == 3 * 2 * 2
    assert len(atlas.detect_heads(analysis, pattern="previous token")) == 2 * 2 * 2


@pytest.mark.parametrize("family", FAMILIES)
def test_forced_decoding_gives_the_libraries_probabilities(family, tokenizer):
    model = tiny(family)
    table = atlas.forced(model, SOURCE, TARGET, tokenizer=tokenizer)
    target = [model.config.decoder_start_token_id, *tokenizer(text_target=TARGET)["input_ids"]]
    probs = torch.softmax(eager_pass(model, tokenizer(SOURCE)["input_ids"], target).logits[0].double(), -1)
    assert len(table) == len(target) - 1
    for step, token in enumerate(target[1:]):
        assert abs(table["probability"][step] - float(probs[step, token])) < TOL
        assert table["rank"][step] == int((probs[step] > probs[step, token]).sum()) + 1


def test_an_encoder_decoder_without_its_tokenizer_is_one_line(tokenizer):
    with pytest.raises(ValueError, match=r"^a Hugging Face model needs its tokenizer") as caught:
        atlas.analyze(tiny("bart"), SOURCE)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"^the target is empty"):
        atlas.analyze(tiny("bart"), SOURCE, tokenizer=tokenizer, target=" ")
    assert OTHER  # the pair the patching tests use


CROSS_VALUES = {"marian": "model.decoder.layers.{i}.encoder_attn", "bart": "model.decoder.layers.{i}.encoder_attn"}
T5_CROSS = "decoder.block.{i}.layer.1.EncDecAttention"


@pytest.mark.parametrize("family", FAMILIES)
def test_value_norms_are_each_keys_value_through_its_heads_output(family, tokenizer):
    """‖v_j W_O^h‖ of the cross-attention, from the encoder's output and the two projections' weights alone."""
    model = tiny(family)
    analysis = atlas.analyze(model, SOURCE, tokenizer=tokenizer, target=TARGET)
    target = [model.config.decoder_start_token_id, *tokenizer(text_target=TARGET)["input_ids"]]
    memory = eager_pass(model, tokenizer(SOURCE)["input_ids"], target).encoder_last_hidden_state[0].double()
    for i in range(2):
        path = (T5_CROSS if family == "t5" else CROSS_VALUES[family]).format(i=i)
        attention = dict(model.named_modules())[path]
        v_proj, o_proj = (attention.v, attention.o) if family == "t5" else (attention.v_proj, attention.out_proj)
        with torch.no_grad():
            values = v_proj(memory.float()).double().reshape(len(memory), 2, 8)  # (S, H, d_head)
            w_o = o_proj.weight.double().reshape(-1, 2, 8)  # (d_model, H, d_head)
        norms = torch.stack([(values[:, h] @ w_o[:, h].T).norm(dim=-1) for h in range(2)])  # (H, S)
        sublayer = analysis.sublayer("decoder.cross_attn", i)
        np.testing.assert_allclose(sublayer.value_norms, norms.numpy(), rtol=1e-5, atol=1e-6)
        moved = sublayer.weights * norms.numpy()[:, None, :]
        shares = moved / moved.sum(-1, keepdims=True)
        shown = atlas.value_weighted(analysis).sublayer("decoder.cross_attn", i).weights
        np.testing.assert_allclose(shown, shares, atol=TOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_rank_heads_is_each_heads_zeroed_output_by_a_pass_of_our_own(family, tokenizer):
    model = tiny(family)
    table = atlas.rank_heads(model, SOURCE, tokenizer=tokenizer)
    assert len(table) == 3 * 2 * 2 and table["KL (nats)"].is_monotonic_decreasing
    source = torch.tensor([tokenizer(SOURCE)["input_ids"]])
    target = torch.tensor([atlas.analyze(model, SOURCE, tokenizer=tokenizer).target_ids])
    with torch.no_grad():
        before = torch.log_softmax(model(input_ids=source, decoder_input_ids=target).logits[0].double(), -1)
    for _, top in table.iloc[:3].iterrows():
        _check_zeroed(model, family, source, target, before, top)


def _check_zeroed(model, family, source, target, before, top):
    """One row of rank_heads against the KL of a pass with that head's slice of the projection's input zeroed."""
    stack = "encoder" if top["attention"].startswith("Encoder") else "decoder"
    cross = "cross" in top["attention"].lower()
    if family == "t5":
        path = (
            f"{stack}.block.{top['layer'] - 1}.layer.{int(cross)}.{'EncDecAttention' if cross else 'SelfAttention'}.o"
        )
    else:
        path = f"model.{stack}.layers.{top['layer'] - 1}.{'encoder_attn' if cross else 'self_attn'}.out_proj"
    proj = dict(model.named_modules())[path]
    original, h = proj.forward, top["head"] - 1

    def zeroed(x):
        x = x.clone()
        x[..., h * 8 : (h + 1) * 8] = 0.0
        return original(x)

    try:
        proj.forward = zeroed
        with torch.no_grad():
            after = torch.log_softmax(model(input_ids=source, decoder_input_ids=target).logits[0].double(), -1)
    finally:
        proj.forward = original
    assert abs(float((before.exp() * (before - after)).sum(-1).mean()) - top["KL (nats)"]) < TOL


def _own_greedy(model, source, prefix, steps):
    """Argmax decoding by full teacher-forced passes: the tokens written after `prefix` and each one's probability."""
    ids, probs = list(prefix), []
    for _ in range(steps):
        with torch.no_grad():
            logits = model(input_ids=source, decoder_input_ids=torch.tensor([ids])).logits[0, -1].double()
        token = int(logits.argmax())
        probs.append(float(torch.softmax(logits, -1)[token]))
        if token == model.config.eos_token_id:
            break
        ids.append(token)
    return ids[len(prefix) :], probs


@pytest.mark.parametrize("family", FAMILIES)
def test_a_fork_is_greedy_both_ways_from_the_chosen_candidate(family, tokenizer):
    model = tiny(family)
    forked = atlas.fork(model, SOURCE, step=2, choice=2, max_tokens=5, tokenizer=tokenizer)
    source = torch.tensor([tokenizer(SOURCE)["input_ids"]])
    start = [model.config.decoder_start_token_id]
    greedy, probs = _own_greedy(model, source, start, 5)
    assert list(forked.greedy.ids) == greedy[1 : 1 + len(forked.greedy.ids)]  # from the fork step: step 2
    np.testing.assert_allclose(forked.greedy.probs, probs[1 : 1 + len(forked.greedy.probs)], atol=TOL)
    prefix = start + greedy[:1]
    with torch.no_grad():
        logits = model(input_ids=source, decoder_input_ids=torch.tensor([prefix])).logits[0, -1]
    second = int(torch.sort(logits, descending=True, stable=True).indices[1])
    assert forked.forked.ids[0] == second
    rest, _ = _own_greedy(model, source, prefix + [second], 5 - 2)
    assert list(forked.forked.ids[1:]) == rest[: len(forked.forked.ids) - 1]
    assert len(forked.table) == max(len(forked.greedy.probs), len(forked.forked.probs))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_lens_reads_each_decoder_layer_as_the_model_reads_its_last(family, tokenizer):
    """Each layer's top guess and probability from the library's own decoder hidden states, read here by hand: the
    output layer and final_logits_bias (Marian, BART: post-norm layers, no final norm), or T5's final RMS norm and
    its d_model^-½ rescaling of the tied embeddings."""
    model = tiny(family)
    table = atlas.logit_lens(model, SOURCE, tokenizer=tokenizer, as_table=True)
    target = list(atlas.analyze(model, SOURCE, tokenizer=tokenizer).target_ids)
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([tokenizer(SOURCE)["input_ids"]]),
            decoder_input_ids=torch.tensor([target]),
            output_hidden_states=True,
        )
        states = list(out.decoder_hidden_states)
        if family == "t5":  # its last entry is after the final norm; the layers' own outputs are before it
            read = lambda h: model.lm_head(model.decoder.final_layer_norm(h) * 16**-0.5)
            logits = [read(h) for h in states[:-1]] + [out.logits]
        else:
            logits = [model.lm_head(h) + model.final_logits_bias for h in states]
    hidden = sorted(tokenizer.all_special_ids)
    assert table.attrs["hidden"] == tokenizer.convert_ids_to_tokens(hidden)
    for layer, layer_logits in enumerate(logits):
        probs = torch.softmax(layer_logits[0].double(), -1)
        probs[:, hidden] = -1.0
        rows = table[table["layer"] == layer].sort_values("position")
        np.testing.assert_allclose(rows["probability"], probs.max(-1).values.numpy(), atol=TOL)
        assert list(rows["top guess"]) == tokenizer.convert_ids_to_tokens(probs.argmax(-1).tolist())
    assert atlas.logit_lens(model, SOURCE, tokenizer=tokenizer).data


def _own_k_score(model, family, stack, early, late):
    """‖W_OV W_K W_Qᵀ‖_F over the product of their norms, from the library's own weights (T5: its pre-norm gain
    folded into the reading matrices)."""

    def parts(layer):
        if family == "t5":
            wrapper = getattr(model, stack).block[layer].layer[0]
            attn, gain = wrapper.SelfAttention, wrapper.layer_norm.weight.detach().double()
            q, k, v, o = attn.q.weight, attn.k.weight, attn.v.weight, attn.o.weight
        else:
            attn = getattr(model.model, stack).layers[layer].self_attn
            q, k, v, o = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.out_proj.weight
            gain = torch.ones(16, dtype=torch.float64)
        return [w.detach().double() * (gain if i < 3 else 1) for i, w in enumerate((q, k, v))] + [o.detach().double()]

    (l1, h1), (l2, h2) = early, late
    _, _, v, o = parts(l1)
    q, k, _, _ = parts(l2)
    cut = lambda h: slice(h * 8, (h + 1) * 8)
    ov = v[cut(h1)].T @ o[:, cut(h1)].T  # (d_model, d_model): x ↦ x W_V W_O
    qk = k[cut(h2)].T @ q[cut(h2)]  # W_K W_Qᵀ
    return float(torch.linalg.norm(ov @ qk) / (torch.linalg.norm(ov) * torch.linalg.norm(qk)))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_composition_is_read_from_the_libraries_weights(family, stack):
    model = tiny(family)
    table = atlas.composition_scores(model, stack)
    assert len(table) == 2 * 2
    for _, row in table.iterrows():
        early = (int(row["earlier layer"]) - 1, int(row["earlier head"]) - 1)
        late = (int(row["later layer"]) - 1, int(row["later head"]) - 1)
        assert abs(row["K"] - _own_k_score(model, family, stack, early, late)) < TOL
    assert atlas.composition(model, "K", stack).data

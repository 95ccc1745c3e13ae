"""The circuit tools on `transformers` objects: a GPT-2, a Llama, a Qwen2 and a GPT-NeoX built from small random
configs (CPU, no download) are mapped onto our variants (inference.pretrained.objects), and every circuit
function's numbers equal what the library itself computes from the same weights on the same ids, within 1e-5."""

from __future__ import annotations

import numpy as np
import pandas.testing as pd_testing
import pytest
import torch

import atlas

transformers = pytest.importorskip("transformers")
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers  # noqa: E402

SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<pad>"]
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "rug", "a", "."]
TEXT = "the cat sat on the mat ."
OTHER = "the dog sat on the rug ."  # as many tokens as TEXT: a minimal pair
TOL = 1e-5


def word_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer, its specials first (ids 0–3) as a published model's added tokens are."""
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok)


def nudged(model: torch.nn.Module) -> torch.nn.Module:
    """Norm gains and biases moved off transformers' (1, 0) start, seeded: a mapping that drops one shows."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "ln" in name or "norm" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


def tiny_gpt2() -> transformers.GPT2LMHeadModel:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=3, n_head=2, n_embd=32, n_positions=24, vocab_size=len(SPECIALS + WORDS), bos_token_id=0, eos_token_id=0
    )
    return nudged(transformers.GPT2LMHeadModel(config))


def tiny_llama() -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(SPECIALS + WORDS),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=24,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    return nudged(transformers.LlamaForCausalLM(config))


def tiny_qwen2() -> transformers.Qwen2ForCausalLM:
    """A Llama with biased queries, keys and values (nudged off zero, so that dropping them shows)."""
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=len(SPECIALS + WORDS),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=24,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    return nudged(transformers.Qwen2ForCausalLM(config))


def tiny_neox(parallel: bool = True, rotary_pct: float = 0.25) -> transformers.GPTNeoXForCausalLM:
    """A GPT-NeoX as Pythia is built: its fused queries, keys and values, rotary positions on a quarter of each
    head's features, and attention and feed-forward in parallel (or, with `parallel` False, one after the other)."""
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(
        vocab_size=len(SPECIALS + WORDS),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=2,
        max_position_embeddings=24,
        rotary_pct=rotary_pct,
        use_parallel_residual=parallel,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    return nudged(transformers.GPTNeoXForCausalLM(config))


TINY = {"gpt2": tiny_gpt2, "llama": tiny_llama, "qwen2": tiny_qwen2, "gpt_neox": tiny_neox}


@pytest.fixture(scope="module", params=list(TINY))
def hf(request) -> tuple[torch.nn.Module, transformers.PreTrainedTokenizerFast]:
    return TINY[request.param](), word_tokenizer()


def read_ids(model, tokenizer, text: str) -> torch.Tensor:
    """The ids the rule gives (docs/published-models.md): bos, then the text's tokens."""
    return torch.tensor([[model.config.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]])


def own(model, ids: torch.Tensor):
    """The library's own pass: logits and every layer's attention weights (eager, output_attentions=True)."""
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            return model(ids, output_attentions=True)
    finally:
        model.set_attn_implementation(before)


def test_analyze_maps_the_object_and_every_head_equals_its_own_attention(hf) -> None:
    model, tokenizer = hf
    analysis = atlas.analyze(model, TEXT, tokenizer=tokenizer)
    ids = read_ids(model, tokenizer, TEXT)
    assert analysis.target_ids == tuple(ids[0].tolist())
    outputs = own(model, ids)
    for layer, expected in zip(analysis.layers("decoder.self_attn"), outputs.attentions, strict=True):
        sublayer = analysis.sublayer("decoder.self_attn", layer)
        np.testing.assert_allclose(sublayer.weights, expected[0].numpy(), atol=TOL, rtol=0)
        assert sublayer.scores is not None and sublayer.value_norms is not None  # a checkpoint's whole Analysis


def test_logit_attribution_sums_to_the_librarys_own_logit(hf) -> None:
    model, tokenizer = hf
    table = atlas.logit_attribution_scores(model, TEXT, token="mat", tokenizer=tokenizer)
    logits = own(model, read_ids(model, tokenizer, TEXT)).logits[0, -1]
    expected = float(logits[tokenizer.convert_tokens_to_ids("mat")])
    assert table.attrs["logit"] == pytest.approx(expected, abs=TOL)
    assert table["contribution"].sum() == pytest.approx(expected, abs=1e-4)
    figure = atlas.logit_attribution(model, TEXT, tokenizer=tokenizer)
    assert figure.data


def test_patching_reads_the_librarys_own_logit_differences(hf) -> None:
    model, tokenizer = hf
    table = atlas.patch_scores(model, TEXT, OTHER, answer="mat", versus="rug", tokenizer=tokenizer)
    mat, rug = tokenizer.convert_tokens_to_ids(["mat", "rug"])
    for text, key in ((TEXT, "clean"), (OTHER, "corrupted")):
        logits = own(model, read_ids(model, tokenizer, text)).logits[0, -1]
        assert table.attrs[key] == pytest.approx(float(logits[mat] - logits[rug]), abs=TOL)
    assert len(table) == model.config.num_hidden_layers * model.config.num_attention_heads
    assert atlas.patch(model, TEXT, OTHER, "mat", "rug", tokenizer=tokenizer, approximate=True).data


def among_named(probs: torch.Tensor, model, table) -> torch.Tensor:
    """`probs` (T, vocab) with the pieces the lens never names (`.attrs["hidden"]`: a start of text, padding; the
    word tokenizer's `<s>` and `<pad>`, whatever the model's own specials) put below every other."""
    hidden = [SPECIALS.index(p) for p in table.attrs["hidden"] if p in SPECIALS]
    assert {"<s>", "<pad>"} <= set(table.attrs["hidden"]) and SPECIALS[model.config.eos_token_id] not in hidden
    probs = probs.clone()
    probs[:, hidden] = -1.0
    return probs


def test_the_logit_lens_last_row_is_the_librarys_own_prediction(hf) -> None:
    model, tokenizer = hf
    table = atlas.logit_lens(model, TEXT, tokenizer=tokenizer, as_table=True)
    figure = atlas.logit_lens(model, TEXT, tokenizer=tokenizer)
    probs = own(model, read_ids(model, tokenizer, TEXT)).logits[0].softmax(-1)
    probs = among_named(probs, model, table)
    shown = np.asarray(figure.data[0].z)[-1]  # the top row: the model's own top guess at each position
    np.testing.assert_allclose(shown, probs.max(-1).values.numpy(), atol=TOL, rtol=0)


def reading_matrices(
    model, centre: bool = False
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Every head's W_Q, W_K, W_V (d_model × d_head, the pre-norm gain folded) and W_O (d_head × d_model, centred
    for a LayerNorm), straight from the library's modules, as TransformerLens's fold_ln builds them."""
    cfg = model.config
    heads, d_model = cfg.num_attention_heads, cfg.hidden_size
    d_head = d_model // heads
    wq, wk, wv, wo = [], [], [], []
    for layer in range(cfg.num_hidden_layers):
        if cfg.model_type == "gpt2":
            decoder_layer = model.transformer.h[layer]
            gain = decoder_layer.ln_1.weight.detach().double()
            q, k, v = decoder_layer.attn.c_attn.weight.detach().double().split(d_model, dim=1)  # Conv1D: (in, out)
            o = decoder_layer.attn.c_proj.weight.detach().double()  # (H·d_head, d_model)
            o = o - o.mean(dim=1, keepdim=True)
            group = 1
        elif cfg.model_type == "gpt_neox":
            decoder_layer = model.gpt_neox.layers[layer]
            gain = decoder_layer.input_layernorm.weight.detach().double()
            fused = decoder_layer.attention.query_key_value.weight.detach().double()  # (H·3·d_head, d_model), per head
            q, k, v = (fused.view(heads, 3, d_head, d_model)[:, i].reshape(d_model, d_model).T for i in range(3))
            o = decoder_layer.attention.dense.weight.detach().double().T  # (H·d_head, d_model)
            o = o - o.mean(dim=1, keepdim=True)
            group = 1
        else:
            decoder_layer = model.model.layers[layer]
            gain = decoder_layer.input_layernorm.weight.detach().double()
            q, k, v = (getattr(decoder_layer.self_attn, f"{x}_proj").weight.detach().double().T for x in "qkv")
            o = decoder_layer.self_attn.o_proj.weight.detach().double().T
            group = heads // cfg.num_key_value_heads
        for h in range(heads):
            part = slice(h * d_head, (h + 1) * d_head)
            kv = slice((h // group) * d_head, (h // group + 1) * d_head)
            for out, w in ((wq, q[:, part]), (wk, k[:, kv]), (wv, v[:, kv])):
                w = gain[:, None] * w
                layer_norm = cfg.model_type in ("gpt2", "gpt_neox")  # a Llama's RMSNorm does not centre
                out.append((w - w.mean(dim=0, keepdim=True) if centre and layer_norm else w).numpy())
            wo.append(o[part].numpy())
    return wq, wk, wv, wo


@pytest.mark.parametrize("centre", [False, True])
def test_composition_equals_the_full_matrices_of_the_librarys_weights(hf, centre) -> None:
    model, tokenizer = hf
    table = atlas.composition_scores(model, tokenizer=tokenizer, centre=centre)
    wq, wk, wv, wo = reading_matrices(model, centre)
    heads = model.config.num_attention_heads
    for row in table.head(6).itertuples():
        early = (row._1 - 1) * heads + row._2 - 1  # earlier layer, earlier head
        late = (row._3 - 1) * heads + row._4 - 1
        ov = wv[early] @ wo[early]
        qk = wq[late] @ wk[late].T
        expected = np.linalg.norm(ov @ qk.T) / (np.linalg.norm(ov) * np.linalg.norm(qk))
        assert row.K == pytest.approx(expected, abs=TOL)
        value = np.linalg.norm(ov @ (wv[late] @ wo[late])) / (np.linalg.norm(ov) * np.linalg.norm(wv[late] @ wo[late]))
        assert row.V == pytest.approx(value, abs=TOL)
    assert atlas.composition(model, "Q", tokenizer=tokenizer).data


def test_a_model_object_without_its_tokenizer_or_of_another_kind_is_named() -> None:
    with pytest.raises(ValueError, match="needs its tokenizer"):
        atlas.logit_lens(tiny_gpt2(), TEXT)
    with pytest.raises(
        TypeError, match="takes a loaded model \\(atlas.load\\), a transformers GPT-2, Llama, Qwen2 or GPT-NeoX with"
    ):
        atlas.composition_scores("gpt2")
    bert = transformers.BertModel(transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2))
    with pytest.raises(
        ValueError, match="'bert' model is not one this app maps onto its own; it reads gpt2, gpt_neox, llama, qwen2"
    ):
        atlas.patch_scores(bert, TEXT, OTHER, tokenizer=word_tokenizer())


@pytest.mark.parametrize("kind", list(TINY))
def test_one_tokenization_whatever_the_entry_point(tmp_path, kind) -> None:
    """The object and its saved folder read a text alike: bos, then the text's tokens (docs/published-models.md)."""
    model, tokenizer = TINY[kind](), word_tokenizer()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    from_folder = atlas.analyze(atlas.load(tmp_path), TEXT)
    from_object = atlas.analyze(model, TEXT, tokenizer=tokenizer)
    assert from_object.target_ids == from_folder.target_ids == tuple(read_ids(model, tokenizer, TEXT)[0].tolist())
    assert from_object.target_pieces[0] == SPECIALS[model.config.bos_token_id]
    for layer in from_folder.layers("decoder.self_attn"):
        np.testing.assert_array_equal(
            from_object.sublayer("decoder.self_attn", layer).weights,
            from_folder.sublayer("decoder.self_attn", layer).weights,
        )


LONG = " ".join(["the cat sat on the mat ."] * 5)  # 35 tokens and bos: over the tiny models' 24 positions


def test_a_text_over_the_context_is_cut_with_one_warning_for_objects_and_checkpoints(tmp_path) -> None:
    model, tokenizer = tiny_gpt2(), word_tokenizer()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    said = []
    for entry, kwargs in ((model, {"tokenizer": tokenizer}), (atlas.load(tmp_path), {})):
        with pytest.warns(atlas.AnalysisWarning, match="cut from 35 to 23 tokens") as record:
            analysis = atlas.analyze(entry, LONG, **kwargs)
        assert len(analysis.target_ids) == 24
        said.append(str(record[0].message))
        with pytest.warns(atlas.AnalysisWarning, match="cut from 35 to 23 tokens"):
            atlas.logit_attribution_scores(entry, LONG, **kwargs)
        with pytest.warns(atlas.AnalysisWarning, match="cut from 35 to 23 tokens"):
            atlas.patch_scores(entry, LONG, LONG.replace("mat", "rug"), "mat", "rug", **kwargs)
    assert said[0] == said[1]


def test_a_text_over_an_unmapped_models_context_is_cut_with_a_warning_not_an_index_error() -> None:
    torch.manual_seed(0)
    config = transformers.OPTConfig(  # an OPT is not mapped onto ours: run by its own forward
        num_hidden_layers=1, num_attention_heads=2, hidden_size=16, word_embed_proj_dim=16, ffn_dim=32,
        max_position_embeddings=24, vocab_size=len(SPECIALS + WORDS), bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    unmapped = transformers.OPTForCausalLM(config).eval()
    with pytest.warns(atlas.AnalysisWarning, match="cut from 36 to 24 tokens"):
        analysis = atlas.analyze(unmapped, LONG, tokenizer=word_tokenizer())
    assert len(analysis.target_pieces) == 24 and analysis.target_pieces[0] == "<s>"


def test_a_list_of_texts_gives_a_list_of_analyses_and_of_tables_each_as_alone(hf) -> None:
    model, tokenizer = hf
    both = atlas.analyze(model, [TEXT, OTHER], tokenizer=tokenizer)
    assert isinstance(both, list) and len(both) == 2
    for text, analysis in zip((TEXT, OTHER), both, strict=True):
        alone = atlas.analyze(model, text, tokenizer=tokenizer)
        assert analysis.target_ids == alone.target_ids
        for name in alone.attentions:
            for layer in alone.layers(name):
                np.testing.assert_allclose(
                    analysis.sublayer(name, layer).weights, alone.sublayer(name, layer).weights, atol=TOL
                )
    tables = atlas.logit_attribution_scores(model, [TEXT, OTHER], token="mat", tokenizer=tokenizer)
    assert [t.attrs["logit"] for t in tables] == pytest.approx(
        [
            atlas.logit_attribution_scores(model, t, token="mat", tokenizer=tokenizer).attrs["logit"]
            for t in (TEXT, OTHER)
        ],
        abs=TOL,
    )
    pairs = atlas.patch_scores(model, [TEXT, OTHER], [OTHER, TEXT], "mat", "rug", tokenizer=tokenizer)
    for pair, clean in zip(pairs, (TEXT, OTHER), strict=True):
        alone = atlas.patch_scores(model, clean, OTHER if clean == TEXT else TEXT, "mat", "rug", tokenizer=tokenizer)
        assert pair.attrs["clean"] == pytest.approx(alone.attrs["clean"], abs=TOL)
        np.testing.assert_allclose(pair["restored"], alone["restored"], atol=TOL)


UNEVEN = [TEXT, "the cat sat .", "a dog sat on a rug"]  # 7, 4 and 6 words: padded to the longest in a batch


def same_table(batched, alone) -> None:
    """Two tables equal within TOL: the same rows and labels, numbers within TOL, the same `.attrs`."""
    pd_testing.assert_frame_equal(batched, alone, check_exact=False, atol=TOL, rtol=0)
    assert batched.attrs.keys() == alone.attrs.keys()
    for key, value in alone.attrs.items():
        assert batched.attrs[key] == (pytest.approx(value, abs=TOL) if isinstance(value, float) else value), key


def test_a_list_of_texts_of_other_lengths_runs_as_one_batch_equal_to_each_alone(hf, monkeypatch) -> None:
    model, tokenizer = hf
    import analysis.attribution

    passes = []
    forward = analysis.attribution.forward
    monkeypatch.setattr(
        analysis.attribution, "forward", lambda m, ids, *a, **k: passes.append(ids.shape) or forward(m, ids, *a, **k)
    )
    tables = atlas.logit_attribution_scores(model, UNEVEN, tokenizer=tokenizer)
    lenses = atlas.logit_lens(model, UNEVEN, as_table=True, tokenizer=tokenizer)
    longest = max(read_ids(model, tokenizer, t).shape[1] for t in UNEVEN)
    assert passes == [(3, longest), (3, longest)]  # one padded pass each, not one per text
    for text, table, lens in zip(UNEVEN, tables, lenses, strict=True):
        same_table(table, atlas.logit_attribution_scores(model, text, tokenizer=tokenizer))
        same_table(lens, atlas.logit_lens(model, text, as_table=True, tokenizer=tokenizer))
    figures = atlas.logit_lens(model, UNEVEN, tokenizer=tokenizer)
    assert [len(f.data[0].z[0]) for f in figures] == [read_ids(model, tokenizer, t).shape[1] for t in UNEVEN]


def test_a_bad_list_or_text_in_a_list_is_named() -> None:
    model, tokenizer = tiny_gpt2(), word_tokenizer()
    with pytest.raises(TypeError, match="a text \\(a str\\) or a list of texts, not an empty list"):
        atlas.analyze(model, [], tokenizer=tokenizer)
    with pytest.raises(TypeError, match="not a list holding int"):
        atlas.analyze(model, [TEXT, 3], tokenizer=tokenizer)
    with pytest.raises(ValueError, match="^text 2: The text is empty"):
        atlas.analyze(model, [TEXT, "   "], tokenizer=tokenizer)
    with pytest.raises(ValueError, match="pairs texts one to one: 2 clean, 1 corrupted"):
        atlas.patch_scores(model, [TEXT, OTHER], [OTHER], "mat", "rug", tokenizer=tokenizer)


DEVICE_CALLS = {  # every function of the notebook API that takes device=, called on a tiny GPT-2
    "analyze": lambda m, t, **k: atlas.analyze(m, TEXT, tokenizer=t, **k).sublayer("decoder.self_attn", 0).weights,
    "composition": lambda m, t, **k: atlas.composition(m, tokenizer=t, **k).data[0].z,
    "composition_scores": lambda m, t, **k: atlas.composition_scores(m, tokenizer=t, **k)[["Q", "K", "V"]],
    "logit_attribution": lambda m, t, **k: atlas.logit_attribution(m, TEXT, tokenizer=t, **k).data[0].z,
    "logit_attribution_scores": lambda m, t, **k: atlas.logit_attribution_scores(m, [TEXT], tokenizer=t, **k)[0][
        "contribution"
    ],
    "logit_lens": lambda m, t, **k: atlas.logit_lens(m, TEXT, as_table=True, tokenizer=t, **k)["probability"],
    "patch": lambda m, t, **k: atlas.patch(m, TEXT, OTHER, "mat", "rug", tokenizer=t, **k).data[0].z,
    "patch_scores": lambda m, t, **k: atlas.patch_scores(m, TEXT, OTHER, "mat", "rug", tokenizer=t, **k)["restored"],
    "score_parts": lambda m, t, **k: (
        atlas.score_parts(m, TEXT, layer=2, head=1, query=4, key=2, tokenizer=t, **k).table
    ),
}


def test_every_device_keyword_takes_cpu_and_names_a_missing_gpu_in_one_line() -> None:
    model, tokenizer = tiny_gpt2(), word_tokenizer()
    for name, call in DEVICE_CALLS.items():
        default = np.asarray(call(model, tokenizer), dtype=float)
        np.testing.assert_allclose(np.asarray(call(model, tokenizer, device="cpu"), dtype=float), default, err_msg=name)
        for device, words in (("gpu please", 'device must be "cpu" or "cuda"'), ("mps", "runs models on")):
            with pytest.raises(ValueError, match=words) as error:
                call(model, tokenizer, device=device)
            assert "\n" not in str(error.value) and error.value.__cause__ is None, name
        if not torch.cuda.is_available():
            with pytest.raises(ValueError) as error:
                call(model, tokenizer, device="cuda")
            assert str(error.value) == (
                "device 'cuda' was asked for, but torch finds no CUDA GPU here: leave device out (CPU)"
            ), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/any_model_device.py runs them all)")
def test_the_scores_on_a_gpu_equal_the_cpus() -> None:
    model, tokenizer = tiny_gpt2(), word_tokenizer()
    cpu = atlas.logit_attribution_scores(model, TEXT, tokenizer=tokenizer)
    gpu = atlas.logit_attribution_scores(model, TEXT, tokenizer=tokenizer, device="cuda")
    np.testing.assert_allclose(gpu["contribution"], cpu["contribution"], atol=1e-4)
    assert next(model.parameters()).device.type == "cpu"  # the caller's model stays where it was


def test_centring_changes_a_layer_norm_models_scores_only() -> None:
    tokenizer = word_tokenizer()
    for model, changes in ((tiny_gpt2(), True), (tiny_llama(), False)):
        plain = atlas.composition_scores(model, tokenizer=tokenizer)
        centred = atlas.composition_scores(model, tokenizer=tokenizer, centre=True)
        gap = np.abs(plain[["Q", "K", "V"]].to_numpy() - centred[["Q", "K", "V"]].to_numpy()).max()
        assert (gap > 1e-6) == changes, (model.config.model_type, gap)


def test_the_random_weights_baseline_is_seeded_and_read_against() -> None:
    model, tokenizer = tiny_gpt2(), word_tokenizer()
    table = atlas.composition_scores(model, tokenizer=tokenizer, baseline=0)
    chance = table.attrs["baseline"]
    assert chance == atlas.composition_scores(model, tokenizer=tokenizer, baseline=0).attrs["baseline"]
    assert chance != atlas.composition_scores(model, tokenizer=tokenizer, baseline=1).attrs["baseline"]
    assert set(chance) == {"Q", "K", "V"} and all(0 < c < 1 for c in chance.values())
    np.testing.assert_allclose(table["K over baseline"], table["K"] / chance["K"])
    assert "baseline" not in atlas.composition_scores(model, tokenizer=tokenizer).attrs
    with pytest.raises(ValueError, match="baseline is the random weights' seed, a whole number"):
        atlas.composition_scores(model, tokenizer=tokenizer, baseline=0.5)


def test_the_logit_lens_as_a_table_ends_on_the_librarys_own_guesses_and_names_what_it_hides(hf) -> None:
    model, tokenizer = hf
    table = atlas.logit_lens(model, TEXT, tokenizer=tokenizer, as_table=True)
    layers, ids = model.config.num_hidden_layers, read_ids(model, tokenizer, TEXT)
    assert sorted(set(table["layer"])) == list(range(layers + 1)) and len(table) == (layers + 1) * ids.shape[1]
    probs = among_named(own(model, ids).logits[0].softmax(-1), model, table)
    last = table[table["layer"] == layers].sort_values("position")
    assert list(last["top guess"]) == tokenizer.convert_ids_to_tokens(probs.argmax(-1).tolist())
    np.testing.assert_allclose(last["probability"], probs.max(-1).values.numpy(), atol=TOL, rtol=0)
    np.testing.assert_allclose(last["final guess probability"], last["probability"], atol=TOL, rtol=0)
    assert list(last["token"]) == tokenizer.convert_ids_to_tokens(ids[0].tolist())
    assert table.attrs["hidden"] and not set(table["top guess"]) & set(table.attrs["hidden"])


def head_outputs_weight(model) -> list[torch.Tensor]:
    """Each layer's W^O as (heads, d_head, d_model), from the library's own modules (GPT-2's Conv1D is (in, out))."""
    cfg, out = model.config, []
    heads = cfg.num_attention_heads
    for layer in range(cfg.num_hidden_layers):
        if cfg.model_type == "gpt2":
            w_o = model.transformer.h[layer].attn.c_proj.weight.detach()
        else:
            w_o = model.model.layers[layer].self_attn.o_proj.weight.detach().T
        out.append(w_o.reshape(heads, -1, w_o.shape[-1]))
    return out


@pytest.mark.slow  # TransformerLens takes about 7 s to import
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_transformer_lens_bridge_runs_every_circuit_function_equal_to_its_own_cache(kind) -> None:
    """Weights, value norms, logit attribution, the logit lens at every layer, activation patching of every head and
    composition, each against what the bridge itself records (`run_with_cache`, `run_with_hooks`) within 1e-5."""
    from transformer_lens.model_bridge import TransformerBridge

    model, tokenizer = TINY[kind](), word_tokenizer()
    bridge = TransformerBridge.boot_transformers(kind, hf_model=model, tokenizer=tokenizer)
    ids, other = read_ids(model, tokenizer, TEXT), read_ids(model, tokenizer, OTHER)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(ids)
        other_logits, _ = bridge.run_with_cache(other)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    analysis = atlas.analyze(bridge, TEXT)  # the bridge's tokenizer, its model mapped onto ours
    assert analysis.target_ids == tuple(ids[0].tolist())
    for layer, w_o in zip(analysis.layers("decoder.self_attn"), head_outputs_weight(model), strict=True):
        sublayer = analysis.sublayer("decoder.self_attn", layer)
        expected = cache[f"blocks.{layer}.attn.hook_pattern"][0].numpy()
        np.testing.assert_allclose(sublayer.weights, expected, atol=TOL, rtol=0)
        v = cache[f"blocks.{layer}.attn.hook_v"][0]  # (T, kv heads, d_head): a grouped-query model's fewer heads
        v = v.repeat_interleave(heads // v.shape[1], dim=1)
        norms = torch.einsum("thd,hdm->htm", v, w_o).norm(dim=-1)  # ‖v_j W_O^h‖ (Kobayashi et al. 2020)
        np.testing.assert_allclose(sublayer.value_norms, norms.numpy(), atol=TOL, rtol=1e-5)

    mat, rug = tokenizer.convert_tokens_to_ids(["mat", "rug"])
    table = atlas.logit_attribution_scores(bridge, TEXT, token="mat")
    assert table.attrs["logit"] == pytest.approx(float(logits[0, -1, mat]), abs=TOL)

    lens = atlas.logit_lens(bridge, TEXT, as_table=True)
    for layer in range(layers + 1):
        with torch.no_grad():  # the stream entering each sub-layer (and the last sub-layer's output) read as the last
            stream = (
                cache[f"blocks.{layer}.hook_resid_pre"]
                if layer < layers
                else cache[f"blocks.{layer - 1}.hook_resid_post"]
            )
            probs = bridge.unembed(bridge.ln_final(stream))[0].softmax(-1)
        rows = lens[lens["layer"] == layer].sort_values("position")
        np.testing.assert_allclose(rows["probability"], probs.max(-1).values.numpy(), atol=TOL, rtol=0)
    np.testing.assert_allclose(probs.numpy(), logits[0].softmax(-1).numpy(), atol=TOL)  # the last: its prediction

    patched = atlas.patch_scores(bridge, TEXT, OTHER, "mat", "rug").set_index(["layer", "head"])["restored"]
    # the logit differences as the bridge gives them; the GPT-2's two differ by 1.6e-4 only, so the shares are
    # compared unnormalised (a 1e-8 difference of two logits would move a share by 1e-4)
    clean, corrupted = (float(x[0, -1, mat] - x[0, -1, rug]) for x in (logits, other_logits))
    for layer in range(layers):
        for head in range(heads):

            def from_clean(z, hook, head=head, layer=layer):  # this head's output, softmax(QKᵀ/√d)V, before W^O
                z[:, :, head] = cache[f"blocks.{layer}.attn.hook_z"][:, :, head]
                return z

            with torch.no_grad():
                run = bridge.run_with_hooks(other, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", from_clean)])
            ours = corrupted + patched[(layer + 1, head + 1)] * (clean - corrupted)  # the share, unnormalised
            assert ours == pytest.approx(float(run[0, -1, mat] - run[0, -1, rug]), abs=1e-6), (layer, head)

    pd_testing.assert_frame_equal(
        atlas.composition_scores(bridge), atlas.composition_scores(model, tokenizer=tokenizer)
    )

    split = atlas.score_parts(bridge, TEXT, layer=layers, head=heads, query=8, key=3)  # counted from 1
    expected = float(cache[f"blocks.{layers - 1}.attn.hook_attn_scores"][0, heads - 1, 7, 2])
    assert split.score == pytest.approx(expected, abs=TOL)
    assert split.table.to_numpy().sum() == pytest.approx(expected, abs=TOL)


def test_the_score_split_of_an_object_sums_to_its_raw_score(hf) -> None:
    """Why a head attends, on the mapped GPT-2, Llama and Qwen2: the parts (the earlier layers' heads among them)
    sum to the score the Analysis records; the bridge test holds that score to TransformerLens's own."""
    model, tokenizer = hf
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    split = atlas.score_parts(model, TEXT, layer=layers, head=heads, query=8, key=3, tokenizer=tokenizer)
    sublayer = atlas.analyze(model, TEXT, tokenizer=tokenizer).sublayer("decoder.self_attn", layers - 1)
    assert split.score == pytest.approx(float(sublayer.scores[heads - 1, 7, 2]), abs=TOL)
    assert split.table.to_numpy().sum() == pytest.approx(split.score, abs=TOL)
    assert f"L{layers - 1} H{heads}" in split.table.index and "token embeddings" in split.table.columns


def test_value_weighted_attention_reads_a_mapped_objects_analysis() -> None:
    """A mapped object's Analysis carries values and their norms, as a checkpoint's does: no "read from a file"."""
    analysis = atlas.analyze(tiny_gpt2(), TEXT, tokenizer=word_tokenizer())
    weighted = atlas.value_weighted(analysis)
    sublayer = weighted.sublayer("decoder.self_attn", 0)
    np.testing.assert_allclose(sublayer.weights.sum(-1), 1.0, atol=1e-5)


def test_token_ids_read_as_the_text_they_spell_in_every_circuit_function(hf) -> None:
    """Ids with the start token (a tensor, as a tokenizer returns them) or without it (a list: it is put first)
    give what the text gives: the same Analysis, logit attribution, lens and patching."""
    model, tokenizer = hf
    with_bos = read_ids(model, tokenizer, TEXT)  # (1, T)
    bare = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    by_text = atlas.analyze(model, TEXT, tokenizer=tokenizer)
    for given in (with_bos, bare):
        analysis = atlas.analyze(model, given, tokenizer=tokenizer)
        assert analysis.target_ids == by_text.target_ids and analysis.text == TEXT
        np.testing.assert_array_equal(
            analysis.sublayer("decoder.self_attn", 0).weights, by_text.sublayer("decoder.self_attn", 0).weights
        )
    kwargs = {"token": "mat", "tokenizer": tokenizer}
    pd_testing.assert_frame_equal(
        atlas.logit_attribution_scores(model, bare, **kwargs), atlas.logit_attribution_scores(model, TEXT, **kwargs)
    )
    pd_testing.assert_frame_equal(
        atlas.logit_lens(model, with_bos, as_table=True, tokenizer=tokenizer),
        atlas.logit_lens(model, TEXT, as_table=True, tokenizer=tokenizer),
    )
    other = tokenizer(OTHER, add_special_tokens=False)["input_ids"]
    for approximate in (False, True):
        by_ids = atlas.patch_scores(model, bare, other, "mat", "rug", approximate=approximate, tokenizer=tokenizer)
        pd_testing.assert_frame_equal(
            by_ids, atlas.patch_scores(model, TEXT, OTHER, "mat", "rug", approximate=approximate, tokenizer=tokenizer)
        )


def test_token_ids_that_cannot_be_read_are_one_line_each() -> None:
    model, tokenizer = tiny_gpt2(), word_tokenizer()
    with pytest.raises(ValueError, match="^token ids are 0 to 14 for .*; these have others$"):
        atlas.logit_lens(model, [4, 99], tokenizer=tokenizer)
    with pytest.raises(ValueError, match="^30 token ids with the start token, over .*'s 24 positions"):
        atlas.analyze(model, [4] * 29, tokenizer=tokenizer)
    with pytest.raises(TypeError, match="pairs two texts or two rows of token ids, not one of each"):
        atlas.patch_scores(model, TEXT, [4, 5, 6], tokenizer=tokenizer)
    with pytest.raises(ValueError, match="the ids are 3 and 2 long"):
        atlas.patch_scores(model, [4, 5], [4], tokenizer=tokenizer)
    with pytest.raises(
        ValueError, match="reads one row of token ids, \\(T,\\) or \\(1, T\\), not a tensor of \\(2, 3\\)"
    ):
        atlas.analyze(model, torch.ones(2, 3, dtype=torch.long), tokenizer=tokenizer)
    with pytest.raises(ValueError, match="token ids for a language model only; translate-en-de reads a text"):
        atlas.logit_attribution_scores(atlas.load("translate-en-de"), [5, 6])

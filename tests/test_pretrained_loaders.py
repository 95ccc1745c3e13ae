"""The loaders and the catalog on published layouts made here, tiny and seeded (no download): a BERT folder and zip
(config.json, model.safetensors, tokenizer.json), a Llama folder in the same layout, and a Llama GGUF file written
with the `gguf` package in llama.cpp's layout (Q/K rows permuted, Q8_0 weights). The GGUF loads as transformers
loads it, the Analysis comes out as for our own models, and a file that does not fit names what does not."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402

from analysis.analyze import analyze, batch_masks, generate_text, positions_used  # noqa: E402
from inference import catalog  # noqa: E402
from inference.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from inference.pretrained.gguf_file import unpermute  # noqa: E402
from inference.pretrained.loaders import traced_max_len  # noqa: E402
from inference.text import InputError  # noqa: E402

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "##s", "."]
SPECIAL_BPE = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>"]
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a"), ("ca", "t")]


def bert_tokenizer() -> Tokenizer:
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


def bpe_tokens() -> list[str]:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    return SPECIAL_BPE + alphabet + ["".join(pair) for pair in MERGES]


def bpe_tokenizer() -> Tokenizer:
    tokens = bpe_tokens()
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, MERGES))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_BPE])
    return tok


def seeded(model: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():  # transformers initialises norms to 1: make them count
        for name, param in model.named_parameters():
            if "norm" in name.lower():
                param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("published")
    torch.manual_seed(0)
    bert = seeded(
        transformers.BertModel(
            transformers.BertConfig(
                vocab_size=15,
                hidden_size=32,
                num_attention_heads=4,
                num_hidden_layers=2,
                intermediate_size=48,
                max_position_embeddings=24,
            )
        )
    )
    bert.save_pretrained(root / "tiny-bert")
    torch.manual_seed(1)
    mlm = seeded(transformers.BertForMaskedLM(bert.config))
    mlm.save_pretrained(root / "tiny-bert-mlm")
    bert_tokenizer().save(str(root / "tiny-bert-mlm" / "tokenizer.json"))
    bert_tokenizer().save(str(root / "tiny-bert" / "tokenizer.json"))
    with zipfile.ZipFile(root / "tiny-bert.zip", "w") as zf:
        for f in sorted((root / "tiny-bert").iterdir()):
            zf.write(f, f"inner/{f.name}")
    llama = seeded(
        transformers.LlamaForCausalLM(
            transformers.LlamaConfig(
                vocab_size=len(bpe_tokens()),
                hidden_size=64,
                num_attention_heads=4,
                num_key_value_heads=2,
                num_hidden_layers=2,
                intermediate_size=96,
                max_position_embeddings=48,
                tie_word_embeddings=True,
                bos_token_id=1,
                eos_token_id=2,
                pad_token_id=2,
            )
        )
    )
    llama.save_pretrained(root / "tiny-llama")
    bpe_tokenizer().save(str(root / "tiny-llama" / "tokenizer.json"))
    write_gguf(llama, root / "gguf" / "tiny.gguf")
    return {
        "root": root,
        "bert": root / "tiny-bert",
        "zip": root / "tiny-bert.zip",
        "llama": root / "tiny-llama",
        "gguf": root / "gguf" / "tiny.gguf",
        "hf_bert": bert,
        "hf_llama": llama,
        "mlm": root / "tiny-bert-mlm",
        "hf_mlm": mlm,
    }


def permute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter's reordering of W_q/W_k rows (what unpermute undoes)."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, 2, rows // n_heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def write_gguf(model: torch.nn.Module, path: Path, drop: str | None = None, shrink: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(bpe_tokens())
    writer.add_token_types([3] * len(SPECIAL_BPE) + [1] * (len(bpe_tokens()) - len(SPECIAL_BPE)))
    writer.add_token_merges([" ".join(pair) for pair in MERGES])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    names = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied
        weight = tensor.numpy().astype(np.float32)
        if name == "model.embed_tokens.weight":
            ours = "token_embd.weight"
        elif name == "model.norm.weight":
            ours = "output_norm.weight"
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            ours = f"blk.{layer}.{names[rest.removesuffix('.weight')]}.weight"
            if "q_proj" in name:
                weight = permute(weight, cfg.num_attention_heads)
            elif "k_proj" in name:
                weight = permute(weight, cfg.num_key_value_heads)
        if ours == drop:
            continue
        if ours == shrink:
            weight = weight[:-1]
        if weight.ndim == 2 and weight.shape[1] % 32 == 0:
            q8 = gguf.quants.quantize(weight, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(ours, q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(ours, weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_unpermute_undoes_llama_cpps_reordering_of_query_and_key_rows() -> None:
    weight = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    assert np.array_equal(unpermute(permute(weight, 2), 2), weight)
    assert not np.array_equal(permute(weight, 2), weight)


@torch.no_grad()
def test_a_gguf_file_loads_as_transformers_loads_it(published) -> None:
    path = published["gguf"]
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    ckpt = load_checkpoint(path)
    assert (ckpt.config.kind, ckpt.config.n_heads, ckpt.config.kv_heads, ckpt.config.positional) == (
        "decoder-only",
        4,
        2,
        "rotary",
    )
    ids = torch.tensor([[1, *ckpt.tokenizer.encode("the cat sat on the mat")]])
    logits, trace = ckpt.model(ids)
    expected = reference(ids, output_attentions=True)
    torch.testing.assert_close(logits, expected.logits, atol=1e-4, rtol=1e-4)
    for i, weights in enumerate(expected.attentions):
        torch.testing.assert_close(trace.attention[f"decoder.layers.{i}.self_attn"].weights, weights, atol=1e-4, rtol=0)
    # Q8_0 is close to the float32 weights it was made from, not equal: the file's own numbers were used
    assert 0 < (logits - published["hf_llama"](ids).logits).abs().max() < 0.05


def test_the_circuit_functions_read_a_gguf_as_transformers_reads_it(published) -> None:
    """Logit attribution and activation patching on `atlas.load` of the GGUF, given token ids (a pair one token
    apart), read the logits transformers computes from the same file, within the parity test's 1e-4."""
    import atlas

    path = published["gguf"]
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    model = atlas.load(path)
    ids = [1, *model.tokenizer.encode("the cat sat on the mat")]
    other = [*ids[:2], ids[3], *ids[3:]]  # one token changed, as many tokens
    with torch.no_grad():
        clean, corrupted = (reference(torch.tensor([x])).logits[0, -1] for x in (ids, other))
    answer, versus = int(clean.argmax()), int(corrupted.argmin())
    table = atlas.logit_attribution_scores(model, ids, token=answer)
    assert table.attrs["logit"] == pytest.approx(float(clean[answer]), abs=1e-4)
    assert table["contribution"].sum() == pytest.approx(float(clean[answer]), abs=1e-4)
    patched = atlas.patch_scores(model, ids, other, answer, versus)
    assert patched.attrs["clean"] == pytest.approx(float(clean[answer] - clean[versus]), abs=1e-4)
    assert patched.attrs["corrupted"] == pytest.approx(float(corrupted[answer] - corrupted[versus]), abs=1e-4)
    assert len(patched) == model.config.n_decoder_layers * model.config.n_heads


def test_the_gguf_tokenizer_reads_the_files_vocabulary_merges_and_specials(published) -> None:
    tok = load_checkpoint(published["gguf"]).tokenizer
    ids = tok.encode(" the cat 42")
    assert tok.pieces(ids) == ["Ġthe", "Ġ", "cat", "Ġ", "4", "2"]  # merges applied, digits one by one
    assert tok.decode(ids) == " the cat 42"
    # pad is eos in the file: a control token no text produces serves instead; typed specials stay text
    assert (tok.unk_id, tok.bos_id, tok.eos_id, tok.pad_id) == (0, 1, 2, 3)
    assert 2 not in tok.encode("<|im_end|>")
    assert tok.never_written == frozenset()  # its control tokens are text it was trained to write


@pytest.mark.parametrize("source", ["bert", "zip"])
@torch.no_grad()
def test_a_bert_folder_or_zip_loads_as_an_encoder_whose_hidden_states_equal_transformers(published, source) -> None:
    ckpt = load_checkpoint(published[source])
    assert ckpt.config.kind == "encoder-only" and ckpt.tokenizer.bos_id == 2 and ckpt.tokenizer.eos_id == 3
    ids = torch.tensor([[2, *ckpt.tokenizer.encode("The cat sat on the mats."), 3]])
    _, trace = ckpt.model(ids, record=False, activations=True)
    hidden = trace.activations["encoder.output"]
    torch.testing.assert_close(hidden, published["hf_bert"](ids).last_hidden_state, atol=1e-4, rtol=1e-4)


@torch.no_grad()
def test_a_llama_folder_in_hugging_face_layout_loads_with_the_same_logits(published) -> None:
    ckpt = load_checkpoint(published["llama"])
    ids = torch.tensor([[1, *ckpt.tokenizer.encode("the cat")]])
    torch.testing.assert_close(ckpt.model(ids)[0], published["hf_llama"](ids).logits, atol=1e-4, rtol=1e-4)


def test_the_encoder_analysis_reads_cls_text_sep_and_writes_nothing(published) -> None:
    ckpt = load_checkpoint(published["bert"])
    result = analyze(ckpt, "the cat sat", k=3)
    assert result.kind == "encoder-only" and result.source_pieces == ("[CLS]", "the", "cat", "sat", "[SEP]")
    assert result.target_pieces == () and len(result.predictions) == 5
    assert result.prediction_pieces == result.source_pieces  # one top-k per input token
    assert ckpt.tokenizer.pieces(sorted(ckpt.tokenizer.never_written)) == ["[PAD]", "[CLS]"]  # never a target
    assert list(result.sublayers) == ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"]
    assert result.attention_label("encoder.self_attn") == "Self-attention (bidirectional)"
    assert result.positional_encoding["encoder"].shape == (5, 32) and result.positional == "learned"
    rows = result.positional_encoding["encoder"]
    assert result.first_positional_encoding is rows  # an encoder-only analysis has no decoder rows
    assert result.kv_heads == result.n_heads and result.kv_head(3) == 3  # every head its own keys and values
    assert positions_used(ckpt, "the cat sat") == 5
    masks = batch_masks(ckpt, ["the cat sat", "a dog"])
    assert not masks.causal and masks.stack == "encoder" and masks.attention[0].all()
    with pytest.raises(InputError, match="encoder"):
        generate_text(ckpt, "the cat", 4)


def test_the_llama_analysis_shows_rotations_and_continues_the_text(published) -> None:
    ckpt = load_checkpoint(published["gguf"])
    result = analyze(ckpt, "the cat", continuation=3)
    assert result.positional == "rotary" and result.generated == 3
    assert result.prediction_pieces == result.target_pieces and len(result.predictions) == len(result.target_pieces)
    assert result.positional_encoding["decoder"].shape == (len(result.target_pieces), 16)  # (T, d_head)
    assert result.sublayers["decoder.layers.1.self_attn"].weights.shape[0] == 4  # every query head
    assert result.kv_heads == 2 and [result.kv_head(h) for h in range(4)] == [0, 0, 1, 1]  # each one's key/value head


def test_the_catalog_lists_published_folders_and_files_without_reading_weights(published, monkeypatch) -> None:
    root = published["root"]
    (root / "gguf" / "tiny.gguf").rename(root / "tiny.gguf")
    try:
        monkeypatch.setattr("inference.pretrained.loaders.Files.tensors", lambda *a: pytest.fail("weights were read"))
        monkeypatch.setattr("inference.pretrained.gguf_file.read_gguf", lambda *a: pytest.fail("weights were read"))
        entries = {e.name: e for e in catalog.list_checkpoints(root, packages=False)}
        assert {name: e.kind for name, e in entries.items()} == {
            "tiny-bert": "encoder-only",
            "tiny-bert-mlm": "encoder-only",
            "tiny-llama": "decoder-only",
            "tiny": "decoder-only",
        }
        assert all(e.ok for e in entries.values())
        assert [name for name, _ in catalog.folder_stamp(root)] == [
            "gguf",
            "tiny-bert",
            "tiny-bert-mlm",
            "tiny-llama",
            "tiny.gguf",
        ]
        monkeypatch.undo()
        assert load_checkpoint(entries["tiny"].path).config.kind == "decoder-only"
    finally:
        (root / "tiny.gguf").rename(root / "gguf" / "tiny.gguf")


def test_an_unknown_model_type_is_listed_with_its_reason(tmp_path) -> None:
    (tmp_path / "gpt").mkdir()
    (tmp_path / "gpt" / "config.json").write_text(json.dumps({"model_type": "mamba"}), encoding="utf-8")
    (entry,) = catalog.list_checkpoints(tmp_path, packages=False)
    assert not entry.ok and "mamba" in entry.error
    with pytest.raises(CheckpointError, match="mamba"):
        load_checkpoint(tmp_path / "gpt")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"drop": "blk.1.ffn_up.weight"}, r"decoder\.layers\.1\.feed_forward\.w_3\.weight.*missing"),
        ({"shrink": "blk.0.attn_v.weight"}, r"v_proj|w_v"),
    ],
)
def test_a_gguf_file_that_does_not_fit_names_the_first_tensor(published, tmp_path, change, message) -> None:
    path = write_gguf(published["hf_llama"], tmp_path / "bad.gguf", **change)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_a_bert_folder_with_a_wrong_field_or_tensor_names_it(published, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "bert"
    shutil.copytree(published["bert"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"hidden_act": "relu"}))
    with pytest.raises(CheckpointError, match="hidden_act is 'relu'"):
        load_checkpoint(folder)
    (folder / "config.json").write_text(json.dumps(config))
    tensors = load_file(str(folder / "model.safetensors"))
    key = "encoder.layer.1.attention.self.key.weight"
    tensors[key] = tensors[key][:, :8].clone()
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"encoder\.layers\.1\.self_attn\.w_k\.weight.*shape \(32, 8\)"):
        load_checkpoint(folder)


def test_the_longest_input_read_keeps_one_recorded_tensor_of_every_head_small() -> None:
    assert traced_max_len(8192, 30, 9) == 256  # SmolLM2: 30 × 9 × 256² × 4 bytes = 71 MB, not 270 GB at 8192
    assert traced_max_len(512, 6, 12) == 512  # all-MiniLM-L6-v2: its own 512
    assert traced_max_len(512, 12, 12) == 256  # a BERT-base


@torch.no_grad()
def test_a_bert_read_shorter_than_its_table_keeps_the_first_rows(published, monkeypatch) -> None:
    monkeypatch.setattr("inference.pretrained.loaders.TRACE_BYTES", 4 * 2 * 4 * 8 * 8)  # 2 layers × 4 heads × 8²
    ckpt = load_checkpoint(published["bert"])
    assert ckpt.config.max_len == 8 and ckpt.card["max_len"] == 8
    table = published["hf_bert"].embeddings.position_embeddings.weight
    torch.testing.assert_close(ckpt.model.positions.table, table[:8])
    assert len(analyze(ckpt, "the cat sat on the mat the cat sat on the mat").source_pieces) == 8


def test_a_missing_reader_library_is_a_checkpoint_error_saying_what_to_install(published, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if gguf were not installed
    with pytest.raises(CheckpointError, match=r"needs the gguf package.*requirements-pretrained\.txt"):
        load_checkpoint(published["gguf"])


@torch.no_grad()
def test_a_bert_with_its_masked_lm_head_fills_a_typed_mask(published) -> None:
    ckpt = load_checkpoint(published["mlm"])
    assert ckpt.config.published.mlm_head and "masked-LM head" in ckpt.card["task"]
    result = analyze(ckpt, "the cat [MASK] on the mat", k=3)
    assert result.source_pieces[3] == "[MASK]"  # typed, it is the mask token, not "[", "mask", "]"
    ids = torch.tensor([[2, *ckpt.tokenizer.encode("the cat [MASK] on the mat"), 3]])
    expected = torch.softmax(published["hf_mlm"](ids).logits[0, 3], -1).topk(3)
    assert [p.id for p in result.predictions[3]] == expected.indices.tolist()
    # without the head [MASK] means nothing: typed, it stays text
    plain = load_checkpoint(published["bert"])
    assert "[MASK]" not in analyze(plain, "the cat [MASK]").source_pieces


def test_a_llama_config_listing_several_end_ids_ends_text_at_the_first(published, tmp_path) -> None:
    folder = tmp_path / "llama"
    shutil.copytree(published["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"eos_token_id": [2, 0]}))
    ckpt = load_checkpoint(folder)
    assert (ckpt.tokenizer.bos_id, ckpt.tokenizer.eos_id, ckpt.tokenizer.unk_id, ckpt.tokenizer.pad_id) == (1, 2, 0, 3)


def test_ablating_an_encoders_head_is_measured_over_every_position_of_cls_text_sep(published) -> None:
    from analysis.ablation import ablation_effect, head_importance
    from inference.text import encode_first_stack
    from model.attention import Ablation

    ckpt = load_checkpoint(published["bert"])
    every = tuple(range(ckpt.config.n_heads))  # all heads of both layers: a tiny random BERT barely feels one
    heads = {"encoder.layers.0.self_attn": every, "encoder.layers.1.self_attn": every}
    ids = torch.tensor([encode_first_stack(ckpt, "the cat sat", [])])  # [CLS] the cat sat [SEP]: tested above
    assert ckpt.tokenizer.pieces(ids[0].tolist()) == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    cut = {name: Ablation(hs, "zero") for name, hs in heads.items()}
    with torch.inference_mode():
        before, after = ckpt.model(ids, record=False)[0][0], ckpt.model(ids, record=False, ablate=cut)[0][0]
    p, q = torch.log_softmax(before, -1), torch.log_softmax(after, -1)
    per_position = (p.exp() * (p - q)).sum(-1)  # [CLS] the cat sat [SEP]
    effect = ablation_effect(ckpt, "the cat sat", heads)
    assert effect.kl == pytest.approx(float(per_position.mean()), rel=1e-4)
    assert effect.kl != pytest.approx(float(per_position[-1]), rel=1e-2)  # not the last position alone
    assert len(head_importance(ckpt, "the cat sat")) == 2 * ckpt.config.n_heads


def test_a_published_decoder_is_scored_as_a_language_model_per_character(published, tmp_path, monkeypatch) -> None:
    """`python -m atlas evaluate` scores a published decoder on lm-english's test split; bits per character make
    models with different tokenizers comparable. An encoder without its masked-LM head has nothing to score."""
    import math

    from inference.pretrained import packages
    from inference.score import perplexity
    from training.evaluate import evaluate, main, task_of

    lines = ["the cat sat on the mat", "a dog ran"]
    (tmp_path / "data" / "lm").mkdir(parents=True)
    (tmp_path / "data" / "lm" / "test.txt").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    ckpt = load_checkpoint(published["gguf"])
    assert task_of(ckpt) == "lm"
    metrics, samples = evaluate(ckpt, tmp_path / "data")
    ppl, acc, count = perplexity(ckpt, lines)
    assert metrics["test_characters"] == len(lines[0]) + len(lines[1]) + 2 and metrics["test_lines"] == 2
    assert metrics["perplexity"] == pytest.approx(ppl, abs=1e-3) and metrics["test_tokens"] == count
    assert metrics["bits_per_character"] == pytest.approx(math.log2(ppl) * count / metrics["test_characters"], 1e-3)
    assert metrics["command"] == f"python -m training.evaluate {published['gguf']}" and samples
    with pytest.raises(CheckpointError, match="nothing to score"):
        task_of(load_checkpoint(published["bert"]))
    assert main([str(published["bert"]), "--data", str(tmp_path / "data")]) == 2
    monkeypatch.setattr(packages, "MEASURED", tmp_path / "measured.json")
    assert main([str(published["gguf"]), "--data", str(tmp_path / "data"), "--write-card"]) == 2  # not a package
    assert not (tmp_path / "measured.json").exists()
    packages.record_metrics(packages.SMOLLM2.name, {"top1_accuracy": 0.5}, [])
    assert packages.SMOLLM2.full_card()["metrics"] == {"top1_accuracy": 0.5}
    assert packages.MINILM.full_card()["metrics"] == {}


def test_the_trace_export_of_an_encoder_and_of_a_rotary_grouped_query_decoder(published) -> None:
    """docs/trace-format.md: an encoder's tokens are [CLS] text [SEP] with a prediction at each; a rotary model's
    positional rows are (T, d_head) angles' cos | sin and kv_head_of_query_head names each query head's key/value
    head; a language model's text is its target_tokens."""
    from analysis.export import to_json_object

    encoder = analyze(load_checkpoint(published["bert"]), "the cat sat")
    obj = to_json_object(encoder)
    assert obj["kind"] == "encoder-only" and "target_tokens" not in obj
    assert obj["source_tokens"] == list(encoder.source_pieces) == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert len(obj["predictions"]) == 5 and obj["positional"] == "learned"
    assert obj["kv_head_of_query_head"] == list(range(encoder.n_heads))
    assert np.array(obj["positional_encoding"]).shape == (5, 32)
    assert {e["name"] for e in obj["attention"]} == {"encoder.layers.0.self_attn", "encoder.layers.1.self_attn"}
    decoder = analyze(load_checkpoint(published["gguf"]), "the cat")
    obj = to_json_object(decoder)
    assert obj["target_tokens"] == list(decoder.target_pieces) and "source_tokens" not in obj
    assert obj["positional"] == "rotary"
    assert obj["kv_head_of_query_head"] == [0, 0, 1, 1] and np.array(obj["positional_encoding"]).shape == (
        len(decoder.target_pieces),
        16,
    )


def test_loading_a_published_model_draws_no_random_weights_and_restores_init(published) -> None:
    """fill_model overwrites every parameter, so the model is built without drawing its random initial weights
    (1.5 s of SmolLM2's cold start); torch.nn.init is itself again afterwards."""
    before, uniform = torch.get_rng_state(), torch.nn.init.uniform_
    ckpt = load_checkpoint(published["gguf"])
    assert torch.equal(torch.get_rng_state(), before), "no random number was drawn"
    assert torch.nn.init.uniform_ is uniform
    assert all(torch.isfinite(p).all() for p in ckpt.model.parameters())
    weights = torch.empty(3, 4)
    torch.nn.init.uniform_(weights, 5.0, 6.0)
    assert (weights >= 5.0).all()


# Our GGUF container reader against gguf's GGUFReader (imports here, beside the tests that use them).
import re  # noqa: E402

from inference.pretrained.gguf_file import GGUFContainer, read_container, read_gguf  # noqa: E402
from inference.pretrained.mapping import MappingError  # noqa: E402


def same_as_gguf_reader(
    path: Path, dequantised: set[str] | None = None, skip: frozenset[str] = frozenset()
) -> GGUFContainer:
    """Our container reader gives what gguf's GGUFReader gives: every key's value (its types too), every tensor's
    name, type, shape and bytes, and bitwise the same dequantised values (for `dequantised`, or for all)."""
    ours, theirs = read_container(path), gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in theirs.fields.items() if not k.startswith("GGUF.") and k not in skip}
    assert [k for k in ours.fields if k not in skip] == list(fields)
    for key, value in fields.items():
        assert repr(ours.fields[key]) == repr(value), key  # repr: 1 and True, 1 and 1.0 differ
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, t in zip(ours.tensors, theirs.tensors, strict=True):
        assert mine.tensor_type == t.tensor_type and mine.shape == tuple(reversed(t.shape.tolist())), t.name
        assert mine.data.dtype == t.data.dtype and mine.data.shape == t.data.shape, t.name
        assert mine.data.tobytes() == t.data.tobytes(), t.name
        if (dequantised is None or t.name in dequantised) and t.tensor_type.name not in {"I8", "I16", "I32", "I64"}:
            a, b = gguf.quants.dequantize(mine.data, mine.tensor_type), gguf.quants.dequantize(t.data, t.tensor_type)
            assert a.dtype == b.dtype == np.float32 and a.shape == b.shape and a.tobytes() == b.tobytes(), t.name
    return ours


def test_our_gguf_reader_gives_gguf_readers_metadata_and_tensors(published) -> None:
    ours = same_as_gguf_reader(published["gguf"])
    assert ours.fields["tokenizer.ggml.tokens"] == bpe_tokens()
    assert {t.tensor_type.name for t in ours.tensors} == {"F32", "Q8_0"}


def test_our_gguf_reader_reads_every_value_type_and_a_custom_alignment_as_gguf_reader_does(tmp_path) -> None:
    path = tmp_path / "types.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    scalars = {"uint8": 7, "int8": -7, "uint16": 700, "int16": -700, "uint32": 70000, "int32": -70000}
    scalars |= {"uint64": 2**40, "int64": -(2**40), "float32": 0.1, "float64": 0.1, "bool": True, "string": "héllo ✓"}
    for kind, value in scalars.items():
        getattr(writer, f"add_{kind}")(f"test.{kind}", value)
    writer.add_array("test.floats", [0.5, 1.5])
    writer.add_array("test.bools", [True, False])
    writer.add_array("test.strings", ["", "ü", "a b"])
    writer.add_array("test.nested", [[1, 2], [3]])
    rows = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    writer.add_tensor(
        "q4_1", gguf.quants.quantize(rows, gguf.GGMLQuantizationType.Q4_1), raw_dtype=gguf.GGMLQuantizationType.Q4_1
    )
    writer.add_tensor("f16", np.arange(6, dtype=np.float16).reshape(2, 3))
    writer.add_tensor("i32", np.arange(5, dtype=np.int32))
    writer.add_tensor("f32", rows[:, :3])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours = same_as_gguf_reader(path, skip=frozenset({"test.nested"}))  # GGUFReader flattens an array of arrays
    assert ours.fields["test.nested"] == [[1, 2], [3]]
    assert ours.fields["general.alignment"] == 64 and ours.fields["test.string"] == "héllo ✓"
    assert [t.tensor_type.name for t in ours.tensors] == ["Q4_1", "F16", "I32", "F32"]


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_our_gguf_reader_reads_smollm2s_file_as_gguf_reader_does() -> None:
    from inference.pretrained.packages import SMOLLM2

    path = SMOLLM2.path()
    if path is None:
        pytest.skip("SmolLM2's package is not installed")
    some = {"token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "output_norm.weight"}
    ours = same_as_gguf_reader(path, dequantised=some)
    assert {t.name: t.tensor_type.name for t in ours.tensors if t.name in some}["blk.0.attn_q.weight"] == "Q4_1"
    assert len(ours.fields["tokenizer.ggml.tokens"]) == 49152


def gguf_cut(published: dict[str, Path], section: str) -> int:
    """Where to cut the tiny GGUF file to end it inside `section` (offsets from GGUFReader)."""
    theirs = gguf.GGUFReader(published["gguf"])
    return {
        "header": 20,  # inside the tensor and key counts
        "metadata": theirs.fields["tokenizer.ggml.tokens"].offset + 60,  # inside the first token
        "tensor infos": theirs.tensors[1].field.offset + 3,
        "tensor data": theirs.tensors[-1].data_offset + 1,
    }[section]


@pytest.mark.parametrize("section", ["header", "metadata", "tensor infos", "tensor data"])
def test_a_gguf_file_cut_short_is_unreadable_and_says_where_it_ends(published, tmp_path, section) -> None:
    cut = gguf_cut(published, section)
    path = tmp_path / "cut.gguf"
    path.write_bytes(published["gguf"].read_bytes()[:cut])
    message = rf"{re.escape(str(path))}: not a readable GGUF file \(it ends at byte {cut}, inside its {section}\)"
    with pytest.raises(MappingError, match=message):
        read_gguf(path)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda whole: b"GGUX" + whole[4:], "starts with b'GGUX', not GGUF's magic"),
        (lambda whole: b"", "the file is empty"),
        (lambda whole: whole[:4] + (3).to_bytes(4, "big") + whole[8:], "big-endian"),
        (lambda whole: whole[:4] + (1).to_bytes(4, "little") + whole[8:], "GGUF version 1"),
    ],
)
def test_a_file_that_is_not_little_endian_gguf_2_or_3_names_itself_and_why(published, tmp_path, change, reason) -> None:
    path = tmp_path / "foreign.gguf"
    path.write_bytes(change(published["gguf"].read_bytes()))
    with pytest.raises(
        MappingError, match=rf"{re.escape(str(path))}: not a readable GGUF file \(.*{re.escape(reason)}"
    ):
        read_gguf(path)


def test_read_gguf_keeps_no_view_of_the_mapped_file(published, tmp_path) -> None:
    """The F32 tensors are read-only views of the mapped file until copied: once read, the file is unmapped."""
    import gc

    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("no /proc/self/maps to list this process's mapped files")
    path = tmp_path / "own.gguf"
    shutil.copy(published["gguf"], path)
    tensors = read_gguf(path).tensors
    gc.collect()
    assert str(path) not in maps.read_text()
    assert "model.norm.weight" in tensors  # an F32 tensor, still here

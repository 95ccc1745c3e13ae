"""A GPT-2 checkpoint brought as a folder: tiny, random and seeded GPT-2s saved by `transformers` itself
(`GPT2LMHeadModel` with a tokenizer.json; its `GPT2Model` body with vocab.json + merges.txt), loaded onto our model.
Logits and every head's weights equal transformers' (eager attention); the catalog lists the folders; a folder
that does not fit names the first field or tensor that differs; every page of the app draws the model, Explore
with its heads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_pretrained_pages import PAGES  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers.activations import ACT2FN  # noqa: E402

from analysis.analyze import Request, analyze, analyze_many  # noqa: E402
from inference import catalog  # noqa: E402
from inference.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from inference.pretrained.mapping import NEVER  # noqa: E402
from model.components.feed_forward import GELUFeedForward  # noqa: E402
from model.config import ConfigError, ModelConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOL = {"atol": 1e-4, "rtol": 1e-4}
END = "<|endoftext|>"
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a"), ("ca", "t"), ("4", "2"), ("Ġ", "s"), ("a", "t")]
TEXTS = ["the cat sat on the mat", " the cat 42", "catcat 4242!", "ünïcödé ✓", "a\n\nb  c\t", "  two  spaces"]


def bpe_tokens() -> list[str]:
    """GPT-2's vocabulary in miniature: the 256 byte symbols, the merges' results, then <|endoftext|> last."""
    return sorted(pre_tokenizers.ByteLevel.alphabet()) + ["".join(pair) for pair in MERGES] + [END]


def gpt2_tokenizer() -> Tokenizer:
    """Byte-level BPE as GPT-2's tokenizer.json has it: no digit splitting, <|endoftext|> its one special token."""
    tokens = bpe_tokens()
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, MERGES))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(END, special=True, normalized=False)])
    return tok


VOCAB = len(bpe_tokens())
END_ID = VOCAB - 1


def tiny_gpt2(**extra) -> transformers.GPT2LMHeadModel:
    """2 layers × 4 heads, n_embd 32; LayerNorms and biases nudged off their (1, 0) start so that a mapping that
    drops or misplaces one shows."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=40,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=END_ID,
        eos_token_id=END_ID,
        attn_implementation="eager",
        **extra,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".ln_" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.2)
    return model


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """root/gpt2-lm: GPT2LMHeadModel + tokenizer.json; root/gpt2-body: the same weights saved as GPT2Model (no
    "transformer." prefix, no lm_head) with vocab.json + merges.txt, GPT-2's first tokenizer layout."""
    root = tmp_path_factory.mktemp("byo")
    reference = tiny_gpt2()
    reference.save_pretrained(root / "gpt2-lm", safe_serialization=True)
    gpt2_tokenizer().save(str(root / "gpt2-lm" / "tokenizer.json"))
    reference.transformer.save_pretrained(root / "gpt2-body", safe_serialization=True)
    gpt2_tokenizer().model.save(str(root / "gpt2-body"))  # vocab.json, merges.txt
    return {"root": root, "lm": root / "gpt2-lm", "body": root / "gpt2-body", "reference": reference}


def prefixed(ckpt, text: str) -> torch.Tensor:
    return torch.tensor([[ckpt.config.bos_id, *ckpt.tokenizer.encode(text)]])


@torch.no_grad()
def test_a_gpt2_folders_logits_and_every_heads_weights_equal_transformers(published) -> None:
    ckpt = load_checkpoint(published["lm"])
    config = ckpt.config
    assert config.kind == "decoder-only" and config.norm == "pre" and not config.published.embed_scale
    assert (config.positional, config.published.activation, config.tie_embeddings) == ("learned", "gelu_tanh", True)
    ids = prefixed(ckpt, "the cat sat on the mat")
    logits, trace = ckpt.model(ids)
    expected = published["reference"](ids, output_attentions=True)
    torch.testing.assert_close(logits[..., :VOCAB], expected.logits, **TOL)
    names = ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]
    assert list(trace.attention) == names
    for name, weights in zip(names, expected.attentions, strict=True):
        assert trace.attention[name].weights.shape == (1, 4, ids.shape[1], ids.shape[1])
        torch.testing.assert_close(trace.attention[name].weights, weights, **TOL)


@torch.no_grad()
def test_the_pad_and_unk_gpt2_lacks_are_appended_and_never_predicted(published) -> None:
    ckpt = load_checkpoint(published["lm"])
    tok, config = ckpt.tokenizer, ckpt.config
    assert tok.bos_id == tok.eos_id == END_ID  # <|endoftext|> starts and ends a text
    assert (tok.pad_id, tok.unk_id, config.vocab_size) == (VOCAB, VOCAB + 1, VOCAB + 2)
    assert tok.pieces([tok.pad_id, tok.unk_id]) == ["<|pad|>", "<|unk|>"]
    for typed in (END, "<|pad|>", "<|unk|>"):  # typed, a special is text: never an id the model treats apart
        assert not {tok.pad_id, tok.unk_id, tok.bos_id} & set(tok.encode(typed)), typed
    logits, _ = ckpt.model(prefixed(ckpt, "the cat"))
    assert torch.equal(logits[..., VOCAB:], torch.full_like(logits[..., VOCAB:], NEVER))
    assert torch.softmax(logits, -1)[..., VOCAB:].max() == 0.0
    assert torch.isfinite(torch.log_softmax(logits, -1)).all()  # 0 · log 0 in an entropy stays 0, not NaN


@torch.no_grad()
def test_gelu_tanh_is_gpt2s_gelu_new_not_the_exact_gelu() -> None:
    # a tiny random GPT-2 barely feels the difference (at most 5e-4 per unit, before small weights): checked here
    feed_forward = GELUFeedForward(8, 8, 0.0, approximate="tanh").eval()
    for linear in (feed_forward.w_1, feed_forward.w_2):  # FFN(x) = act(x)
        linear.weight.copy_(torch.eye(8))
        linear.bias.zero_()
    x = torch.linspace(-6, 6, 96).reshape(12, 8)
    torch.testing.assert_close(feed_forward(x), ACT2FN["gelu_new"](x), atol=1e-6, rtol=1e-6)
    assert (feed_forward(x) - torch.nn.functional.gelu(x)).abs().max() > 1e-4


def test_bos_may_be_eos_but_pad_and_unk_are_nobody_elses() -> None:
    fields = {"kind": "decoder-only", "vocab_size": 10, "d_model": 8, "n_heads": 2, "n_encoder_layers": 0}
    assert ModelConfig(**fields, pad_id=8, unk_id=9, bos_id=7, eos_id=7).bos_id == 7
    with pytest.raises(ConfigError, match="pad and unk"):
        ModelConfig(**fields, pad_id=7, unk_id=9, bos_id=7, eos_id=6)
    with pytest.raises(ConfigError, match="pad and unk"):
        ModelConfig(**fields, pad_id=8, unk_id=6, bos_id=7, eos_id=6)


@torch.no_grad()
def test_a_gpt2model_body_with_vocab_and_merges_loads_the_same_model(published) -> None:
    names = set(load_file(str(published["body"] / "model.safetensors")))
    assert "wte.weight" in names and not any(n.startswith(("transformer.", "lm_head")) for n in names)
    lm, body = load_checkpoint(published["lm"]), load_checkpoint(published["body"])
    for text in [*TEXTS, f"{END} typed"]:
        assert body.tokenizer.encode(text) == lm.tokenizer.encode(text), text
    ids = prefixed(lm, "the cat sat on the mat")
    torch.testing.assert_close(body.model(ids)[0], lm.model(ids)[0], atol=0, rtol=0)


@torch.no_grad()
def test_an_older_save_with_mask_buffers_and_a_tied_head_copy_loads_the_same(published, tmp_path) -> None:
    def older(state: dict) -> None:  # what older saves hold: the causal mask, its fill value, lm_head again
        for layer in range(2):
            state[f"transformer.h.{layer}.attn.bias"] = torch.ones(1, 1, 40, 40).tril().bool()
            state[f"transformer.h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
        state["lm_head.weight"] = state["transformer.wte.weight"].clone()

    ckpt, lm = load_checkpoint(damaged(published, tmp_path, tensors=older)), load_checkpoint(published["lm"])
    ids = prefixed(lm, "the cat sat on the mat")
    torch.testing.assert_close(ckpt.model(ids)[0], lm.model(ids)[0], atol=0, rtol=0)


@torch.no_grad()
def test_an_untied_gpt2_keeps_its_own_output_weights(tmp_path) -> None:
    reference = tiny_gpt2(tie_word_embeddings=False)
    reference.lm_head.weight.normal_(0.0, 0.05)
    reference.save_pretrained(tmp_path / "gpt2", safe_serialization=True)
    gpt2_tokenizer().save(str(tmp_path / "gpt2" / "tokenizer.json"))
    ckpt = load_checkpoint(tmp_path / "gpt2")
    assert not ckpt.config.tie_embeddings
    ids = prefixed(ckpt, "the cat sat")
    logits, _ = ckpt.model(ids)
    torch.testing.assert_close(logits[..., :VOCAB], reference(ids).logits, **TOL)
    assert logits[..., VOCAB:].max() == NEVER


def test_vocab_and_merges_tokenize_as_transformers_gpt2_tokenizer(published) -> None:
    folder = published["body"]
    reference = transformers.GPT2Tokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))
    tok = load_checkpoint(folder).tokenizer
    for text in TEXTS:  # not a typed <|endoftext|>: GPT2Tokenizer makes it the special token, ours reads it as text
        assert tok.encode(text) == reference.encode(text), text
        assert tok.decode(tok.encode(text)) == text
    assert tok.pieces(tok.encode(" the cat 42")) == ["Ġthe", "Ġ", "cat", "Ġ", "42"]  # digits not split one by one


@torch.no_grad()
def test_reorder_and_upcast_attn_computes_the_same_and_is_accepted(published, tmp_path) -> None:
    reference = tiny_gpt2(reorder_and_upcast_attn=True)
    reference.save_pretrained(tmp_path / "gpt2", safe_serialization=True)
    gpt2_tokenizer().save(str(tmp_path / "gpt2" / "tokenizer.json"))
    ckpt = load_checkpoint(tmp_path / "gpt2")
    ids = prefixed(ckpt, "the cat sat")
    expected = reference(ids, output_attentions=True)
    logits, trace = ckpt.model(ids)
    torch.testing.assert_close(logits[..., :VOCAB], expected.logits, **TOL)
    torch.testing.assert_close(trace.attention["decoder.layers.1.self_attn"].weights, expected.attentions[1], **TOL)


def test_each_text_of_a_batch_is_analysed_as_alone(published) -> None:
    # a batch pads the shorter text with the appended pad: masked, it changes nothing
    ckpt = load_checkpoint(published["lm"])
    texts = ["the cat sat on the mat", "a cat"]
    together = analyze_many(ckpt, [Request(t) for t in texts])
    for text, result in zip(texts, together, strict=True):
        alone = analyze(ckpt, text)
        assert result.target_pieces == alone.target_pieces and result.target_pieces[0] == END
        for name, sublayer in alone.sublayers.items():
            torch.testing.assert_close(
                torch.as_tensor(result.sublayers[name].weights), torch.as_tensor(sublayer.weights)
            )
    written = analyze(ckpt, "the cat", continuation=3)
    assert 0 <= written.generated <= 3 and written.positional == "learned"


def test_the_catalog_lists_gpt2_folders_as_language_models(published, monkeypatch) -> None:
    monkeypatch.setattr("inference.pretrained.loaders.Files.tensors", lambda *a: pytest.fail("weights were read"))
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(published["root"]))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    entries = {e.name: e for e in catalog.list_checkpoints()}
    assert {name: (e.kind, e.ok) for name, e in entries.items()} == {
        "gpt2-body": ("decoder-only", True),
        "gpt2-lm": ("decoder-only", True),
    }
    assert catalog.preset_family("gpt2-lm", entries["gpt2-lm"].kind, entries["gpt2-lm"].card) == "lm"


def damaged(published, tmp_path: Path, config: dict | None = None, tensors=None) -> Path:
    """A copy of the gpt2-lm folder with config.json fields replaced and/or `tensors(state)` applied."""
    folder = tmp_path / "gpt2"
    shutil.copytree(published["lm"], folder)
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(raw | (config or {})))
    if tensors is not None:
        state = load_file(str(folder / "model.safetensors"))
        tensors(state)
        save_file(state, str(folder / "model.safetensors"))
    return folder


def _replace(name: str, change):
    return lambda state: state.update({name: change(state[name]).contiguous()})


C_ATTN, C_FC, C_PROJ = (
    "transformer.h.0.attn.c_attn.weight",
    "transformer.h.1.mlp.c_fc.weight",
    "transformer.h.1.mlp.c_proj.bias",
)
CROSS = "transformer.h.0.crossattention.q_attn.weight"
# what is done to the saved tensors → what the error must name (ours: the module the tensor would fill)
TENSOR_DAMAGE = {
    "a-bias-removed": (lambda s: s.pop(C_PROJ), r"decoder\.layers\.1\.feed_forward\.w_2\.bias.*missing"),
    "the-final-norm-removed": (lambda s: s.pop("transformer.ln_f.weight"), r"decoder\.norm\.weight.*missing"),
    "queries-keys-values-narrowed": (_replace(C_ATTN, lambda w: w[:, :48]), r"w_q\.weight.*shape \(16, 32\)"),
    "saved-as-linear-not-conv1d": (_replace(C_FC, lambda w: w.T), r"w_1\.weight.*shape \(32, 128\)"),
    "a-tensor-of-another-layout": (lambda s: s.update({CROSS: s[C_ATTN].clone()}), "crossattention"),
}
CONFIG_DAMAGE = {
    "scores-scaled-by-layer": ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx is True"),
    "scores-unscaled": ({"scale_attn_weights": False}, "scale_attn_weights is False"),
    "another-activation": ({"activation_function": "swish"}, "activation_function is 'swish'"),
    "cross-attention": ({"add_cross_attention": True}, "add_cross_attention is True"),
    "a-context-not-a-number": ({"n_positions": "forty"}, "n_positions must be an integer"),
    "heads-not-dividing-the-width": ({"n_head": 5}, r"d_model \(32\) must be divisible by n_heads \(5\)"),
}


@pytest.mark.parametrize("case", TENSOR_DAMAGE)
def test_a_gpt2_folder_with_a_tensor_that_does_not_fit_names_it(published, tmp_path, case) -> None:
    change, message = TENSOR_DAMAGE[case]
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(damaged(published, tmp_path, tensors=change))


@pytest.mark.parametrize("case", CONFIG_DAMAGE)
def test_a_gpt2_folder_with_a_field_that_does_not_fit_names_it(published, tmp_path, case) -> None:
    fields, message = CONFIG_DAMAGE[case]
    folder = damaged(published, tmp_path, config=fields)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(folder)
    assert catalog.list_checkpoints(tmp_path, packages=False)[0].ok  # listed all the same: loading says why


def test_a_gpt2_folder_without_a_tokenizer_says_which_files_it_needs(published, tmp_path) -> None:
    folder = damaged(published, tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match=r"tokenizer\.json, or vocab\.json and merges\.txt"):
        load_checkpoint(folder)


def gpt2_app(published, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The app run once on the gpt2-lm folder, listed from a root of its own (no packages)."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(published["root"]))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"model": "gpt2-lm", "text": "the cat sat on the mat"})
    return at.run()


def problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


@pytest.mark.slow
def test_explore_draws_every_head_of_a_gpt2_folder(published, monkeypatch) -> None:
    at = gpt2_app(published, monkeypatch)
    assert not problems(at), problems(at)
    assert at.title[0].value == "Explore" and at.selectbox(key="model").value == "gpt2-lm"
    assert at.selectbox(key="layer").options == ["layer 1", "layer 2"]
    assert at.selectbox(key="head").options == ["head 1", "head 2", "head 3", "head 4", "average"]
    charts = {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    ticks = charts["head_chart"]["layout"]["yaxis"]["ticktext"]
    pieces = load_checkpoint(published["lm"]).tokenizer.encode("the cat sat on the mat")
    assert len(ticks) == 1 + len(pieces) and ticks[0] == "1:&lt;|endoftext|&gt;"  # bos, then the text


@pytest.mark.slow
def test_every_page_draws_a_gpt2_folder_without_error(published, monkeypatch) -> None:
    at = gpt2_app(published, monkeypatch)
    failed = {}
    for page in PAGES:
        at.switch_page(page).run()
        failed |= {page: problems(at)} if problems(at) else {}
    assert not failed, failed

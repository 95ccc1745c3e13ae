"""Forking the decoding (analysis.fork, atlas.fork): a fork at choice 1 is greedy decoding itself (the tokens of
`generate`, the logits of a teacher-forced pass over its output) on every shipped decoder checkpoint and a tiny
pre-norm model; a fork at choice 2 shares the prefix, writes the runner-up at the fork step and then goes on
greedily from its own cache; it is deterministic; its attention rows are the model's own; bad steps and choices are
one-line errors; the notebook API counts steps from 1 and says which is which."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import atlas
from analysis.fork import fork
from inference.checkpoint import load_checkpoint
from inference.decoding import generate
from inference.text import encode_prefix, encode_source
from model.config import ModelConfig
from model.factory import build_model
from model.forward import forward
from viz.fork import fork_frame, fork_shown

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {p.name: p / "config.json" for p in (ROOT / "checkpoints").iterdir() if (p / "config.json").is_file()}
DECODERS = sorted(name for name, config in CONFIGS.items() if '"encoder-only"' not in config.read_text())
NEVER = frozenset({0, 2})


def pieces(ids: list[int]) -> list[str]:
    return [str(i) for i in ids]


def prompt_of(ckpt, text: str) -> tuple[list[int], torch.Tensor | None]:
    if ckpt.config.has_cross_attention:
        return [ckpt.config.bos_id], torch.tensor([encode_source(ckpt, text, [])])
    return encode_prefix(ckpt, text, []), None


def is_greedy(model, prompt, source, found, max_tokens) -> None:
    plain = generate(model, prompt, source, max_tokens=max_tokens)
    written = list(found.shared + found.greedy.ids)
    assert written == plain.ids and found.greedy.finished == plain.finished
    fed = torch.tensor([prompt + written])
    logits = forward(model, fed, source, record=False)[0][0].detach()  # (T, vocab): the teacher-forced pass
    first = len(prompt) - 1 + found.step
    expected = logits[first : first + len(found.greedy.logits)].numpy()
    np.testing.assert_allclose(found.greedy.logits, expected, atol=1e-4)
    assert found.greedy.ids == found.forked.ids  # choice 1 forks into two equal branches
    np.testing.assert_array_equal(found.greedy.logits, found.forked.logits)


@pytest.mark.parametrize("name", DECODERS)
def test_a_fork_at_choice_one_is_greedy_decoding_on_every_shipped_decoder(name: str) -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / name)
    prompt, source = prompt_of(ckpt, "Where is the station because the cat")
    for step in (0, 2):
        found = fork(ckpt.model, prompt, source, step, 1, 8, ckpt.tokenizer.pieces, ckpt.tokenizer.never_written)
        is_greedy(ckpt.model, prompt, source, found, 8)


def tiny_pre_norm() -> torch.nn.Module:
    torch.manual_seed(3)
    config = ModelConfig(kind="decoder-only", vocab_size=40, d_model=32, n_heads=4, d_ff=48, max_len=40, norm="pre")
    config = ModelConfig(**{**config.to_dict(), "n_encoder_layers": 0, "n_decoder_layers": 2})
    return build_model(config).double().eval()


def test_a_fork_at_choice_one_is_greedy_decoding_on_a_tiny_pre_norm_model_in_float64() -> None:
    model = tiny_pre_norm()
    prompt = [2, 7, 9, 11, 5]
    found = fork(model, prompt, None, 3, 1, 12, pieces, NEVER)
    is_greedy(model, prompt, None, found, 12)
    fed = torch.tensor([prompt + list(found.shared + found.greedy.ids)])
    logits = forward(model, fed, None)[0][0].detach()
    first = len(prompt) - 1 + found.step
    np.testing.assert_allclose(found.greedy.logits, logits[first : first + len(found.greedy.logits)], atol=1e-10)


def test_a_fork_writes_the_runner_up_then_goes_on_greedily_from_its_own_cache() -> None:
    model = tiny_pre_norm()
    prompt = [2, 7, 9, 11, 5]
    found = fork(model, prompt, None, 2, 2, 10, pieces, NEVER)
    assert found.shared == tuple(generate(model, prompt, max_tokens=2).ids)
    fork_logits = torch.tensor(found.greedy.logits[0])
    ranked = [t for t in fork_logits.argsort(descending=True).tolist() if t not in NEVER]
    assert found.greedy.ids[0] == ranked[0] and found.forked.ids[0] == ranked[1]
    np.testing.assert_array_equal(found.greedy.logits[0], found.forked.logits[0])  # one step, one distribution
    branch_prompt = prompt + list(found.shared) + [found.forked.ids[0]]
    rest = generate(model, branch_prompt, max_tokens=len(found.forked.ids) - 1)
    assert list(found.forked.ids[1:]) == rest.ids  # greedy after the fork, as a fresh decoding from there
    assert found.forked.probs[0] == pytest.approx(float(torch.softmax(fork_logits, -1)[found.forked.ids[0]]))
    again = fork(model, prompt, None, 2, 2, 10, pieces, NEVER)
    assert again.forked.ids == found.forked.ids and np.array_equal(again.forked.logits, found.forked.logits)


def test_each_steps_attention_row_is_the_models_own() -> None:
    model = tiny_pre_norm()
    prompt = [2, 7, 9, 11, 5]
    found = fork(model, prompt, None, 1, 2, 6, pieces, NEVER)
    fed = torch.tensor([prompt + list(found.shared + found.forked.ids)])
    _, trace = forward(model, fed, None)
    for s, rows in enumerate(found.forked.attention):
        query = len(prompt) - 1 + found.step + s
        for name, row in rows.items():
            expected = trace.attention[name].weights[0, :, query, : query + 1].detach().numpy()
            np.testing.assert_allclose(row, expected, atol=1e-6)


def test_a_step_or_choice_out_of_range_is_a_one_line_error() -> None:
    model = tiny_pre_norm()
    with pytest.raises(ValueError, match="step 11 is past the 10 tokens written here: fork at step 1 to 10"):
        fork(model, [2, 7], None, 10, 2, 10, pieces, NEVER)
    with pytest.raises(ValueError, match="choose one of the 5 likeliest candidates, not the 6th"):
        fork(model, [2, 7], None, 0, 6, 10, pieces, NEVER)


def test_the_notebook_fork_counts_steps_from_one_and_names_both_branches() -> None:
    lm = atlas.load("lm-english")
    found = atlas.fork(lm, "The cat sat on the mat because it", step=2, choice=2, max_tokens=5)
    assert list(found.table.columns) == ["step", "likeliest", "p (likeliest)", "forked", "p (forked)"]
    assert found.table["step"].tolist() == [2, 3, 4, 5]
    assert found.greedy_text.startswith(found.shared) and found.forked_text.startswith(found.shared)
    assert found.greedy.ids[0] != found.forked.ids[0]
    plain = atlas.fork(lm, "The cat sat on the mat because it", step=1, choice=1, max_tokens=5)
    assert plain.greedy_text == plain.forked_text
    with pytest.raises(ValueError, match="step must be a whole number from 1, not 0"):
        atlas.fork(lm, "The cat", step=0)
    with pytest.raises(ValueError, match="is an encoder and writes nothing"):
        atlas.fork(atlas.load("fivegram-1L-1H"), "the old man ___ to the", step=1)


def test_the_pages_fork_table_leaves_the_steps_after_a_branch_ended_blank() -> None:
    table = fork_frame(3, ["▁a", "▁b"], np.array([0.5, 0.25]), ["▁c", "▁d", "▁e", "▁f"], np.array([0.1, 0.2, 0.3, 0.4]))
    assert table["likeliest"].isna().tolist() == [False, False, False, True]  # the data keeps its missing values
    shown = fork_shown(table)
    assert shown.iloc[2].tolist() == [5, "(end of text)", "", "▁e", "0.300"]
    assert shown.iloc[3].tolist() == [6, "", "", "▁f", "0.400"]  # blank, not "None" or "nan"

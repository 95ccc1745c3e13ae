"""Top-k without sorting the vocabulary: equal to a stable descending sort of the whole row, ties in order of id;
special pieces a model is never asked to write are not offered."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from analysis.analyze import analyze
from inference.checkpoint import load_checkpoint
from inference.decoding import _top_stable, top_k
from inference.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parent.parent


def whole_sort(probs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    values, ids = torch.sort(probs, dim=-1, descending=True, stable=True)
    return values[..., :k], ids[..., :k]


def test_top_k_equals_a_stable_sort_of_the_whole_row_even_with_ties() -> None:
    gen = torch.Generator().manual_seed(0)
    for levels in (3, 10, 1000, None):  # few distinct values: ties everywhere, and ties past the candidates
        probs = torch.rand(64, 300, generator=gen)
        if levels is not None:
            probs = (probs * levels).floor() / levels
        for k in (1, 5, 20):
            values, ids = _top_stable(probs, k)
            want_values, want_ids = whole_sort(probs, k)
            assert torch.equal(values, want_values) and torch.equal(ids, want_ids), (levels, k)


def test_a_row_shorter_than_the_candidates_is_sorted_whole() -> None:
    probs = torch.tensor([[0.1, 0.3, 0.3, 0.2, 0.1]])
    values, ids = _top_stable(probs, 5)
    assert ids.tolist() == [[1, 2, 3, 0, 4]] and values.tolist()[0][0] == 0.30000001192092896


def test_ids_a_model_never_writes_are_left_out_and_the_probabilities_stay_its_own() -> None:
    logits = torch.tensor([[5.0, 4.0, 1.0, 3.0, 0.0, 2.0]])
    shown = top_k(logits, 4, lambda ids: [f"p{i}" for i in ids], never=frozenset({0, 1}))[0]
    assert [p.id for p in shown] == [3, 5, 2, 4]
    whole = torch.softmax(logits, dim=-1)[0]
    assert [p.prob for p in shown] == pytest.approx([float(whole[i]) for i in (3, 5, 2, 4)])
    assert len(top_k(logits, 10, lambda ids: [""] * len(ids), never=frozenset({0}))[0]) == 5


@pytest.mark.parametrize("name", ["translate-en-de", "lm-english"])
def test_shipped_tokenizers_never_offer_pad_start_or_unk_but_do_offer_the_end(name: str) -> None:
    tok = Tokenizer.from_file(ROOT / "checkpoints" / name / "tokenizer.model")
    assert tok.never_written == {tok.pad_id, tok.bos_id, tok.unk_id}  # byte fallback: <unk> is never needed
    assert tok.eos_id not in tok.never_written


def test_the_translator_lists_no_special_piece_among_its_predictions() -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "translate-en-de")
    text = "The cat sat on the mat."
    analysis = analyze(ckpt, text, k=ckpt.tokenizer.vocab_size)  # the whole vocabulary, ranked
    specials = {"<pad>", "<s>", "<unk>"}
    assert not any(p.piece in specials for top in analysis.predictions for p in top)
    assert all(len(top) == ckpt.tokenizer.vocab_size - 3 for top in analysis.predictions)


def test_a_cut_note_says_why_the_tokens_kept_are_fewer_than_max_len() -> None:
    from inference.text import encode_prefix

    ckpt = load_checkpoint(ROOT / "checkpoints" / "lm-english")
    notes: list[str] = []
    ids = encode_prefix(ckpt, "the cat sat on the mat " * 100, notes)
    assert len(ids) == 256 and notes == [
        f"The text was cut from {len(ckpt.tokenizer.encode('the cat sat on the mat ' * 100))} to 255 tokens: with "
        "the start token that fills the model's 256 positions (its max_len)."
    ]


def test_beam_search_keeps_by_summed_log_probability_and_picks_the_finished_one_best_per_token(monkeypatch) -> None:
    """Scripted log-probabilities (bos 1, eos 2, A 3, C 4): ending at once scores -1.0 in all (-1.0 per token);
    A A A then eos scores -1.7 in all (-0.425 per token). The search keeps hypotheses by their sums, the finished
    ones compete per token: the longer output wins, and would lose to the sum."""
    from types import SimpleNamespace

    import torch

    import inference.decoding as decoding

    bos, eos, a, c = 1, 2, 3, 4

    def row(fed: list[int]) -> list[float]:
        lp = [-50.0] * 6
        if c in fed:
            lp[c], lp[a] = -3.0, -4.0
        elif fed == [bos]:
            lp[a], lp[eos] = -0.4, -1.0
        elif fed.count(a) < 3:
            lp[a], lp[c] = -0.4, -3.0
        else:
            lp[eos], lp[c] = -0.5, -3.0
        return lp

    def scripted(model, source_ids, fed, past, cache, ablate):
        return torch.tensor([row(r) for r in fed.tolist()]), None

    monkeypatch.setattr(decoding, "next_log_probs", scripted)
    model = SimpleNamespace(config=SimpleNamespace(eos_id=eos, max_len=20))
    out = decoding.generate(model, [bos], None, max_tokens=10, beam=2)
    assert out.ids == [a, a, a] and out.finished
    assert decoding.generate(model, [bos], None, max_tokens=10, beam=1).ids == [a, a, a]  # greedy: the same path

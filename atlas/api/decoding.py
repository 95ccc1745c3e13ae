"""What the model writes: a reference forced through its decoder (`forced`), and greedy decoding forked at one step
(`fork`).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import pandas as pd

from analysis import seq2seq_tools
from analysis.forced import forced as _forced
from analysis.fork import Branch, source_of
from analysis.fork import fork as _fork
from analysis.seq2seq import Seq2SeqError, is_seq2seq
from atlas.api.arguments import checkpoint_of, library_on_cpu
from inference.checkpoint import Checkpoint
from inference.text import InputError, clean_text, encode_prefix
from viz.forced import forced_frame
from viz.fork import fork_frame


def forced(
    model: Checkpoint | object, text: str, reference: str, *, tokenizer: object | None = None, device: str = "cpu"
) -> pd.DataFrame:
    """Forced decoding, the Explore page's reference table: `reference` (a translator's reference translation of
    `text`, a language model's continuation of it) fed to the decoder token by token, and for each token (from 1)
    the probability the model gave it, its rank among the whole vocabulary (1: the model's own choice) and that
    choice with its probability. A translator's last row is the end of text. Raises InputError for an empty or too
    long reference. `model`: a loaded checkpoint, a mapped `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX (or a
    TransformerLens bridge of one) with `tokenizer`, run on `device`; or a `transformers` encoder-decoder (Marian,
    BART, T5) with its `tokenizer`, run by its own forward where it is, the reference read as its tokenizer reads
    a target (`text_target=`)."""
    if is_seq2seq(model):
        try:
            return forced_frame(seq2seq_tools.forced_rows(model, tokenizer, text, reference))
        except Seq2SeqError as exc:
            raise ValueError(str(exc)) from None
    model = checkpoint_of(model, tokenizer, "forced", device)
    found = _forced(model, text, reference)
    table = forced_frame(found.rows)
    table.attrs["notes"] = found.notes
    return table


@dataclass(frozen=True)
class Forked:
    """`fork`'s answer: the two continuations from the fork step on. table: one row per step (from the fork's, from
    1), each branch's token and its probability; greedy / forked: analysis.fork.Branch, each with its ids, the
    probability of each token, the logits (steps, vocab) it chose from, the top candidates of each step and every
    decoder head's attention row at each step (sub-layer name → (heads, keys)); the two texts as decoded; step and
    choice as asked (from 1); shared: the text written before the fork, the same in both."""

    table: pd.DataFrame
    greedy: Branch
    forked: Branch
    greedy_text: str
    forked_text: str
    shared: str
    step: int
    choice: int


def fork(
    model: Checkpoint | object,
    text: str,
    *,
    step: int,
    choice: int = 2,
    max_tokens: int = 20,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> Forked:
    """What if the model had written another word? Decode greedily after `text` (a language model's prompt, a
    translator's source), and at decoding step `step` (from 1: the first token written) take the `choice`-th likeliest
    candidate (1: greedy's own; up to 5) instead, then continue greedily both ways, up to `max_tokens` tokens
    written in all (analysis.fork). Deterministic; the key/value cache of the shared prefix is computed once and
    reused by both branches. A fork at choice 1 is greedy decoding itself. A `transformers` encoder-decoder with
    its `tokenizer` forks its translation of `text`, run by its own forward (each step a teacher-forced pass).
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if is_seq2seq(model):
        return _seq2seq_fork(model, text, step, choice, max_tokens, tokenizer, device)
    model = checkpoint_of(model, tokenizer, "fork", device)
    if not model.config.has_decoder:
        raise ValueError(f"{model.name} is an encoder and writes nothing: choose a language model or translator")
    for what, value in (("step", step), ("choice", choice), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{what} must be a whole number from 1, not {value!r}")
    if not isinstance(text, str):
        raise TypeError(f"fork reads a text (a str), not {type(text).__name__}")
    cleaned, notes = clean_text(text).text, []
    if not cleaned:
        raise InputError("The text is empty: type something for the model to read.")
    source = source_of(model, cleaned)
    prompt = [model.config.bos_id]
    if source is None:  # a language model continues its text
        prompt = encode_prefix(model, cleaned, notes, reserve=min(max_tokens, model.config.max_len // 2))
    tok = model.tokenizer
    asked = (int(step) - 1, int(choice), int(max_tokens))
    found = _fork(model.model, prompt, source, *asked, tok.pieces, tok.never_written)
    branches = [found.greedy, found.forked]
    pieces = [tok.pieces(list(b.ids)) for b in branches]
    table = fork_frame(int(step), pieces[0], found.greedy.probs, pieces[1], found.forked.probs)
    shared = list(found.shared)
    texts = [tok.decode(shared + list(b.ids)) for b in branches]
    return Forked(table, *branches, *texts, tok.decode(shared), int(step), int(choice))


def _seq2seq_fork(hf_model, text, step, choice, max_tokens, tokenizer, device) -> Forked:
    """`fork` of a `transformers` encoder-decoder (analysis.seq2seq_tools.fork), run by its own forward."""
    library_on_cpu(device)
    for what, value in (("step", step), ("choice", choice), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{what} must be a whole number from 1, not {value!r}")
    try:
        found = seq2seq_tools.fork(hf_model, tokenizer, text, int(step) - 1, int(choice), int(max_tokens))
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None
    pieces = tokenizer.convert_ids_to_tokens
    branches = [found.greedy, found.forked]
    table = fork_frame(int(step), *[x for b in branches for x in (pieces(list(b.ids)), b.probs)])
    shared = list(found.shared)
    texts = [tokenizer.decode(shared + list(b.ids), skip_special_tokens=True) for b in branches]
    return Forked(table, *branches, *texts, tokenizer.decode(shared, skip_special_tokens=True), int(step), int(choice))

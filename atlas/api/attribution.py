"""What heads write toward one prediction: direct logit attribution, the logit lens, which input tokens a prediction
rests on, and whether the methods agree (`agreement`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from numbers import Integral
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import torch

from analysis import seq2seq_tools
from analysis.agreement import agreement as _agreement
from analysis.agreement import translator_agreement as _translator_agreement_of
from analysis.analyze import Request, analyze_many
from analysis.attribution import Pass, attribute_many, decoder_inputs, never_guessed, token_id
from analysis.attribution import logit_lens_many as _logit_lens_many
from analysis.record import Analysis
from analysis.seq2seq import Seq2SeqError, is_seq2seq
from analysis.seq2seq import layout as seq2seq_layout
from analysis.token_attribution import STEPS as TOKEN_STEPS
from analysis.token_attribution import token_attribution as _token_attribution
from atlas.api.arguments import (
    AnalysisWarning,
    checkpoint_of,
    is_ids,
    library_on_cpu,
    texts_of,
    token_ids_of,
    warn_cut,
    zero_based,
)
from inference.checkpoint import Checkpoint
from inference.text import InputError
from model.names import parse_sublayer_name
from viz.agreement import agreement_frame
from viz.attribution import attribution_title, heads_heatmap, lens_heatmap, parts_frame
from viz.labels import display_piece, indexed_labels
from viz.tables import position_labels
from viz.token_attribution import token_attribution_frame, token_attribution_heatmap

# --- what heads write: direct logit attribution and the logit lens ------------------------------------------------


def _decoder_passes(model: Checkpoint, text: object, where: str) -> list[tuple[Analysis, Pass]]:
    """Each text's Analysis (one text, a row of token ids, or a list of texts: analysed as one padded batch,
    analysis.analyze.analyze_many) with the decoder pass it made (decoder_inputs), in order; an InputError names
    the text of a list that cannot be read (from 1)."""
    if is_ids(text):
        decoded, ids = token_ids_of(model, text, where)
        requests = [Request(decoded, target_ids=ids)]
    else:
        requests = [Request(t) for t in texts_of(text, where)]
    found = []
    for index, result in enumerate(analyze_many(model, requests)):
        if isinstance(result, InputError):
            if len(requests) == 1:
                raise result
            raise InputError(f"text {index + 1}: {result}") from result
        warn_cut(result.notes)
        found.append((result, decoder_inputs(model, result.text, result.target_ids)))
    return found


def _attributed(model, text, position, token, versus, where) -> list[tuple[Analysis, Any]]:
    """Each text's Analysis and its Attribution at `position` (from 1; None: the model's default), all texts'
    from one padded batch (analysis.attribution.attribute_many)."""
    passes = _decoder_passes(model, text, where)
    indices = []
    for _, (_, target) in passes:
        steps = target.shape[1]
        if position is None:  # a translator's first output word; a language model's next token after the text
            indices.append(0 if model.config.has_cross_attention else steps - 1)
        else:
            indices.append(zero_based(position, steps, "position", f"the decoder's input ({steps} tokens)"))
    chosen = [None if t is None else token_id(model, t) for t in (token, versus)]
    parts = attribute_many(model, [p for _, p in passes], indices, *chosen)
    return [(analysis, found) for (analysis, _), found in zip(passes, parts, strict=True)]


def _one_or_list(text: object, found: list) -> Any:
    """A list of texts' answers as a list, in order; one text's (or one row of ids') as itself."""
    return found if isinstance(text, (list, tuple)) and not is_ids(text) else found[0]


def logit_attribution(
    model: Checkpoint | object,
    text: str | Sequence[int] | torch.Tensor,
    position: int | None = None,
    token: int | str | None = None,
    versus: int | str | None = None,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure:
    """The Logit attribution page's heatmap: what each head wrote directly toward `token` (an id, a piece such as
    "▁mat", or a word read as one piece; default: the model's top guess) after decoder position `position` (from
    1; default: the last token of a language model's text, a translator's first output word), minus what it wrote
    toward `versus` when given. The norms' scales are frozen at this pass's values, so every part — heads,
    feed-forwards, embeddings, positions, biases — sums to the logit (`logit_attribution_scores`)."""
    model = checkpoint_of(model, tokenizer, "logit_attribution", device)
    if not isinstance(text, str) and not is_ids(text):
        raise TypeError(
            f"logit_attribution draws one text (a str), not {type(text).__name__}: "
            "logit_attribution_scores takes a list"
        )
    [(analysis, parts)] = _attributed(model, text, position, token, versus, "logit_attribution")
    labels = {a: analysis.attention_label(a) for a in parts.heads}
    named = model.tokenizer.pieces([parts.token] + ([] if parts.versus is None else [parts.versus]))
    where = position_labels(analysis)[parts.position]
    title = attribution_title(display_piece(named[0]), where, display_piece(named[1]) if len(named) > 1 else None)
    return heads_heatmap(parts.heads, labels, title)


def logit_attribution_scores(
    model: Checkpoint | object,
    text: str | Sequence[str] | Sequence[int] | torch.Tensor,
    position: int | None = None,
    token: int | str | None = None,
    versus: int | str | None = None,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame | list[pd.DataFrame]:
    """`logit_attribution`'s parts as a table: one row per head (attention, layer and head from 1, its
    contribution), the largest push first, then one row per feed-forward layer and the embeddings, positions and
    biases; the contributions sum to the model's logit, kept with the token, versus and position (from 1) in
    `.attrs`. A list of texts gives a list of tables, in order."""
    model = checkpoint_of(model, tokenizer, "logit_attribution_scores", device)
    found = _attributed(model, text, position, token, versus, "logit_attribution_scores")
    return _one_or_list(text, [_parts_table(model, analysis, parts) for analysis, parts in found])


def token_attribution(
    model: Checkpoint | object,
    text: str,
    position: int | None = None,
    token: int | str | None = None,
    *,
    steps: int = TOKEN_STEPS,
    figure: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame | go.Figure:
    """Which input tokens the prediction of `token` (an id, a piece or a one-piece word; default: the model's top
    guess) after decoder position `position` (from 1; default as `logit_attribution`) rests on: one row per input
    token (a translator's source, then its decoder's input; each place from 1 within its stack) with a column per
    method — integrated gradients (`steps` equal parts from a baseline of zero embeddings), gradient × input,
    saliency, rollout and attention flow (texts up to 64 tokens a stack). `.attrs`: the logit, the baseline's
    logit, integrated gradients' gap to their difference, the token, the position and notes. `figure=True`: the
    app's heatmap of the same, methods × tokens, each row against its own largest value."""
    model = checkpoint_of(model, tokenizer, "token_attribution", device)
    if not isinstance(text, str):
        raise ValueError(f"token_attribution reads one text (a str), not {type(text).__name__}")
    [(analysis, (_, target))] = _decoder_passes(model, text, "token_attribution")
    steps_in = target.shape[1]
    if position is None:
        index = 0 if model.config.has_cross_attention else steps_in - 1
    else:
        index = zero_based(position, steps_in, "position", f"the decoder's input ({steps_in} tokens)")
    chosen = None if token is None else token_id(model, token)
    found = _token_attribution(model, analysis, index, chosen, steps)
    for note in found.notes:
        warnings.warn(note, AnalysisWarning, stacklevel=2)
    named = model.tokenizer.pieces([found.token])[0]
    if figure:
        title = f"Which input tokens ‘{named}’ after {position_labels(analysis)[index]} rests on"
        return token_attribution_heatmap(found.pieces, found.stacks, found.scores, title)
    table = token_attribution_frame(found.pieces, found.stacks, found.scores)
    table.attrs |= {
        "logit": found.logit,
        "baseline": found.baseline,
        "gap": found.gap,
        "token": named,
        "position": index + 1,
        "notes": list(found.notes),
    }
    return table


def _parts_table(model: Checkpoint, analysis: Analysis, parts: Any) -> pd.DataFrame:
    """One Attribution as `logit_attribution_scores`' table."""
    labels = {a: analysis.attention_label(a) for a in parts.heads}
    table = parts_frame(parts.heads, parts.feed_forward, parts.embeddings, parts.positions, parts.biases, labels)
    named = model.tokenizer.pieces([parts.token] + ([] if parts.versus is None else [parts.versus]))
    table.attrs |= {"logit": parts.logit, "token": named[0], "versus": named[1] if len(named) > 1 else None}
    table.attrs["position"] = parts.position + 1
    return table


def logit_lens(
    model: Checkpoint | object,
    text: str | Sequence[str] | Sequence[int] | torch.Tensor,
    *,
    as_table: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure | pd.DataFrame | list[go.Figure] | list[pd.DataFrame]:
    """The logit lens: the stream after the embeddings and after each layer, read through the final norm and the
    output layer as if it were the last: each layer's top guess for the next token at every decoder position,
    coloured by its probability; the top row is the model's own prediction.

    `as_table`: the same as a DataFrame, one row per layer and position: "layer" (0: the embeddings, then 1 to L),
    "position" (from 1) and its "token", the "top guess" with its "probability", and "final guess probability"
    (what this layer gives the model's own final top guess). The guesses leave out the tokens no text is made of
    (analysis.attribution.never_guessed: padding, the unknown token, a start token never written); they are named
    in `.attrs["hidden"]`, this model's pieces. A list of texts gives a list of figures (or tables), in order, from
    one padded batch (analysis.attribution.logit_lens_many). A `transformers` encoder-decoder with its
    `tokenizer` (one text, its source): the decoder's stream on its greedy output, read through the final norm and
    output layer found to turn its last layer's output into its own logits (analysis.seq2seq_tools.lens), its
    special tokens left out."""
    if is_seq2seq(model):
        return _seq2seq_lens(model, text, as_table, tokenizer, device)
    model = checkpoint_of(model, tokenizer, "logit_lens", device)
    passes = _decoder_passes(model, text, "logit_lens")
    lenses = _logit_lens_many(model, [p for _, p in passes])
    found = []
    for (analysis, _), lens in zip(passes, lenses, strict=True):
        if as_table:
            found.append(_lens_table(model, analysis, lens))
            continue
        readable = [[display_piece(p) for p in row] for row in lens.pieces]
        title = "The logit lens: each layer's guess for the next token"
        found.append(lens_heatmap(readable, lens.prob, position_labels(analysis), title))
    return _one_or_list(text, found)


def _seq2seq_lens(hf_model: Any, text: object, as_table: bool, tokenizer: Any, device: object) -> Any:
    """`logit_lens` of a `transformers` encoder-decoder on its translation of `text` (analysis.seq2seq_tools.lens):
    every guess over the whole vocabulary, its special tokens named in `.attrs["hidden"]` and left out."""
    library_on_cpu(device)
    if not isinstance(text, str):
        raise TypeError(
            f"logit_lens of a transformers encoder-decoder reads one source text, not {type(text).__name__}"
        )
    try:
        found = seq2seq_tools.lens(hf_model, tokenizer, text)
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None
    probs = torch.softmax(found.logits.double(), dim=-1)  # (layers + 1, T, vocab)
    hidden = sorted(set(getattr(tokenizer, "all_special_ids", [])))
    shown = probs.clone()
    shown[..., hidden] = -1.0
    top = shown.argmax(-1)  # (layers + 1, T)
    prob = probs.gather(-1, top[..., None])[..., 0].numpy()
    final = probs[..., :].gather(-1, top[-1][None, :, None].expand(len(probs), -1, 1))[..., 0].numpy()
    pieces = [tokenizer.convert_ids_to_tokens(row.tolist()) for row in top]
    labels = indexed_labels(found.pair.target_pieces)
    if not as_table:
        readable = [[display_piece(p) for p in row] for row in pieces]
        return lens_heatmap(readable, prob, labels, "The logit lens: each layer's guess for the next token")
    rows = [
        {
            "layer": layer,
            "position": position + 1,
            "token": str(found.pair.target_pieces[position]),
            "top guess": str(guess),
            "probability": float(prob[layer, position]),
            "final guess probability": float(final[layer, position]),
        }
        for layer, guesses in enumerate(pieces)
        for position, guess in enumerate(guesses)
    ]
    table = pd.DataFrame(rows)
    table.attrs["hidden"] = [str(p) for p in tokenizer.convert_ids_to_tokens(hidden)]
    return table


def _lens_table(model: Checkpoint, analysis: Analysis, lens: Any) -> pd.DataFrame:
    """The logit lens's rows (analysis.attribution.LogitLens) as a long table, pieces as the tokenizer spells them."""
    rows = []
    for layer, guesses in enumerate(lens.pieces):
        for position, guess in enumerate(guesses):
            rows.append(
                {
                    "layer": layer,
                    "position": position + 1,
                    "token": str(analysis.target_pieces[position]),
                    "top guess": str(guess),
                    "probability": float(lens.prob[layer, position]),
                    "final guess probability": float(lens.final_prob[layer, position]),
                }
            )
    table = pd.DataFrame(rows)
    table.attrs["hidden"] = [str(p) for p in model.tokenizer.pieces(sorted(never_guessed(model.tokenizer)))]
    return table


# --- do the explanations agree? ----------------------------------------------------------------------------------


def agreement(
    model: Checkpoint | object,
    text: str,
    position: int | None = None,
    corrupted: str | Sequence[int] | None = None,
    *,
    target: str | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """Every self-attention head's importance for one prediction of a language model — the next token after
    `position` (from 1; default the text's last token), the model's top guess there — by seven methods, one column
    each (analysis.agreement): "attention" (the largest weight the position gives any token but the first, the
    start of text), "value-weighted attention" (the same, of `value_weighted`'s shares), "direct logit attribution"
    (what `logit_attribution_scores` gives the head), "ablation (zero)" and "ablation (mean)" (the KL divergence at
    the position with the head switched off alone, as `rank_heads`), "activation patching" and "attribution
    patching" (the share of the logit difference the head restores, as `patch_scores`). Rows: (layer, head) from 1.

    Patching needs a corrupted text of the same token count: `corrupted`; else the second text of the Compare pair
    the model's card measured when `text` is its first; else the text up to the position with the tokens between
    the start of text and it shuffled (seeded). `corrupted` may be token ids: `.attrs["corrupted_ids"]` (the start
    of text, then the corrupted run's tokens up to the position) given back as `corrupted=` runs the same patching
    again, where `.attrs["corrupted"]`, their decoded text, may re-tokenize to other tokens. `.attrs` names the
    answer, versus, the corrupted text and its ids and where they came from, and a note when the patching columns
    are NaN. The methods' Spearman correlations:
    `frame.abs().rank().corr()` ranks the signed columns by magnitude as the app does. Costs layers × heads × 2
    ablated runs, up to 64 a forward pass side by side, the patched runs and a few more passes; ValueError for a model
    that is not a language model or a position out of range.

    A translator (a loaded one, or a `transformers` encoder-decoder with its `tokenizer`, run by its own forward:
    direct logit attribution and attribution patching NaN there): its prediction after decoder `position` (None:
    the first output word) of `target` (None: its own output), held fixed for every run; one row per head of every
    attention of both stacks, indexed (attention, layer, head); attention columns and direct logit attribution
    for the decoder's heads (NaN for the encoder's), ablation and both patchings for all, the corrupted run a
    source of the same token count (`corrupted`; else the source shuffled between its first and last token,
    seeded).
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if is_seq2seq(model):
        library_on_cpu(device)
        return _translator_agreement(model, text, position, corrupted, target, tokenizer)
    model = checkpoint_of(model, tokenizer, "agreement", device)
    if model.config.has_cross_attention:
        return _translator_agreement(model, text, position, corrupted, target)
    if position is not None and (isinstance(position, bool) or not isinstance(position, Integral)):
        raise ValueError(f"position must be a whole number counted from 1, not {position!r}")
    if corrupted is not None and not isinstance(corrupted, str) and not is_ids(corrupted):
        raise ValueError(f"corrupted is a text or a list of token ids, not {type(corrupted).__name__}")
    if isinstance(corrupted, torch.Tensor):
        corrupted = corrupted.reshape(-1).tolist()
    found = _agreement(model, text, None if position is None else int(position) - 1, corrupted)
    table = agreement_frame(found.scores)
    pieces = model.tokenizer.pieces
    table.attrs |= {"position": found.position + 1, "answer": pieces([found.answer])[0]}
    table.attrs["versus"] = None if found.versus is None else pieces([found.versus])[0]
    table.attrs["corrupted"] = None if found.corrupted is None else model.tokenizer.decode(list(found.corrupted[1:]))
    table.attrs["corrupted_ids"] = None if found.corrupted is None else list(found.corrupted)
    table.attrs |= {"corrupted_from": found.corrupted_from, "note": found.note}
    return table


def _translator_agreement(
    model: Checkpoint | Any, text: str, position: object, corrupted: object, target: object, tokenizer: Any = None
):
    """`agreement` of a translator (analysis.agreement.translator_agreement) as its table."""
    if position is not None and (isinstance(position, bool) or not isinstance(position, Integral)):
        raise ValueError(f"position must be a whole number counted from 1, not {position!r}")
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target is the decoder's text (a str), not {type(target).__name__}")
    if isinstance(corrupted, torch.Tensor):
        corrupted = corrupted.reshape(-1).tolist()
    asked = None if position is None else int(position) - 1
    if is_seq2seq(model):
        try:
            found = seq2seq_tools.agreement(model, tokenizer, text, asked, corrupted, target)
        except Seq2SeqError as exc:
            raise ValueError(str(exc)) from None
        n_heads = seq2seq_layout(model).n_heads
        pieces = tokenizer.convert_ids_to_tokens

        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids, skip_special_tokens=True)
    else:
        found = _translator_agreement_of(model, text, asked, corrupted, target)
        n_heads, pieces, decode = model.config.n_heads, model.tokenizer.pieces, model.tokenizer.decode
    rows, index = [], []
    for name in found.scores["attention"]:
        stack, layer, type_ = parse_sublayer_name(name)
        for head in range(n_heads):
            index.append((f"{stack}.{type_}", layer + 1, head + 1))
            rows.append([float(found.scores[m][name][head]) for m in found.scores])
    index = pd.MultiIndex.from_tuples(index, names=["attention", "layer", "head"])
    table = pd.DataFrame(rows, columns=list(found.scores), index=index)
    table.attrs |= {"position": found.position + 1, "answer": pieces([found.answer])[0]}
    table.attrs["versus"] = None if found.versus is None else pieces([found.versus])[0]
    table.attrs["corrupted"] = None if found.corrupted is None else decode(list(found.corrupted))
    table.attrs["corrupted_ids"] = None if found.corrupted is None else list(found.corrupted)
    table.attrs |= {"corrupted_from": found.corrupted_from, "note": found.note, "target_ids": list(found.target)}
    return table

"""What the weights and the scores say about heads: how they compose (`composition`, `composition_scores`) and why a
head attends where it does (`score_parts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis import seq2seq_tools
from analysis.analyze import analyze as _analyze
from analysis.circuits import MODES, composition_of, random_like
from analysis.circuits import baseline as _chance
from analysis.circuits import composition as _composition
from analysis.score_parts import pass_inputs, row_parts
from analysis.seq2seq import Seq2SeqError, is_seq2seq
from atlas.api.arguments import (
    checkpoint_of,
    chosen_attention,
    library_on_cpu,
    opening_attention,
    sublayer_of,
    zero_based,
)
from inference.checkpoint import Checkpoint
from viz.circuits import composition_heatmap, composition_table
from viz.labels import indexed_labels
from viz.score_parts import score_parts_frame, score_parts_heatmap

# --- circuits: what the weights say about heads ------------------------------------------------------------------


def composition(
    model: Checkpoint | object,
    mode: str = "K",
    stack: str | None = None,
    *,
    centre: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure:
    """How the self-attention heads of `model` compose, from its weights alone (analysis.circuits: Elhage et al.
    2021): for `mode` "Q", "K" or "V", how much each later head's queries, keys or values read what each earlier
    head writes, as ‖W_OV^early · W_QK^late‖ over the product of their norms, between 0 and 1. Rows are the heads
    that write, columns the heads that read, labelled "L2 H3" (from 1). An induction head K-composes with a
    previous-token head. `stack`: "encoder" or "decoder" (default: the model's first). `model`: a loaded
    checkpoint, or a `transformers` GPT-2 or Llama with its `tokenizer` (every circuit function takes either).
    `centre`: the reading matrices centred where heads read through a LayerNorm, as TransformerLens's `fold_ln`
    (analysis.circuits). A `transformers` encoder-decoder: its own weights (analysis.seq2seq_tools.head_matrices;
    `stack` default "encoder"), no `centre`."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
    if is_seq2seq(model):
        return composition_heatmap(_seq2seq_composition(model, stack, centre, device).scores[mode], mode)
    model = checkpoint_of(model, tokenizer, "composition", device)
    return composition_heatmap(_composition(model.model, stack, centre).scores[mode], mode)


def composition_scores(
    model: Checkpoint | object,
    stack: str | None = None,
    *,
    centre: bool = False,
    baseline: int | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """`composition`'s scores as a table: one row per pair of heads that can compose (earlier layer and head, later
    layer and head, from 1) with its Q, K and V scores, the strongest K-composition first. `centre` as
    `composition`. `baseline` (a seed): `.attrs["baseline"]` holds each mode's mean score over heads of the same
    shapes with random weights drawn with that seed, what chance gives, and the table a "K over baseline"
    column (the score divided by it); None: no baseline."""
    if baseline is not None and (isinstance(baseline, bool) or not isinstance(baseline, Integral)):
        raise ValueError(f"baseline is the random weights' seed, a whole number (or None), not {baseline!r}")
    if is_seq2seq(model):
        composed = _seq2seq_composition(model, stack, centre, device)
    else:
        model = checkpoint_of(model, tokenizer, "composition_scores", device)
        composed = _composition(model.model, stack, centre)
    if composed.n_layers < 2:
        raise ValueError("heads compose across layers: a model of one layer has no pair to score")
    table = composition_table(composed.scores)
    table.attrs["centre"] = centre
    if baseline is not None:
        if is_seq2seq(model):
            drawn = composition_of(random_like(seq2seq_tools.head_matrices(model, composed.stack), int(baseline)))
            chance = {m: float(np.nanmean(v)) for m, v in drawn.scores.items()}
        else:
            chance = _chance(model.model, int(baseline), stack)
        table["K over baseline"] = table["K"] / chance["K"]
        table.attrs["baseline"] = chance
    return table


def _seq2seq_composition(hf_model: Any, stack: str | None, centre: bool, device: object) -> Any:
    """A `transformers` encoder-decoder's composition scores from its weights (analysis.seq2seq_tools)."""
    library_on_cpu(device)
    if centre:
        raise ValueError("centre folds a pre-norm LayerNorm's centring; a transformers encoder-decoder's is not read")
    if stack not in (None, "encoder", "decoder"):
        raise ValueError(f"stack is 'encoder' or 'decoder', not {stack!r}")
    try:
        return composition_of(seq2seq_tools.head_matrices(hf_model, stack or "encoder"))
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None


# --- why a head attends where it does -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreSplit:
    """`score_parts`' answer. table: query parts (rows) × key parts (columns), their cells summing to `score`, the
    model's own raw score q·k/√d_k (before the mask); attention, layer, head, query and key as asked (from 1), with
    the two tokens' labels; masked: whether the mask forbids this key (its raw score exists all the same)."""

    table: pd.DataFrame
    score: float
    attention: str
    layer: int
    head: int
    query: int
    key: int
    query_token: str
    key_token: str
    masked: bool

    def figure(self) -> go.Figure:
        """The table as the Attention math page draws it: a heatmap centred on 0, titled with the raw score the
        cells sum to (the page says it below the figure)."""
        title = f"Why {self.query_token} attends to {self.key_token}: layer {self.layer}, head {self.head}"
        return score_parts_heatmap(self.table, f"{title}, raw score {self.score:+.4f}")


def score_parts(
    model: Checkpoint | object,
    text: str,
    *,
    layer: int,
    head: int,
    query: int,
    key: int | Sequence[int],
    attention: str | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> ScoreSplit | list[ScoreSplit]:
    """Why a head attends where it does: head `head` of layer `layer`'s raw score q·k/√d_k of query position `query`
    for key position `key` (all from 1, as the Attention math page labels them) split into the residual stream's
    parts on each side — token embeddings, positions, each earlier head's output, each earlier feed-forward layer,
    biases (analysis.score_parts). Every normalisation is held at the scale (its per-position denominator) it had in
    this run, which makes it linear; each part is centred on its own, so the cells sum to the model's raw score
    exactly. For cross-attention the key side is the encoder's output, split into the encoder's parts. `attention`
    as in `head` (None: the cross-attention if the model has one, else its first). `model`: a loaded checkpoint,
    or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a TransformerLens bridge of one),
    mapped as the circuit functions map it, and run on `device` as they are.

    `key` a list (or range) of positions gives a list of splits, one per key in that order, from one traced pass:
    a query's whole row, `key=range(1, n + 1)`, costs about what one key does."""
    many = isinstance(key, (list, tuple, range))
    if many and not key:
        raise ValueError("key is a position from 1, or a non-empty list of them")
    model = checkpoint_of(model, tokenizer, "score_parts", device)
    analysis = _analyze(model, text)
    attention = chosen_attention(analysis, attention, opening_attention(analysis))
    sublayer, index = sublayer_of(analysis, attention, layer)
    where = f"layer {index + 1} of {analysis.attention_label(attention)}"
    h = zero_based(head, sublayer.n_heads, "head", where)
    q = zero_based(query, len(sublayer.query_pieces), "query position", where)
    keys = [zero_based(k, len(sublayer.key_pieces), "key position", where) for k in (key if many else [key])]
    ids, source = pass_inputs(model, analysis.text, analysis.target_ids)
    query_label, key_labels = indexed_labels(sublayer.query_pieces)[q], indexed_labels(sublayer.key_pieces)
    splits = [
        ScoreSplit(
            score_parts_frame(parts.query_parts, parts.key_parts, parts.table),
            parts.score,
            attention,
            index + 1,
            h + 1,
            q + 1,
            parts.key + 1,
            query_label,
            key_labels[parts.key],
            parts.masked,
        )
        for parts in row_parts(model.model, ids, source, sublayer.name, h, q, keys)
    ]
    return splits if many else splits[0]

"""Questions a class answers before the figure shows, and the model's own answer to each, read off one Analysis:
where one query attends most, which head is the induction head, what the model predicts next.

Each is a `Asked`: the prompt, the choices a student picks from (labels counted from 1, as every label a person
reads) and the index of the model's answer. Numpy only: it reads the record the pages already hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.detectors import detect
from analysis.record import Analysis

MOST_CHOICES = 64  # a class picks from a list that fits a phone's screen; the classroom's own bound is the same
NEXT_CHOICES = 6  # the model's top guesses offered for "what comes next", in alphabetical order


class QuestionError(ValueError):
    """This question cannot be asked of this model and text: said in one line."""


@dataclass(frozen=True)
class Asked:
    kind: str
    prompt: str
    choices: tuple[str, ...]
    model_answer: int


def attend(analysis: Analysis, attention: str, layer: int, head: int, query: int) -> Asked:
    """Where will query `query` of head `head`, layer `layer` attend most: its keys it may attend to, and the one
    with the largest weight."""
    block = analysis.block(attention, layer)
    if not 0 <= query < len(block.query_pieces):
        raise QuestionError(f"query {query + 1} is not one of the {len(block.query_pieces)} query tokens")
    allowed = np.flatnonzero(block.mask[query])
    if len(allowed) < 2:
        raise QuestionError(f"query {query + 1} may attend to one key only: pick a later query")
    if len(allowed) > MOST_CHOICES:
        raise QuestionError(f"query {query + 1} may attend to {len(allowed)} keys, more than a class can pick from")
    row = block.weights[head, query, allowed]
    choices = tuple(f"{k + 1}:{block.key_pieces[k]}" for k in allowed)
    query_label = f"{query + 1}:{block.query_pieces[query]}"
    prompt = f"Layer {layer + 1}, head {head + 1}: which token will query {query_label} attend to most?"
    return Asked("attend", prompt, choices, int(np.argmax(row)))


def induction_head(analysis: Analysis) -> Asked:
    """Which head is the induction head: every head of the first self-attention type, and the one whose attention
    falls most on the token after an earlier copy of the query's (analysis.detectors, "induction")."""
    scores = detect([analysis], "induction")
    if not scores:
        raise QuestionError("this model has no self-attention to look for an induction head in")
    table = next(iter(scores.values()))
    n_layers, n_heads = table.shape
    if n_layers * n_heads > MOST_CHOICES:
        raise QuestionError(f"{n_layers * n_heads} heads are more than a class can pick from")
    if not table.max() > 0:
        raise QuestionError("no token of this text repeats: give a text with a repeated phrase")
    choices = tuple(f"layer {layer + 1} head {head + 1}" for layer in range(n_layers) for head in range(n_heads))
    return Asked("head", "Which head is the induction head?", choices, int(np.argmax(table)))


def next_token(analysis: Analysis, position: int) -> Asked:
    """What will the model predict after token `position`: its top NEXT_CHOICES guesses, alphabetically, and its
    first."""
    if analysis.has_encoder or not analysis.predictions:
        raise QuestionError("this model does not predict the next token of its text")
    if not 0 <= position < len(analysis.predictions):
        raise QuestionError(f"position {position + 1} is not one of the {len(analysis.predictions)} tokens")
    top = analysis.predictions[position][:NEXT_CHOICES]
    labels = [p.piece for p in top]
    if len(set(labels)) < 2 or len(set(labels)) < len(labels):
        raise QuestionError("the model's guesses here are not two or more different tokens")
    order = sorted(range(len(labels)), key=lambda i: labels[i])
    choices = tuple(labels[i] for i in order)
    after = f"{position + 1}:{analysis.target_pieces[position]}"
    return Asked("next", f"Which token will the model predict after {after}?", choices, order.index(0))

"""Questions a class answers before the figure shows, and the model's own answer to each, read off one Analysis:
where one query attends most, which head is the induction head, what the model predicts next.

Each is an `Asked`: the prompt, the choices a student picks from and the index of the model's answer. Choices are
words as a person reads them (a word's sub-word pieces joined, no tokenizer marks), each mapping back to the
positions it covers; pieces only where pieces are the point (the next token, a model of letters). A question is
offered only where the model's answer stands out by a margin named below, and is refused in one line otherwise
(QuestionError). `<s>`, the start token on which a head with nothing to do rests its weight (the attention sink),
is never a choice. It reads the record the pages already hold, and no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.induction import second_copy, sentence_scores
from analysis.record import Analysis
from inference.catalog import card_defaults, default_head
from model.names import sublayer_layer

MOST_CHOICES = 64  # the classroom's own bound on choices (live/rules.py)
MOST_WORDS = 20  # words offered for "where will it attend": a class reads every one on a phone
NEXT_CHOICES = 6  # the model's top guesses offered for "what comes next", in alphabetical order
# Margins: a question is asked only where the model's answer stands out.
ATTEND_MARGIN = 1.5  # the heaviest word's weight is at least this many times the second's
ATTEND_SHARE = 0.25  # and the words (all but <s>) hold at least this share of the query's weight
NEXT_AT = 0.3  # the top guess's probability is at least this
NEXT_MARGIN = 1.5  # and at least this many times the second guess's
HEAD_AT = 0.4  # the induction head's mean weight on the copied token over the text's second copy
HEAD_LEAD = 0.1  # without a named head: the best head's score leads the second's by this much
MIN_REPEAT = 2  # tokens of a second copy (each repeating a pair of tokens in a row) the head question needs

SPECIAL = ("<s>", "</s>", "<pad>", "<unk>")
START = "<s>"
SINK_NOTE = "<s>, the start token where a head with nothing to do rests its weight, is not a choice."
_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_table() -> dict[str, int]:
    """GPT-2's `bytes_to_unicode`, inverted (viz.labels reads the same table; the analyses never import viz)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + i): b for i, b in enumerate(shifted)}


_BYTES = _byte_table()


class QuestionError(ValueError):
    """This question cannot be asked of this model and text: said in one line."""


@dataclass(frozen=True)
class Word:
    """A word as a person reads it, and the token positions (0-based) its pieces fill."""

    text: str
    positions: tuple[int, ...]


@dataclass(frozen=True)
class Asked:
    """One question. `choices[i]` covers token positions `positions[i]` (attend) and the model's measure for it is
    `values[i]` (a word's summed weight, a guess's probability, a head's induction score). A head question is a
    grid: choice `layer * n_heads + head` is that head (0-based), `grid()` its scores by layer and head."""

    kind: str
    prompt: str
    choices: tuple[str, ...]
    model_answer: int
    positions: tuple[tuple[int, ...], ...] = ()
    values: tuple[float, ...] = ()
    n_layers: int = 0
    n_heads: int = 0
    note: str = ""  # one line a page shows under the question: what was left out, or how the answer was chosen

    @property
    def is_grid(self) -> bool:
        """Whether its choices are a layer × head grid (the head question)."""
        return self.n_layers > 0 and self.n_heads > 0

    def cell(self, choice: int) -> tuple[int, int]:
        """(layer, head), 0-based, of choice `choice` of a head question."""
        if not self.is_grid or not 0 <= choice < len(self.choices):
            raise ValueError(f"choice {choice} is not a head of this question")
        return divmod(choice, self.n_heads)

    def choice_at(self, layer: int, head: int) -> int:
        """The choice that is head `head` of layer `layer` (0-based), as a tap on the grid picks it."""
        if not self.is_grid or not (0 <= layer < self.n_layers and 0 <= head < self.n_heads):
            raise ValueError(f"layer {layer + 1}, head {head + 1} is not a head of this question")
        return layer * self.n_heads + head

    def grid(self) -> tuple[tuple[float, ...], ...]:
        """A head question's scores, one row per layer, one column per head."""
        return tuple(tuple(self.values[r * self.n_heads : (r + 1) * self.n_heads]) for r in range(self.n_layers))


def _text(pieces: Sequence[str]) -> str:
    """The text pieces stand for: `▁` a space, `<0xNN>` bytes joined and decoded, a byte-level BPE's pieces decoded."""
    out, pending = [], bytearray()
    for piece in pieces:
        if (byte := _BYTE.fullmatch(piece)) is not None:
            pending.append(int(byte.group(1), 16))
        elif getattr(piece, "byte_level", False) and all(ch in _BYTES for ch in piece):
            pending.extend(_BYTES[ch] for ch in piece)
        else:
            if pending:
                out.append(pending.decode("utf-8", "replace"))
                pending.clear()
            out.append(piece.replace("▁", " "))
    if pending:
        out.append(pending.decode("utf-8", "replace"))
    return "".join(out)


def _starts_word(piece: str) -> bool:
    return piece.startswith("▁") or _text([piece]).startswith((" ", "\n", "\t"))


def words(pieces: Sequence[str]) -> tuple[Word, ...]:
    """The words of a text's pieces: a piece that starts a word (`▁`, or a byte-level BPE's space) opens one, the
    pieces after it join it; a special piece (`<s>`) is a word of its own. A tokenizer that marks no word start (a
    model of letters) keeps each piece a word: there the pieces are the point."""
    marked = any(_starts_word(p) for p in pieces if p not in SPECIAL)
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        alone = piece in SPECIAL or not marked
        after_special = bool(groups) and pieces[groups[-1][-1]] in SPECIAL
        if alone or not groups or after_special or _starts_word(piece):
            groups.append([i])
        else:
            groups[-1].append(i)
    return tuple(Word(_text([pieces[i] for i in g]).strip() or "∅", tuple(g)) for g in groups)


def _labels(chosen: Sequence[Word], numbers: Sequence[int]) -> tuple[str, ...]:
    """Each word's text; a word that appears twice among them also gets its number in the text, counted from 1."""
    texts = [w.text for w in chosen]
    return tuple(f"{t} (word {n})" if texts.count(t) > 1 else t for t, n in zip(texts, numbers, strict=True))


def attend(analysis: Analysis, attention: str, layer: int, head: int, query: int) -> Asked:
    """Which word will query `query` of head `head`, layer `layer` attend to most: the words of the keys it may
    attend to (`<s>` left out), each weighing the sum of its pieces' weights, and the heaviest. Asked only where the
    heaviest weighs ATTEND_MARGIN times the second and the words hold ATTEND_SHARE of the query's weight."""
    sublayer = analysis.sublayer(attention, layer)
    if not 0 <= query < len(sublayer.query_pieces):
        raise QuestionError(f"query {query + 1} is not one of the {len(sublayer.query_pieces)} query tokens")
    allowed = set(np.flatnonzero(sublayer.mask[query]).tolist())
    text_words = words(sublayer.key_pieces)
    numbered = [(n, w) for n, w in enumerate((w for w in text_words if w.text not in SPECIAL), start=1)]
    offered = [(n, Word(w.text, tuple(p for p in w.positions if p in allowed))) for n, w in numbered]
    offered = [(n, w) for n, w in offered if w.positions]
    if len(offered) < 2:
        raise QuestionError(f"query {query + 1} may attend to fewer than two words: pick a later query")
    if len(offered) > MOST_WORDS:
        raise QuestionError(
            f"query {query + 1} may attend to {len(offered)} words, more than {MOST_WORDS}: use a shorter text"
        )
    row = sublayer.weights[head, query]
    values = [float(row[list(w.positions)].sum()) for _, w in offered]
    where = f"layer {layer + 1}, head {head + 1}"
    if sum(values) < ATTEND_SHARE:
        raise QuestionError(
            f"{where} rests {1 - sum(values):.0%} of this query's weight on <s> (the attention sink): pick another head"
        )
    order = np.argsort(values)[::-1]
    best, second = values[order[0]], values[order[1]]
    if best < ATTEND_MARGIN * second:
        raise QuestionError(
            f"no word stands out for {where} here ({best:.2f} against {second:.2f}; the question needs "
            f"{ATTEND_MARGIN:g}×): pick another head or query"
        )
    labels = _labels([w for _, w in offered], [n for n, _ in offered])
    query_word = next(w for w in text_words if query in w.positions) if attention.endswith("self_attn") else None
    said = query_word.text if query_word is not None else sublayer.query_pieces[query]
    prompt = f"Layer {layer + 1}, head {head + 1}: which word will “{_text([said]).strip()}” attend to most?"
    return Asked(
        "attend",
        prompt,
        labels,
        int(order[0]),
        positions=tuple(w.positions for _, w in offered),
        values=tuple(values),
        note=SINK_NOTE,
    )


def induction_head(analysis: Analysis, named: tuple[int, int] | None = None) -> Asked:
    """Which head is the induction head: every head of the first self-attention type as a layer × head grid, each
    scored by its mean weight on the token after the earlier copy over this text's second copy
    (analysis.induction.sentence_scores). Asked only on a text with a repeat (MIN_REPEAT tokens of a second copy).
    The answer is `named` (layer, head, 0-based: the head the app calls the induction head, the card's), asked where
    it copies here (HEAD_AT); without one, the best head, where it leads the second by HEAD_LEAD."""
    attention = next((a for a in analysis.attentions if a.endswith("self_attn")), None)
    if attention is None:
        raise QuestionError("this model has no self-attention to look for an induction head in")
    layers = analysis.layers(attention)
    first = analysis.sublayer(attention, layers[0])
    tokens = first.query_pieces if not analysis.target_ids or first.stack == "encoder" else analysis.target_ids
    if len(second_copy(tokens)) < MIN_REPEAT:
        raise QuestionError(
            "this text repeats no phrase: type one with a repeat, e.g. “the old man went … the old man”"
        )
    table = np.stack([sentence_scores(analysis.sublayer(attention, layer).weights, tokens) for layer in layers])
    n_layers, n_heads = table.shape
    if n_layers * n_heads > MOST_CHOICES:
        raise QuestionError(f"{n_layers * n_heads} heads are more than a class can pick from")
    flat = table.ravel()
    if named is not None:
        layer, head = named
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise QuestionError(f"layer {layer + 1}, head {head + 1} is not a head of this model")
        answer = layer * n_heads + head
        if flat[answer] < HEAD_AT:
            raise QuestionError(
                f"the induction head, layer {layer + 1} head {head + 1}, puts {flat[answer]:.2f} of its weight on the "
                f"copied word here, under {HEAD_AT:g}: type a text with a longer repeat"
            )
        note = (
            f"The answer: layer {layer + 1}, head {head + 1}, the head that copies most over ten ordinary sentences "
            "with a repeat; beside each head, its weight on the copied word here."
        )
    else:
        order = np.argsort(flat)[::-1]
        answer = int(order[0])
        if flat[answer] < HEAD_AT or flat[answer] - flat[order[1]] < HEAD_LEAD:
            raise QuestionError(
                f"no head stands out as the induction head on this text ({flat[answer]:.2f} against "
                f"{flat[order[1]]:.2f}): type a text with a longer repeat"
            )
        note = "The answer: the head with the most weight on the copied word over this text's second copy."
    choices = tuple(f"layer {r + 1} head {h + 1}" for r in range(n_layers) for h in range(n_heads))
    return Asked(
        "head",
        "Which head is the induction head?",
        choices,
        int(answer),
        values=tuple(float(v) for v in flat),
        n_layers=n_layers,
        n_heads=n_heads,
        note=note,
    )


def named_head(card: dict) -> tuple[int, int] | None:
    """(layer, head), 0-based, of the head the app calls the induction head: the card's measured default head
    (`python -m atlas defaults`, chosen on ordinary sentences with a repeat), for `induction_head(…, named=)`; None
    where the card names none (a translator, a card measured before)."""
    found = card_defaults(card, "head")
    head = default_head(card) if found is not None and found.get("what") == "induction" else None
    return None if head is None else (sublayer_layer(head[0]), head[1])


def _guess_label(piece: str) -> str | None:
    """A guess as a person reads it: a word-starting piece as its word, a piece that continues one as `…piece`;
    None for a special or byte piece, which no one can read."""
    if piece in SPECIAL or _BYTE.fullmatch(piece):
        return None
    text = _text([piece])
    word = text.strip()
    if not word:
        return None
    return word if _starts_word(piece) else f"…{word}"


def next_token(analysis: Analysis, position: int) -> Asked:
    """What will the model predict after token `position`: its top NEXT_CHOICES readable guesses, alphabetically,
    and its first. Asked only where the first has NEXT_AT probability and NEXT_MARGIN times the second's."""
    if analysis.has_encoder or not analysis.predictions:
        raise QuestionError("this model does not predict the next token of its text")
    if not 0 <= position < len(analysis.predictions):
        raise QuestionError(f"position {position + 1} is not one of the {len(analysis.predictions)} tokens")
    ranked = analysis.predictions[position]
    if len(ranked) < 2:
        raise QuestionError("the model gives one guess only here")
    top, second = ranked[0].prob, ranked[1].prob
    if _guess_label(ranked[0].piece) is None:
        raise QuestionError("the model's first guess here is a special or byte token, not a word: pick another place")
    if top < NEXT_AT or top < NEXT_MARGIN * second:
        raise QuestionError(
            f"the model is not sure here (its first guess {top:.0%}, its second {second:.0%}; the question needs "
            f"{NEXT_AT:.0%} and {NEXT_MARGIN:g}×): pick another place"
        )
    kept = [(label, p.prob) for p in ranked if (label := _guess_label(p.piece)) is not None]
    seen: dict[str, float] = {}
    for label, prob in kept:
        seen.setdefault(label, prob)  # a word met twice (two pieces that read alike): the likelier one
    labels = list(seen)[:NEXT_CHOICES]
    if len(labels) < 2:
        raise QuestionError("the model's guesses here are not two or more different words")
    order = sorted(range(len(labels)), key=lambda i: labels[i].lower())
    choices = tuple(labels[i] for i in order)
    after = words(analysis.target_pieces[: position + 1])[-1].text
    prompt = f"Which word will the model write after “{after}”?"
    note = "A guess that starts with … goes on with the word before it." if any(c[0] == "…" for c in choices) else ""
    return Asked("next", prompt, choices, order.index(0), values=tuple(seen[c] for c in choices), note=note)

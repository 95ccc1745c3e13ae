"""The views a model opens on, chosen by measuring the model: the head that shows most, the text where switching it
off changes the prediction, the pair whose answers differ, the text where the head's forming is visible.

`measure(ckpt)` returns the record `python -m atlas defaults CHECKPOINT` writes to the card under `defaults`; the
pages only read it (inference.catalog.card_defaults). Heads are counted from 1 in the record, as the card's other
heads are; every figure in it is recomputed by the tests (tests/test_measured_defaults.py), so a stale card fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from analysis.ablation import ablation_effect, head_importance
from analysis.induction import SENTENCES, second_copy, sentence_scores
from analysis.induction import measure as induction_probe
from analysis.patching import PairError, prepare
from inference.catalog import SUBLAYER_KEY, presets
from inference.checkpoint import Checkpoint
from inference.decoding import generate
from inference.snapshots import list_snapshots, load_snapshot
from inference.text import clean_text, encode_prefix, encode_source
from model.forward import forward

KL_SHOWN = 0.05  # nats: an ablation below this (and with the same top guess) shows nothing on the page
ROUND = 4  # decimals kept on the card
FEWEST_SENTENCES = 3  # sentences with a repeat the induction head is chosen on, at the least

# Texts that repeat a run of words, for a language model's induction head: rare names copy only from the earlier
# occurrence, so switching the head off shows. A language model's presets are tried beside them.
REPEATED = (
    "Anna Pavlova met Boris Godunov. Anna Pavlova met Boris",
    "Frodo Baggins and Samwise Gamgee walked. Frodo Baggins and Samwise",
    "red blue green black white red blue green black white red blue",
    "The cat sat on the mat. The cat sat on the",
)

# Compare's pairs for a language model, in the order tried: (first text, second text, answer, versus, question).
# The answer is the word that continues the first text; versus, the one that continues the second.
PAIRS = (
    (
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
        " Mary",
        " John",
        "who receives the drink: the name not repeated (indirect object)",
    ),
    (
        "Anna Pavlova met Boris Godunov. Anna Pavlova met Boris",
        "Anna Pavlova met Boris Becker. Anna Pavlova met Boris",
        " Godunov",
        " Becker",
        "which surname comes back: the one seen after the name before (induction)",
    ),
    (
        "when mary and john went to the store john gave a drink to",
        "when mary and john went to the store mary gave a drink to",
        " mary",
        " john",
        "who receives the drink: the name not repeated (indirect object)",
    ),
    (
        "john gave mary a book and then john gave mary a",
        "john gave mary a cup and then john gave mary a",
        " book",
        " cup",
        "which word comes back: the one seen after the words before (induction)",
    ),
)


def _known(ckpt: Checkpoint, text: str) -> list[int] | None:
    """A language model's ids of `text` (<s> first), None when the tokenizer does not know one of its words."""
    ids = encode_prefix(ckpt, clean_text(text).text, [])
    return None if ckpt.config.unk_id in ids else ids


def induction_attention(weights: torch.Tensor, ids: Sequence[int]) -> float:
    """How much one head (weights (T, T)) attends as an induction head on a text: the mean, over each token seen
    before, of its weight on the token that followed the earlier occurrence. 0 on a text that repeats nothing."""
    last: dict[int, int] = {}
    picked = []
    for q, token in enumerate(ids):
        if token in last and last[token] + 1 < q:
            picked.append(float(weights[q, last[token] + 1]))
        last[token] = q
    return sum(picked) / len(picked) if picked else 0.0


@torch.inference_mode()
def alignment(ckpt: Checkpoint, text: str) -> dict[str, list[float]]:
    """Each cross-attention head's sharpness on `text`: the mean, over the steps of the model's greedy output, of
    its largest weight on a source token (the end-of-text token left out, where a head rests)."""
    source = torch.tensor([encode_source(ckpt, clean_text(text).text, [])])
    out = generate(ckpt.model, [ckpt.config.bos_id], source, 64).ids
    target = torch.tensor([[ckpt.config.bos_id, *out]])
    _, trace = forward(ckpt.model, target, source_ids=source)
    return {
        name: rec.weights[0, :, :, :-1].max(dim=-1).values.mean(dim=-1).tolist()  # (H,)
        for name, rec in trace.attention.items()
        if name.endswith(".cross_attn")
    }


def opening_head(ckpt: Checkpoint) -> dict[str, Any]:
    """The head that shows most: a translator's sharpest cross-attention head on its first preset; a language
    model's induction head, the one that copies most on ordinary sentences with a repeat (sentences), with the text
    that repeats on which it attends most as one (Explore opens on it). The head the probe of repeated random tokens
    finds is recorded beside it (`probe`): on prose it may rest on `<s>` instead of copying."""
    if ckpt.config.has_cross_attention:
        text = presets(ckpt.card.get("name", ""), ckpt.config.kind, ckpt.card)[0]
        scores = alignment(ckpt, text)
        measure = f"mean largest cross-attention weight on a source token, over the output of {text!r}"
        what = "alignment"
        probe = None
    else:
        report = induction_probe(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)
        probe = report
        scores, measure = sentences(ckpt)
        if scores is None:
            scores = report.induction
            measure = f"induction score on <s> + {report.length} random tokens, repeated once"
        what = "induction"
    sublayer, head = max(
        ((b, h) for b, row in scores.items() for h in range(len(row))), key=lambda k: scores[k[0]][k[1]]
    )
    first = next(iter(scores))
    record: dict[str, Any] = {
        SUBLAYER_KEY: sublayer,
        "head": head + 1,
        "what": what,
        "score": round(scores[sublayer][head], ROUND),
        "first_head_score": round(scores[first][0], ROUND),  # layer 1, head 1 of the same attention: the old default
        "measure": measure,
    }
    if probe is not None:
        p_sublayer, p_head, p_score = probe.best(probe.induction)
        record["probe"] = {
            SUBLAYER_KEY: p_sublayer,
            "head": p_head + 1,
            "score": round(p_score, ROUND),
            "score_of_head": round(probe.induction[sublayer][head], ROUND),  # the chosen head's own probe score
            "sentence_score": round(scores[p_sublayer][p_head], ROUND),
            "sink": round(sink(ckpt, p_sublayer, p_head), ROUND),
            "measure": f"induction score on <s> + {probe.length} random tokens, repeated once",
        }
    if what == "induction" and (found := repeating_text(ckpt, sublayer, head)) is not None:
        record |= {"text": found[0], "text_score": round(found[1], ROUND)}  # where Explore opens
    return record


def _sentence_ids(ckpt: Checkpoint) -> list[list[int]]:
    """The ids of the SENTENCES the model's tokenizer reads whole and that repeat; where it reads fewer than
    FEWEST_SENTENCES of them (a vocabulary of a few hundred words), its REPEATED texts and presets that repeat too."""
    found = [ids for s in SENTENCES if (ids := _known(ckpt, s)) is not None and second_copy(ids)]
    if len(found) < FEWEST_SENTENCES:
        found += [ids for s in _candidates(ckpt) if (ids := _known(ckpt, s)) is not None and second_copy(ids)]
    return found


@torch.inference_mode()
def sentences(ckpt: Checkpoint) -> tuple[dict[str, list[float]] | None, str]:
    """Each self-attention head's induction score on sentences a class types (analysis.induction.sentence_scores,
    the mean over _sentence_ids), and the measure said in words; None where no text repeats."""
    texts = _sentence_ids(ckpt)
    if not texts:
        return None, ""
    sums: dict[str, Any] = {}
    for ids in texts:
        _, trace = forward(ckpt.model, torch.tensor([ids]))
        for name, rec in trace.attention.items():
            if name.endswith(".self_attn"):
                sums[name] = sums.get(name, 0) + sentence_scores(rec.weights[0].float().numpy(), ids)
    scores = {name: (total / len(texts)).tolist() for name, total in sums.items()}
    measure = (
        f"mean weight on the token after the earlier copy, over the second copy of {len(texts)} "
        f"sentence{'s' * (len(texts) > 1)} with a repeat (analysis.induction.SENTENCES; REPEATED and the presets "
        "where the tokenizer reads few of them)"
    )
    return scores, measure


@torch.inference_mode()
def sink(ckpt: Checkpoint, sublayer: str, head: int) -> float:
    """How much head `head` (0-based) of `sublayer` rests on `<s>` (position 0) over the second copy of the sentences
    (the queries sentence_scores reads): the attention sink, where a head with nothing to do puts its weight."""
    rested = []
    for ids in _sentence_ids(ckpt):
        _, trace = forward(ckpt.model, torch.tensor([ids]))
        weights = trace.attention[sublayer].weights[0, head].float().numpy()
        rested.extend(float(weights[q, 0]) for q, _ in second_copy(ids))
    return sum(rested) / len(rested) if rested else 0.0


@torch.inference_mode()
def repeating_text(ckpt: Checkpoint, sublayer: str, head: int) -> tuple[str, float] | None:
    """Of a language model's presets and REPEATED, the text on which head `head` (0-based) of `sublayer` attends most
    as an induction head, and that attention: Explore opens on it, so that the first view shows the pattern the
    head was chosen for. None when no text repeats a token the head can look back to."""
    scored = []
    for text in _candidates(ckpt):
        ids = _known(ckpt, text)
        _, trace = forward(ckpt.model, torch.tensor([ids]))
        scored.append((induction_attention(trace.attention[sublayer].weights[0, head], ids), text))
    score, text = max(scored, key=lambda s: s[0], default=(0.0, ""))  # the first of equal scores
    return (text, score) if score > 0 else None


def _candidates(ckpt: Checkpoint) -> list[str]:
    own = list(presets(ckpt.card.get("name", ""), ckpt.config.kind, ckpt.card))
    if ckpt.config.has_encoder:
        return own
    return [t for t in dict.fromkeys([*own, *REPEATED]) if _known(ckpt, t)]


def shows(kl: float, before: str, after: str) -> bool:
    """Whether an ablation shows on the page: the prediction moves by KL_SHOWN or more, or its top guess changes."""
    return kl >= KL_SHOWN or before != after


def ablation_text(ckpt: Checkpoint, sublayer: str, head: int) -> dict[str, Any]:
    """Of the model's presets (and, for a language model, texts that repeat), the one where switching head `head`
    (0-based) of `sublayer` off moves the prediction most (KL intact ‖ ablated). Where that head shows on none, the
    head and text that move it most of all (analysis.ablation's exact ranking on each text); where no one head shows
    (a model that spreads its work over its heads), every head of the attention layer that moves it most when all
    are switched off together, listed under `heads`."""
    texts = _candidates(ckpt)
    effects = [(ablation_effect(ckpt, text, {sublayer: (head,)}), text) for text in texts]
    effect, text = max(effects, key=lambda e: e[0].kl)
    heads: tuple[int, ...] = (head,)
    if not shows(effect.kl, effect.before_top[0].piece, effect.after_top[0].piece):
        ranked = [(kl, t, b, h) for t in texts for b, h, kl in head_importance(ckpt, t)]
        _, text, sublayer, head = max(ranked, key=lambda r: r[0])
        effect, heads = ablation_effect(ckpt, text, {sublayer: (head,)}), (head,)
        if not shows(effect.kl, effect.before_top[0].piece, effect.after_top[0].piece):
            layers: dict[str, set[int]] = {}
            for _, _, b, h in ranked:
                layers.setdefault(b, set()).add(h)
            effect, text, sublayer, heads = whole_layer(ckpt, texts, layers)
    before, after = effect.before_top[0].piece, effect.after_top[0].piece
    record = {
        SUBLAYER_KEY: sublayer,
        "head": heads[0] + 1,
        "text": text,
        "kl": round(effect.kl, ROUND),
        "top_before": before,
        "top_after": after,
        "shows": shows(effect.kl, before, after),
    }
    return record | ({"heads": [h + 1 for h in heads]} if len(heads) > 1 else {})


def whole_layer(ckpt: Checkpoint, texts: Sequence[str], layers: dict[str, set[int]]) -> tuple[Any, str, str, tuple]:
    """Of every attention layer's heads (`layers`: sub-layer name → its heads, 0-based) switched off together, on each
    text: the (effect, text, sub-layer, heads) that moves the prediction most (the first of equal ones)."""
    tried = []
    for text in texts:
        for name, heads in layers.items():
            chosen = tuple(sorted(heads))
            tried.append((ablation_effect(ckpt, text, {name: chosen}), text, name, chosen))
    return max(tried, key=lambda t: t[0].kl)


def _first_piece(ckpt: Checkpoint, text: str, word: str) -> int | None:
    """The id of the first token `word` adds after `text` (None where the tokenizer splits `text` otherwise)."""
    head, whole = _known(ckpt, text), _known(ckpt, text + word)
    if head is None or whole is None or whole[: len(head)] != head or len(whole) == len(head):
        return None
    return whole[len(head)]


def patching_pairs(ckpt: Checkpoint) -> list[dict[str, Any]]:
    """Each of PAIRS the model can read, with the logit difference answer − versus on either text and whether the
    model answers it (the difference changes sign between them: each text gets its own answer). None for a model
    patching cannot pair (a translator)."""
    if ckpt.config.has_encoder:
        return []
    tried = []
    for first, second, answer, versus, question in PAIRS:
        a, v = _first_piece(ckpt, first, answer), _first_piece(ckpt, second, versus)
        if a is None or v is None or a == v:
            continue
        try:
            runs = prepare(ckpt, first, second, a, v)
        except PairError:
            continue
        pieces = ckpt.tokenizer.pieces([a, v])
        tried.append(
            {
                "first": first,
                "second": second,
                "answer": pieces[0],
                "versus": pieces[1],
                "answer_id": a,
                "versus_id": v,
                "question": question,
                "first_difference": round(runs.clean, ROUND),
                "second_difference": round(runs.corrupted, ROUND),
                "answered": runs.clean > 0 > runs.corrupted,
            }
        )
    return tried


@torch.inference_mode()
def forming(ckpt: Checkpoint, sublayer: str, head: int, text: str) -> dict[str, Any] | None:
    """Whether head `head` (0-based) of a language model's `sublayer` is seen forming on `text`: its induction
    attention there at the first and the last training snapshot. None without snapshots or for a translator."""
    saved = list_snapshots(ckpt.path) if ckpt.path else []
    if ckpt.config.has_encoder or len(saved) < 2:
        return None
    ids = _known(ckpt, text)
    scores = []
    for snapshot in (saved[0], saved[-1]):
        model = load_snapshot(ckpt, snapshot.step) if snapshot.file else ckpt
        _, trace = forward(model.model, torch.tensor([ids]))
        scores.append(induction_attention(trace.attention[sublayer].weights[0, head], ids))
    return {
        "text": text,
        "first_step": saved[0].step,
        "last_step": saved[-1].step,
        "first_score": round(scores[0], ROUND),
        "last_score": round(scores[1], ROUND),
    }


def decoding(card: dict[str, Any]) -> dict[str, Any] | None:
    """How the app decodes an encoder-decoder's own output: beam 4 where the card's evaluation (`python -m atlas
    evaluate`, run first) measured it better than greedy decoding on the everyday test set in both BLEU and chrF,
    else greedy (beam 1); None without such figures (a model that is not a translator, or not evaluated)."""
    metrics = card.get("metrics")
    sets = metrics.get("test_sets") if isinstance(metrics, dict) else None
    everyday = sets.get("everyday") if isinstance(sets, dict) else None
    if not isinstance(everyday, dict) or not all(isinstance(everyday.get(k), dict) for k in ("greedy", "beam4")):
        return None
    greedy, beam = everyday["greedy"], everyday["beam4"]
    try:
        better = beam["bleu"] > greedy["bleu"] and beam["chrf"] > greedy["chrf"]
    except (KeyError, TypeError):
        return None
    return {"beam": 4 if better else 1, "measure": "metrics.test_sets.everyday: BLEU and chrF, greedy and beam4"}


def measure(ckpt: Checkpoint) -> dict[str, Any]:
    """Every default of `ckpt`, as the card records it under `defaults`."""
    head = opening_head(ckpt)
    sublayer, index = head[SUBLAYER_KEY], head["head"] - 1
    ablation = ablation_text(ckpt, sublayer, index)
    record: dict[str, Any] = {"command": "python -m atlas defaults CHECKPOINT", "head": head, "ablation": ablation}
    if pairs := patching_pairs(ckpt):  # Compare opens on the first the model answers, else the first it reads
        record["compare"] = next((p for p in pairs if p["answered"]), pairs[0])
        record["compare_tried"] = pairs
    if (steps := forming(ckpt, sublayer, index, ablation["text"])) is not None:
        record["training"] = steps
    if ckpt.config.has_cross_attention and (chosen := decoding(ckpt.card)) is not None:
        record["decoding"] = chosen
    return record

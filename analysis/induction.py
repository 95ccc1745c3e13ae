"""Induction and previous-token heads, measured as Olsson et al. (2022) and TransformerLens's head detectors do.

The probe is a sequence of random tokens repeated: `<s>` R R, R of `length` tokens drawn uniformly from the
vocabulary's ordinary pieces. Nothing in R can be predicted on its first reading; on the second, a model that
copies from its context can predict every token from its earlier occurrence. An induction head, at a token of
the second copy, attends to the token that followed that token's first occurrence (`length - 1` places back);
a previous-token head attends to the token just before the query.

- induction score of a head: its mean weight on position t - length + 1, over the queries t of the second copy;
- previous-token score: its mean weight on position t - 1, over the queries t of both copies;
- copy loss: the model's mean loss (nats) predicting the tokens of the first copy, and of the second.

The same score on a sentence a person types (`second_copy`, `sentence_scores`): the queries of its second copy are the
tokens that, with the token before them, repeat an earlier pair, and the target of each is the token that followed
that earlier copy. A head may score high on random tokens and rest on `<s>` on prose, so the app names the induction
head by this measure, over SENTENCES (analysis.defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from inference.catalog import SUBLAYER_KEY
from model.forward import forward
from model.names import sublayer_layer

PROBE_LENGTH = 50  # TransformerLens's induction-head tutorial repeats 50 random tokens
PROBE_SEED = 0
PROBE_BATCH = 4  # the scores average over this many probes, so one unlucky draw does not decide them

# Ordinary sentences with a repeat, as a class types them: the app's induction head is the head that copies on
# these (sentence_scores), not only on random tokens.
SENTENCES = (
    "The old man went to the river and the old man went",
    "My sister has a red bike and a blue kite. My sister has a red",
    "We walked to the park after school. We walked to the park",
    "The little dog ran across the garden. The little dog ran across the",
    "Tom likes green apples and warm bread. Tom likes green apples and warm",
    "She opened the door and saw a big box. She opened the door and saw a big",
    "On Monday we play football with our friends. On Monday we play football with our",
    "The teacher read a story about a brave bird. The teacher read a story about a brave",
    "Grandma baked a cake for the party. Grandma baked a cake for the",
    "The boat sailed past the lighthouse at night. The boat sailed past the lighthouse at",
)


@dataclass(frozen=True)
class InductionReport:
    """Scores of every self-attention head of a decoder, and the copy losses on the probe.

    induction, previous_token: sub-layer name (`decoder.layers.1.self_attn`) → one score per head, in [0, 1].
    first_copy_loss, second_copy_loss: mean next-token loss (nats) over the tokens of each copy of R.
    """

    length: int
    induction: dict[str, list[float]]
    previous_token: dict[str, list[float]]
    first_copy_loss: float
    second_copy_loss: float

    def best(self, scores: dict[str, list[float]]) -> tuple[str, int, float]:
        """The sub-layer, head (0-based) and score of the highest-scoring head."""
        return max(((name, h, s) for name, row in scores.items() for h, s in enumerate(row)), key=lambda x: x[2])

    def summary(self) -> dict[str, object]:
        """What a model card records: the best heads (named 1-based, as the app shows them) and the copy losses."""
        out: dict[str, object] = {"probe": f"<s> + {self.length} random tokens, repeated once"}
        for what, scores in (("induction", self.induction), ("previous_token", self.previous_token)):
            name, head, score = self.best(scores)
            layer = sublayer_layer(name)
            best = {"layer": layer + 1, "head": head + 1, SUBLAYER_KEY: name, "score": round(score, 4)}
            out[f"best_{what}_head"] = best
        out["first_copy_loss"] = round(self.first_copy_loss, 4)
        out["second_copy_loss"] = round(self.second_copy_loss, 4)
        return out


def repeated_tokens(
    vocab_size: int,
    bos_id: int,
    length: int = PROBE_LENGTH,
    batch: int = PROBE_BATCH,
    seed: int = PROBE_SEED,
    first_ordinary: int = 4,
) -> Tensor:
    """(batch, 1 + 2·length) ids: `<s>`, then `length` random ids from [first_ordinary, vocab_size), repeated.

    The first ids of our vocabularies are the special pieces (pad, unk, s, /s), which a text never holds inside."""
    if vocab_size - first_ordinary < 2:
        raise ValueError(f"a vocabulary of {vocab_size} has too few ordinary tokens to draw a probe from")
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(first_ordinary, vocab_size, (batch, length), generator=generator)  # (B, L)
    bos = torch.full((batch, 1), bos_id, dtype=half.dtype)
    return torch.cat([bos, half, half], dim=1)  # (B, 1 + 2L)


def head_scores(weights: Tensor, length: int) -> tuple[list[float], list[float]]:
    """Induction and previous-token score of each head from one sub-layer's weights (B, H, T, T) on a probe.

    Position 0 is `<s>`; the first copy fills 1..length, the second length+1..2·length."""
    t = torch.arange(length + 1, 2 * length + 1)  # queries of the second copy
    induction = weights[:, :, t, t - length + 1].mean(dim=(0, 2))  # (H,)
    q = torch.arange(2, 2 * length + 1)  # every query with a real token before it
    previous = weights[:, :, q, q - 1].mean(dim=(0, 2))  # (H,)
    return induction.tolist(), previous.tolist()


def second_copy(tokens: Sequence[object]) -> list[tuple[int, int]]:
    """(query, target) of each token of a text's second copy: query q repeats, with the token before it, an earlier
    pair (tokens[j - 1], tokens[j]) with j < q - 1, and its target is j + 1, the token that followed that copy (the
    latest such j). Empty for a text that repeats no two tokens in a row. Only equality of tokens is read."""
    pairs, last = [], {}
    for q in range(1, len(tokens)):
        pair = (tokens[q - 1], tokens[q])
        if pair in last and last[pair] + 1 < q:
            pairs.append((q, last[pair] + 1))
        last[pair] = q
    return pairs


def sentence_scores(weights: np.ndarray, tokens: Sequence[object]) -> np.ndarray:
    """(..., H) each head's induction score on one text: its mean weight on the target over the queries of the
    text's second copy (second_copy), from weights (..., H, T, T); zeros where the text repeats nothing."""
    pairs = second_copy(tokens)
    if not pairs:
        return np.zeros(weights.shape[:-2], dtype=np.float32)
    q, k = (np.asarray(x) for x in zip(*pairs, strict=True))
    return np.asarray(weights[..., q, k].mean(axis=-1), dtype=np.float32)


def copy_losses(logits: Tensor, ids: Tensor, length: int) -> tuple[float, float]:
    """Mean loss (nats) predicting the first copy's tokens 2..length and the second copy's tokens (all of them
    but its first, which follows the first copy's last token and is no more predictable than any other)."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, T-1, V): position i predicts token i + 1
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    first = nll[:, 1:length].mean()  # targets at positions 2..length
    second = nll[:, length + 1 : 2 * length].mean()  # targets at positions length+2..2·length
    return float(first), float(second)


@torch.inference_mode()
def measure(model: torch.nn.Module, vocab_size: int, bos_id: int, length: int = PROBE_LENGTH) -> InductionReport:
    """Run a decoder-only model on the probe and score every self-attention head. The run is shortened to fit a
    model that holds fewer than 1 + 2·length positions.

    The model runs as every model of ours does, through model.forward.forward → (logits, trace)."""
    max_len = getattr(getattr(model, "config", None), "max_len", None)
    if max_len is not None:
        length = min(length, (max_len - 1) // 2)
    if length < 2:
        raise ValueError(f"a model of {max_len} positions cannot hold a repeated run")
    ids = repeated_tokens(vocab_size, bos_id, length)
    device = next(model.parameters()).device
    logits, trace = forward(model, ids.to(device))
    induction, previous = {}, {}
    for name, record in trace.attention.items():
        if name.endswith(".self_attn") and record.weights is not None:
            induction[name], previous[name] = head_scores(record.weights.float().cpu(), length)
    if not induction:
        raise ValueError("the model recorded no self-attention weights: is it a decoder-only model?")
    first, second = copy_losses(logits.cpu(), ids, length)
    return InductionReport(length, induction, previous, first, second)

"""Head detectors: how much of each head's attention follows a pattern, over one text or many (TransformerLens's
`head_detector.detect_head`, its "mul" measure).

A pattern is a (T, T) array over one text's query × key positions: 1 where the pattern says to look. A head's score
on a text is Σ_ij A_ij P_ij / Σ_ij A_ij — the share of its attention that falls where the pattern points (1: all
of it, 0: none) — taken over the queries that may attend somewhere; over many texts, the mean of the texts'
scores. Patterns by name, for a sub-layer's own queries and keys (self-attention only):

- `previous token`: query i → key i − 1;
- `first token`: query i → key 1 (a language model's `<s>`);
- `current token`: query i → key i (the diagonal);
- `same token`: query i → an earlier key holding the same token (duplicate-token heads);
- `induction`: query i → the key just after an earlier copy of token i (Olsson et al. 2022).

Numpy only: it reads Analysis records, so it scores attention imported from elsewhere as well as our models'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from analysis.record import Analysis

PATTERNS = ("previous token", "first token", "current token", "same token", "induction")


def pattern_for(name: str, tokens: Sequence[object]) -> np.ndarray:
    """The (T, T) pattern `name` (one of PATTERNS) for a text of `tokens` (ids or pieces: only equality is read)."""
    n = len(tokens)
    pattern = np.zeros((n, n), dtype=np.float32)
    if name == "previous token":
        pattern[np.arange(1, n), np.arange(n - 1)] = 1.0
    elif name == "first token":
        pattern[:, 0] = 1.0
    elif name == "current token":
        pattern[np.arange(n), np.arange(n)] = 1.0
    elif name in ("same token", "induction"):
        shift = 1 if name == "induction" else 0
        for i in range(n):
            for j in range(i):  # an earlier copy of token i at j; induction looks one further, at j + 1 (≤ i)
                if tokens[j] == tokens[i] and j + shift <= i:
                    pattern[i, j + shift] = 1.0
    else:
        raise ValueError(f"pattern is one of {', '.join(map(repr, PATTERNS))} or a (T, T) array, not {name!r}")
    return pattern


def _score(weights: np.ndarray, mask: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """(H,) the share of each head's attention on the pattern, over the queries that may attend somewhere."""
    rows = mask.any(axis=-1)  # (Tq,)
    attention = weights[:, rows]  # (H, rows, Tk)
    total = attention.sum(axis=(1, 2))
    hits = (attention * pattern[rows][None]).sum(axis=(1, 2))
    return np.divide(hits, total, out=np.zeros_like(hits), where=total > 0)


def detect(
    analyses: Iterable[Analysis], pattern: str | np.ndarray | Callable[[list[str]], object]
) -> dict[str, np.ndarray]:
    """Self-attention type (`decoder.self_attn`, `encoder.self_attn`) → (L, H) scores of every head for `pattern`
    (a name of PATTERNS, one (T, T) array that fits every text, or a function of a text's pieces that returns its
    (T, T) array: a custom pattern, as a corpus run takes it), the mean over `analyses`. Read one at a time: a
    generator of analyses holds one text's attention at once, however many texts."""
    sums: dict[str, np.ndarray] = {}
    count = 0
    for analysis in analyses:
        count += 1
        for attention in analysis.attentions:
            if not attention.endswith("self_attn"):
                continue  # a pattern over one text's positions: cross-attention reads another text
            stacked = [analysis.sublayer(attention, layer) for layer in analysis.layers(attention)]
            first = stacked[0]
            tokens = first.query_pieces if not analysis.target_ids or first.stack == "encoder" else analysis.target_ids
            if isinstance(pattern, str):
                chosen = pattern_for(pattern, tokens)
            else:
                chosen = np.asarray(pattern(list(first.query_pieces)) if callable(pattern) else pattern, np.float32)
                if chosen.shape != first.weights.shape[1:]:
                    raise ValueError(
                        f"the pattern is {' × '.join(map(str, chosen.shape)) or 'one number'} but the text "
                        f"{analysis.text!r} has "
                        f"{first.weights.shape[1]} × {first.weights.shape[2]} positions: give a pattern that fits "
                        "each text, or a pattern's name"
                    )
            scores = np.stack([_score(b.weights, b.mask, chosen) for b in stacked])
            sums[attention] = sums.get(attention, 0) + scores
    if not count:
        raise ValueError("no text to score the heads on: give at least one")
    return {attention: total / count for attention, total in sums.items()}

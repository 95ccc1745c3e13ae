"""Two models on one text, head by head: how far each head's attention moved from one model to the other (a base
and its fine-tune, a model and its 4-bit copy, two seeds of one recipe).

Both analyses must read the same tokens (the models share a tokenizer, and a translator's decoder is fed the same
output) and have the same attentions, layers and heads, so that head h of layer l of one is head h of layer l of
the other. For each head, over its real queries (a query's row of weights is a probability distribution over the
keys it may see, and every query sees at least one):

- **total variation**: ½ Σ_k |a_k − b_k| of a query's two rows, averaged over the queries: 0 when the head attends
  alike in both, 1 when the two rows share no key;
- **largest change**: the largest |a_k − b_k| of any query and key;
- **where it moved most**: the query (from 1) whose rows differ most by total variation.

Numpy only, on the pages' Analysis; nothing runs a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.record import Analysis


class LayoutError(ValueError):
    """The two analyses cannot be matched head by head: other tokens, attentions, layers or heads."""


@dataclass(frozen=True)
class HeadDiff:
    """One head's change: its attention (`decoder.self_attn` …), layer and head (0-based), the mean total
    variation, the largest change of one weight, and the query (0-based) whose rows moved most."""

    attention: str
    layer: int
    head: int
    total_variation: float
    largest: float
    query: int


def check_layout(first: Analysis, second: Analysis) -> None:
    """LayoutError, in one line naming the difference, unless the two analyses match head by head."""
    if first.attentions != second.attentions:
        raise LayoutError(
            f"the two models have other attentions ({', '.join(first.attentions)} and {', '.join(second.attentions)})"
        )
    for attention in first.attentions:
        ours, theirs = first.layers(attention), second.layers(attention)
        label = first.attention_label(attention).lower()
        if len(ours) != len(theirs):
            raise LayoutError(f"{label}: {len(ours)} layers in the first model, {len(theirs)} in the second")
        a, b = first.sublayer(attention, ours[0]), second.sublayer(attention, theirs[0])
        if a.n_heads != b.n_heads:
            raise LayoutError(f"{label}: {a.n_heads} heads a layer in the first model, {b.n_heads} in the second")
        if tuple(a.query_pieces) != tuple(b.query_pieces) or tuple(a.key_pieces) != tuple(b.key_pieces):
            raise LayoutError(
                f"the two models read the text as other tokens ({len(a.key_pieces)} and {len(b.key_pieces)} in the "
                f"{label}): head-by-head differences need models that share a tokenizer"
            )


def head_differences(first: Analysis, second: Analysis) -> list[HeadDiff]:
    """Every head's change from `first` to `second` (the module's docstring), attention by attention, layer by
    layer, head by head; LayoutError when they cannot be matched."""
    check_layout(first, second)
    found = []
    for attention in first.attentions:
        for layer, (ours, theirs) in enumerate(zip(first.layers(attention), second.layers(attention), strict=True)):
            a, b = first.sublayer(attention, ours), second.sublayer(attention, theirs)
            delta = np.abs(a.weights.astype(np.float64) - b.weights.astype(np.float64))  # (H, Tq, Tk)
            rows = 0.5 * delta.sum(axis=-1)  # (H, Tq): every query sees some key (itself, or the source)
            for head in range(a.n_heads):
                found.append(
                    HeadDiff(
                        attention,
                        layer,
                        head,
                        float(rows[head].mean()) if rows.shape[1] else 0.0,
                        float(delta[head].max()) if delta[head].size else 0.0,
                        int(rows[head].argmax()) if rows.shape[1] else 0,
                    )
                )
    return found


def grids(found: list[HeadDiff]) -> dict[str, np.ndarray]:
    """attention → (layers, heads) of the total variation, for a layer × head heatmap."""
    out: dict[str, np.ndarray] = {}
    for attention in dict.fromkeys(d.attention for d in found):
        mine = [d for d in found if d.attention == attention]
        grid = np.zeros((max(d.layer for d in mine) + 1, max(d.head for d in mine) + 1))
        for d in mine:
            grid[d.layer, d.head] = d.total_variation
        out[attention] = grid
    return out

"""Tables for the predictions beside the heatmaps (top-k next tokens per position or per generated step), and the
heads ranked by what switching each off changes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.record import Analysis
from model.names import parse_sublayer_name
from viz.labels import display_piece, indexed_labels


def position_labels(analysis: Analysis) -> list[str]:
    """`i:piece` for every decoder position (the positions a prediction is made after)."""
    return indexed_labels(analysis.target_pieces)


def top_k_frame(analysis: Analysis, position: int) -> pd.DataFrame:
    """Top-k next tokens after decoder position `position` (negative counts from the end): rank, token, id, p."""
    n = len(analysis.predictions)
    if not -n <= position < n:
        raise ValueError(f"position {position} is outside the {n} decoder positions")
    rows = analysis.predictions[position]
    return pd.DataFrame(
        {
            "rank": range(1, len(rows) + 1),
            "token": [display_piece(p.piece) for p in rows],
            "id": [p.id for p in rows],
            "probability": [p.prob for p in rows],
        }
    )


def generation_frame(analysis: Analysis) -> pd.DataFrame:
    """Encoder-decoder: per decoding step, the token fed in, the token that came next, and the model's top-k there
    in one cell ("▁Die 93% · ▁Das 3% · …"), so the table stays four columns wide beside a heatmap.

    Step i's distribution is the model's guess for decoder token i + 1 (the last step's guess is usually `</s>`).
    """
    pieces = analysis.target_pieces
    data: dict[str, list] = {"step": [], "input": [], "next": [], "top guesses": []}
    for i, top in enumerate(analysis.predictions):
        data["step"].append(i + 1)  # counted from 1, as every label a person reads
        data["input"].append(display_piece(pieces[i]))
        data["next"].append(display_piece(pieces[i + 1]) if i + 1 < len(pieces) else "(end)")
        data["top guesses"].append(" · ".join(f"{display_piece(p.piece)} {p.prob:.0%}" for p in top))
    return pd.DataFrame(data)


def encoder_frame(analysis: Analysis) -> pd.DataFrame:
    """Encoder-only: per input position, its token and the top-k tokens its output scores highest (what those
    scores mean depends on the checkpoint: a masked-LM head's guess, or the nearest token embeddings)."""
    pieces = analysis.prediction_pieces
    k = max((len(p) for p in analysis.predictions), default=0)
    data: dict[str, list] = {"position": [], "token": []}
    for rank in range(1, k + 1):
        data[f"top {rank}"] = []
    for i, top in enumerate(analysis.predictions):
        data["position"].append(i + 1)
        data["token"].append(display_piece(pieces[i]))
        for rank in range(k):
            cell = f"{display_piece(top[rank].piece)} ({top[rank].prob:.0%})" if rank < len(top) else ""
            data[f"top {rank + 1}"].append(cell)
    return pd.DataFrame(data)


def ranking_frame(analysis: Analysis, table: list[tuple[str, int, float]], column: str = "KL (nats)") -> pd.DataFrame:
    """(sub-layer name, head, score) rows, the most important first (analysis.ablation.head_importance, or
    rank_by_attribution's approximation), as Head ablation shows them and `atlas.rank_heads` returns them: the
    attention's label, layer and head counted from 1, the score under `column`."""
    rows = []
    for name, head, kl in table:
        stack, layer, type_ = parse_sublayer_name(name)
        rows.append((analysis.attention_label(f"{stack}.{type_}"), layer + 1, head + 1, kl))
    return pd.DataFrame(rows, columns=["attention", "layer", "head", column])


def heads_frame(heads: dict[str, np.ndarray], labels: dict[str, str], column: str) -> pd.DataFrame:
    """attention type → (L, H) one number per head, as one row per head: the attention's label, layer and head
    (from 1), and the number under `column`; the largest first."""
    rows = [
        (labels.get(attention, attention), layer + 1, head + 1, float(matrix[layer, head]))
        for attention, matrix in heads.items()
        for layer in range(matrix.shape[0])
        for head in range(matrix.shape[1])
    ]
    frame = pd.DataFrame(rows, columns=["attention", "layer", "head", column])
    return frame.sort_values(column, ascending=False, kind="stable").reset_index(drop=True)

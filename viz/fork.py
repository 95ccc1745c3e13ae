"""A forked decoding (analysis.fork), as a table: the two continuations side by side, step by step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from viz.labels import display_piece

END = "(end of text)"  # a finished branch's last step: it wrote eos


def _column(pieces: Sequence[str], steps: int) -> list[str | None]:
    shown: list[str | None] = [display_piece(p) for p in pieces]
    return (shown + [END] + [None] * steps)[:steps]


def fork_frame(
    first_step: int,
    greedy_pieces: Sequence[str],
    greedy_probs: np.ndarray,
    forked_pieces: Sequence[str],
    forked_probs: np.ndarray,
) -> pd.DataFrame:
    """One row per step from the fork on (`first_step`: the fork's step, from 1): each branch's token (its readable
    piece; "(end of text)" where it wrote the end; empty after) and the probability the model gave it."""
    steps = max(len(greedy_probs), len(forked_probs))
    pad = lambda p: np.concatenate([p, np.full(steps - len(p), np.nan)])
    return pd.DataFrame(
        {
            "step": range(first_step, first_step + steps),
            "likeliest": _column(greedy_pieces, steps),
            "p (likeliest)": pad(np.asarray(greedy_probs, dtype=float)),
            "forked": _column(forked_pieces, steps),
            "p (forked)": pad(np.asarray(forked_probs, dtype=float)),
        }
    )


PROBABILITIES = ("p (likeliest)", "p (forked)")


def fork_shown(table: pd.DataFrame) -> pd.DataFrame:
    """`fork_frame`'s table as a page shows it: the cells after a branch ended blank, where the grid writes "None"
    for a missing value (whatever a Styler's na_rep says), so the probabilities become text, to three places."""
    shown = table.copy()
    for column in ("likeliest", "forked"):
        shown[column] = [piece if isinstance(piece, str) else "" for piece in table[column]]
    for column in PROBABILITIES:
        shown[column] = ["" if np.isnan(p) else f"{p:.3f}" for p in table[column]]
    return shown

"""A model's guess at one token: what decoding ranks (`inference.decoding.top_k`) and the Analysis record keeps.
Plain data, so that the record (analysis/record.py) stays free of torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    """One candidate token and its probability, as `inference.decoding.top_k` ranks them: a next-token guess, or
    what an encoder-only model's output scores highest."""

    piece: str
    id: int
    prob: float

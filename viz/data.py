"""An analysed input as plain data (numpy arrays, strings): what the pages show, cacheable and picklable."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference.analyze import Analysis
from inference.checkpoint import Checkpoint
from model.trace import BlockName

GROUP_LABELS = {
    "encoder.self": "Encoder self-attention",
    "decoder.self": "Decoder self-attention (masked)",
    "decoder.cross": "Cross-attention (decoder → encoder)",
}
LM_GROUP_LABELS = {"decoder.self": "Self-attention (masked)"}


@dataclass(frozen=True)
class Block:
    """One attention block of one input. Arrays are float32 of shape (H, Tq, Tk) or (H, T, d_head)."""

    name: str
    group: str  # "encoder.self", "decoder.self" or "decoder.cross"
    layer: int
    weights: np.ndarray
    scores: np.ndarray  # QKᵀ/√d_head before the mask
    mask: np.ndarray  # (Tq, Tk) bool, True = may attend
    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    query_pieces: tuple[str, ...]
    key_pieces: tuple[str, ...]

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[0])


@dataclass(frozen=True)
class Prediction:
    """One candidate next token."""

    piece: str
    id: int
    prob: float


@dataclass(frozen=True)
class TraceData:
    """Everything one run of the model on one text gives the pages."""

    checkpoint: str
    kind: str
    text: str
    source_pieces: tuple[str, ...] | None
    target_pieces: tuple[str, ...]
    blocks: dict[str, Block]
    predictions: tuple[tuple[Prediction, ...], ...]  # per decoder position: its next-token top k
    output_text: str | None
    notes: tuple[str, ...]
    positional: dict[str, np.ndarray]  # "encoder"/"decoder" → (T, d_model) rows used

    @property
    def groups(self) -> list[str]:
        """Attention groups present, in model order."""
        return list(dict.fromkeys(b.group for b in self.blocks.values()))

    def group_label(self, group: str) -> str:
        labels = LM_GROUP_LABELS if self.kind == "decoder-only" else GROUP_LABELS
        return labels.get(group, group)

    def layers(self, group: str) -> list[int]:
        return [b.layer for b in self.blocks.values() if b.group == group]

    def block(self, group: str, layer: int) -> Block:
        for b in self.blocks.values():
            if b.group == group and b.layer == layer:
                return b
        raise KeyError(f"no {group} block in layer {layer}")

    def stacked(self, group: str) -> np.ndarray:
        """Weights of every layer of a group: (L, H, Tq, Tk)."""
        chosen = [b.weights for b in self.blocks.values() if b.group == group]
        if not chosen:
            raise KeyError(f"no {group} blocks in this trace")
        return np.stack(chosen)


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy()


def from_analysis(ckpt: Checkpoint, analysis: Analysis) -> TraceData:
    """Copy the batch-of-one trace into plain arrays, with each block's query and key pieces."""
    target = tuple(analysis.target_pieces)
    source = tuple(analysis.source_pieces) if analysis.source_pieces is not None else None
    blocks = {}
    for name, rec in analysis.trace.attention.items():
        parsed = BlockName.parse(name)
        queries = source if parsed.stack == "encoder" else target
        keys = source if parsed.stack == "encoder" or parsed.type == "cross" else target
        assert queries is not None and keys is not None
        blocks[name] = Block(
            name=name,
            group=f"{parsed.stack}.{parsed.type}",
            layer=parsed.layer,
            weights=_np(rec.weights[0]).astype(np.float32),
            scores=_np(rec.scores[0]).astype(np.float32),
            mask=_np(rec.mask[0]).astype(bool),
            queries=_np(rec.queries[0]).astype(np.float32),
            keys=_np(rec.keys[0]).astype(np.float32),
            values=_np(rec.values[0]).astype(np.float32),
            query_pieces=queries,
            key_pieces=keys,
        )
    pieces = ckpt.tokenizer.pieces
    predictions = tuple(tuple(Prediction(pieces([t.id])[0], t.id, t.prob) for t in top) for top in analysis.predictions)
    return TraceData(
        checkpoint=analysis.checkpoint,
        kind=analysis.kind,
        text=analysis.text,
        source_pieces=source,
        target_pieces=target,
        blocks=blocks,
        predictions=predictions,
        output_text=analysis.output_text,
        notes=analysis.notes,
        positional={k: _np(v).astype(np.float32) for k, v in analysis.trace.positional.items()},
    )

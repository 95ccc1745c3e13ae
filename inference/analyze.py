"""From text to what the app, the export and the CLI show: one `Analysis` per (checkpoint, text).

Everything that needs the model or the tokenizer happens here; what comes out is numpy and strings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from inference.analysis import Analysis, BatchMasks, Block, Prediction, query_key_pieces
from inference.checkpoint import Checkpoint
from inference.decoding import generate, top_k
from inference.text import InputError, clean_text, encode_first_stack, encode_prefix, encode_source
from model.attention import attention_mask, padding_mask
from model.trace import Trace
from model.transformer import EncoderDecoder


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _blocks(trace: Trace, source: tuple[str, ...] | None, target: tuple[str, ...]) -> dict[str, Block]:
    """The batch-of-one trace as numpy blocks, each with its query and key pieces."""
    blocks = {}
    for name, rec in trace.attention.items():
        queries, keys = query_key_pieces(name, source, target)
        blocks[name] = Block(
            name=name,
            query_pieces=queries,
            key_pieces=keys,
            scores=_np(rec.scores[0]).astype(np.float32),
            mask=_np(rec.mask[0]).astype(bool),
            weights=_np(rec.weights[0]).astype(np.float32),
            values=_np(rec.values[0]).astype(np.float32),
        )
    return blocks


@torch.inference_mode()
def analyze(ckpt: Checkpoint, text: str, target: str | None = None, k: int = 5, max_tokens: int = 64) -> Analysis:
    """Clean and tokenize `text`, run the model once with every head recorded, and return the Analysis.

    Encoder-decoder: `target` is the decoder's text; without it the model's own greedy output is used.
    Raises InputError when the text cannot be analysed.
    """
    cleaned = clean_text(text)
    notes = list(cleaned.notes)
    tok, cfg = ckpt.tokenizer, ckpt.config
    source_ids = None
    output_text = None
    if isinstance(ckpt.model, EncoderDecoder):
        source_ids = encode_source(ckpt, cleaned.text, notes)
        if target is None:
            out = generate(ckpt.model, [cfg.bos_id], torch.tensor([source_ids]), max_tokens=max_tokens).ids
            target_ids = [cfg.bos_id] + out
        else:
            target_ids = encode_prefix(ckpt, clean_text(target).text, notes)
        output_text = tok.decode(target_ids)
        logits, trace = ckpt.model(torch.tensor([source_ids]), torch.tensor([target_ids]))
    else:
        target_ids = encode_prefix(ckpt, cleaned.text, notes)
        logits, trace = ckpt.model(torch.tensor([target_ids]))
    all_ids = target_ids + (source_ids or [])
    unknown = tuple(sorted({p for i, p in zip(all_ids, tok.pieces(all_ids)) if i == cfg.unk_id}))
    if unknown:
        notes.append("Some characters are not in the model's vocabulary and became <unk>.")
    source = tuple(tok.pieces(source_ids)) if source_ids is not None else None
    target_pieces = tuple(tok.pieces(target_ids))
    predictions = tuple(
        tuple(Prediction(tok.pieces([t.id])[0], t.id, t.prob) for t in top) for top in top_k(logits[0], k)
    )
    return Analysis(
        checkpoint=ckpt.name,
        kind=cfg.kind,
        text=cleaned.text,
        source_pieces=source,
        target_pieces=target_pieces,
        target_ids=tuple(target_ids),
        blocks=_blocks(trace, source, target_pieces),
        positional={name: _np(rows).astype(np.float32) for name, rows in trace.positional.items()},
        predictions=predictions,
        output_text=output_text,
        notes=tuple(notes),
        unknown_pieces=unknown,
    )


def generate_text(ckpt: Checkpoint, text: str, max_tokens: int, beam: int = 1) -> str:
    """The translation (encoder-decoder) or the continuation (language model) of `text`."""
    notes: list[str] = []
    cleaned = clean_text(text).text
    cfg = ckpt.config
    if isinstance(ckpt.model, EncoderDecoder):
        source = torch.tensor([encode_source(ckpt, cleaned, notes)])
        result = generate(ckpt.model, [cfg.bos_id], source, max_tokens, beam)
    else:
        prefix = encode_prefix(ckpt, cleaned, notes, reserve=min(max_tokens, cfg.max_len // 2))
        result = generate(ckpt.model, prefix, None, max_tokens, beam)
    return ckpt.tokenizer.decode(result.ids)


def batch_masks(ckpt: Checkpoint, texts: Sequence[str]) -> BatchMasks:
    """Tokenise `texts` as the model's first stack reads them, pad them to one length, and compute the
    padding and attention masks with the model's own functions. Raises InputError for an empty text."""
    cfg = ckpt.config
    notes: list[str] = []
    ids = [encode_first_stack(ckpt, clean_text(text).text, notes) for text in texts]
    length = max(len(row) for row in ids)
    padded = torch.tensor([row + [cfg.pad_id] * (length - len(row)) for row in ids])
    valid = padding_mask(padded, cfg.pad_id)
    causal = not cfg.is_encoder_decoder
    mask = attention_mask(valid, valid, causal=causal)
    pieces = [ckpt.tokenizer.pieces(row.tolist()) for row in padded]
    return BatchMasks("decoder" if causal else "encoder", causal, pieces, _np(valid), _np(mask))


def positional_table(ckpt: Checkpoint) -> np.ndarray:
    """(max_len, d_model) float32: the sinusoidal buffer or the learned parameter, whichever the model has."""
    return _np(ckpt.model.positions.table).astype(np.float32)


def positions_used(ckpt: Checkpoint, text: str) -> int | None:
    """How many positions the text takes in the model's first stack (None if the text is rejected)."""
    try:
        return len(encode_first_stack(ckpt, clean_text(text).text, []))
    except InputError:
        return None

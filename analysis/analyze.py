"""From text to what the app, the export and the CLI show: one `Analysis` per (checkpoint, text).

Everything that needs the model or the tokenizer happens here; what comes out is numpy and strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from analysis.forced import rows_of
from analysis.record import Analysis, BatchMasks, HeadDetail, Sublayer, query_key_pieces
from inference.catalog import decoding_beam
from inference.checkpoint import Checkpoint
from inference.decoding import Sampling, beam_many, decoding_cache, generate, greedy_many, pad_rows, top_k
from inference.text import (
    InputError,
    centre_context,
    clean_text,
    encode_encoder_only,
    encode_first_stack,
    encode_prefix,
    encode_source,
    outside_vocabulary,
    vocabulary_note,
)
from model.attention import attention_mask, padding_mask
from model.forward import forward
from model.names import parse_sublayer_name
from model.trace import Trace
from model.transformer import EncoderDecoder


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def value_norms(model: torch.nn.Module, name: str, values: torch.Tensor) -> torch.Tensor:
    """(B, H, Tk) ‖v_j W_O^h‖ of sub-layer `name`'s values (B, H, Tk, d_head): each key's value vector through its
    head's slice of the output projection, the bias of W_O left out (it is added once, not per key)."""
    stack, layer, type_ = parse_sublayer_name(name)
    layers = getattr(model, stack).layers  # one module applied to every layer in a shared-layers model
    w_o = getattr(layers[0] if len(layers) == 1 else layers[layer], type_).w_o.weight  # (d_model, H·d_head)
    heads, d_head = values.shape[1], values.shape[-1]
    per_head = w_o.reshape(w_o.shape[0], heads, d_head).to(values.dtype)  # (d_model, H, d_head)
    return torch.linalg.vector_norm(torch.einsum("bhkd,mhd->bhkm", values, per_head), dim=-1)


def _sublayers(
    model: torch.nn.Module, trace: Trace, row: int, source: tuple[str, ...] | None, target: tuple[str, ...]
) -> dict[str, Sublayer]:
    """Row `row` of a (possibly padded) batch trace as numpy sub-layers, cut to its own tokens."""
    sublayers = {}
    for name, rec in trace.attention.items():
        queries, keys = query_key_pieces(name, source, target)
        tq, tk = len(queries), len(keys)
        norms = value_norms(model, name, rec.values[row : row + 1, :, :tk])[0]
        sublayers[name] = Sublayer(
            name=name,
            query_pieces=queries,
            key_pieces=keys,
            scores=_np(rec.scores[row, :, :tq, :tk]).astype(np.float32),
            mask=_np(rec.mask[row, :tq, :tk]).astype(bool),
            weights=_np(rec.weights[row, :, :tq, :tk]).astype(np.float32),
            values=_np(rec.values[row, :, :tk]).astype(np.float32),
            value_norms=_np(norms).astype(np.float32),
        )
    return sublayers


@dataclass(frozen=True)
class Request:
    """One text to analyse; `target` is the decoder's text for an encoder-decoder (None: its own output).
    A language model first writes `continuation` tokens after the text (greedy, or `sampling`), and the analysis
    covers the text and what it wrote."""

    text: str
    target: str | None = None
    k: int = 5
    max_tokens: int = 64
    continuation: int = 0
    sampling: Sampling | None = None
    target_ids: tuple[int, ...] | None = None  # the decoder's ids, bos first, used as they are: an encoder-decoder's
    # as an analysis gave them (a second look decodes nothing again), a language model's given instead of `text`


@dataclass
class _Prepared:
    request: Request
    text: str
    notes: list[str]
    source_ids: list[int] | None
    target_ids: list[int] | None  # None: to be decoded
    generated: int = 0  # language model: how many of target_ids it wrote itself, at the end


def _prepare(ckpt: Checkpoint, request: Request) -> _Prepared:
    cleaned = clean_text(request.text)
    notes = list(cleaned.notes)
    if not ckpt.config.has_decoder:
        return _Prepared(request, cleaned.text, notes, encode_encoder_only(ckpt, cleaned.text, notes), [])
    if not ckpt.config.has_cross_attention:  # a language model, which may continue its text
        if not 0 <= request.continuation <= ckpt.config.max_len // 2:
            raise InputError(f"A continuation is 0 to {ckpt.config.max_len // 2} tokens, not {request.continuation}.")
        reserve = request.continuation
        if request.target_ids is not None:  # token ids read as they are: no tokenizer, so no cut (a clear error)
            return _Prepared(request, cleaned.text, notes, None, _given_target(ckpt, request.target_ids, reserve))
        return _Prepared(request, cleaned.text, notes, None, encode_prefix(ckpt, cleaned.text, notes, reserve))
    source = encode_source(ckpt, cleaned.text, notes)
    target = None if request.target is None else encode_prefix(ckpt, clean_text(request.target).text, notes)
    if request.target_ids is not None:
        target = _given_target(ckpt, request.target_ids)
    return _Prepared(request, cleaned.text, notes, source, target)


def _given_target(ckpt: Checkpoint, ids: tuple[int, ...], reserve: int = 0) -> list[int]:
    """The decoder's ids as given (see Request.target_ids), checked: bos first, within the vocabulary and max_len
    (less `reserve` positions kept for a continuation)."""
    cfg = ckpt.config
    most = cfg.max_len - reserve
    if not ids or ids[0] != cfg.bos_id or len(ids) > most or not all(0 <= i < cfg.vocab_size for i in ids):
        raise InputError(
            f"The decoder's ids must start with <s> and be 1 to {most} ids of the vocabulary (0 to "
            f"{cfg.vocab_size - 1}); these are {len(ids)}."
        )
    return list(ids)


@torch.inference_mode()
def analyze_many(ckpt: Checkpoint, requests: Sequence[Request]) -> list[Analysis | InputError]:
    """Analyse several texts with one batched decoding and one batched traced forward pass.

    Each result equals `analyze` of that request alone (padding is masked; tests/test_worker.py); a text that
    cannot be analysed gives its InputError in its place, the others go on.
    """
    results: list[Analysis | InputError | None] = [None] * len(requests)
    ready: list[tuple[int, _Prepared]] = []
    for i, request in enumerate(requests):
        try:
            ready.append((i, _prepare(ckpt, request)))
        except InputError as exc:
            results[i] = exc
    cfg = ckpt.config
    if ready and cfg.has_cross_attention:
        _encode_decode_trace(ckpt, [p for _, p in ready], results, [i for i, _ in ready])
    elif ready and not cfg.has_decoder:  # one pass, every token seeing every other; nothing is written
        logits, trace = forward(ckpt.model, pad_rows([p.source_ids for _, p in ready], cfg.pad_id))
        for row, (i, p) in enumerate(ready):
            results[i] = _analysis(ckpt, p, trace, row, logits[row, : len(p.source_ids)])
    elif ready:
        for _, p in ready:  # the language model writes its continuations first, one text at a time
            if p.request.continuation:
                out = generate(ckpt.model, p.target_ids, None, p.request.continuation, sampling=p.request.sampling)
                p.target_ids, p.generated = p.target_ids + out.ids, len(out.ids)
        logits, trace = forward(ckpt.model, pad_rows([p.target_ids for _, p in ready], cfg.pad_id))
        for row, (i, p) in enumerate(ready):
            results[i] = _analysis(ckpt, p, trace, row, logits[row, : len(p.target_ids)])
    return results  # type: ignore[return-value]


@torch.inference_mode()
def decode_outputs(ckpt: Checkpoint, requests: Sequence[Request]) -> list[tuple[int, ...] | InputError | None]:
    """Encoder-decoder: the output each request's analysis shows, decoded for all of them (greedy in one batch, or
    the card's measured beam; with the cache, nothing traced): `(bos, *ids)` to pass as its `Request.target_ids`
    (the analysis then equals the one that decodes itself); None for a request that gives its target; the InputError of
    one it cannot take.

    The model worker decodes a class's texts together this way and traces them in smaller batches: a traced pass
    holds every head's T × T weights per row, the decoding only its keys and values."""
    cfg = ckpt.config
    out: list[tuple[int, ...] | InputError | None] = [None] * len(requests)
    todo: list[tuple[int, _Prepared]] = []
    for i, request in enumerate(requests):
        if request.target is not None or request.target_ids is not None:
            continue
        try:
            todo.append((i, _prepare(ckpt, request)))
        except InputError as exc:
            out[i] = exc
    if todo:
        for (i, _), ids in zip(todo, _own_outputs(ckpt, [p for _, p in todo])):
            out[i] = (cfg.bos_id, *ids)
    return out


def _own_outputs(
    ckpt: Checkpoint, ready: list[_Prepared], start: tuple[torch.Tensor, Trace] | None = None, skip: Sequence[int] = ()
) -> list[list[int]]:
    """Encoder-decoder: what the model writes for each of `ready`'s sources (at most its request's max_tokens; rows in
    `skip` empty), all rows in one batch with the cache, from `start` (a pass that already fed bos) where given:
    greedy, or beam search with the card's measured beam (inference.catalog.decoding_beam)."""
    beam = decoding_beam(ckpt.card)
    if beam > 1:
        rows = [row for row in range(len(ready)) if row not in skip]
        begun = None
        if start is not None:  # the traced pass already fed bos: its rows' logits and keys and values
            picked = torch.tensor(rows)
            begun = (start[0].index_select(0, picked), decoding_cache(start[1], picked))
        sources, limits = [ready[r].source_ids for r in rows], [ready[r].request.max_tokens for r in rows]
        written = beam_many(ckpt.model, sources, limits, beam, start=begun)
        by_row = dict(zip(rows, written))
        return [by_row[row].ids if row in by_row else [] for row in range(len(ready))]
    max_tokens = max(p.request.max_tokens for row, p in enumerate(ready) if row not in skip)
    outputs = greedy_many(ckpt.model, [p.source_ids for p in ready], max_tokens, start=start, skip=skip)
    return [out.ids[: p.request.max_tokens] for p, out in zip(ready, outputs)]


def _encode_decode_trace(ckpt: Checkpoint, ready: list[_Prepared], results: list, slots: list[int]) -> None:
    """Encoder-decoder: the encoder runs once per request, traced, with the decoder's first step (bos); the rows
    without a given target decode from there (greedy, reusing its keys and values, or the card's beam); then the
    decoder runs traced over each row's whole target, reusing the encoder's cross-attention keys and values
    (`Trace.encoder_part`)."""
    cfg = ckpt.config
    source = pad_rows([p.source_ids for p in ready], cfg.pad_id)
    first_logits, first = forward(ckpt.model, torch.full((len(ready), 1), cfg.bos_id), source)
    given = [row for row, p in enumerate(ready) if p.target_ids is not None]
    if len(given) < len(ready):  # the model writes its own output (greedy: all such rows in one batch)
        for p, ids in zip(ready, _own_outputs(ckpt, ready, start=(first_logits, first), skip=given)):
            if p.target_ids is None:
                p.target_ids = [cfg.bos_id] + ids
    targets = pad_rows([p.target_ids for p in ready], cfg.pad_id)
    logits, decoded = forward(ckpt.model, targets, source, first.encoder_part())
    encoder = {name: rec for name, rec in first.attention.items() if name.startswith("encoder.")}
    trace = Trace(
        cfg.kind,
        source,
        targets,
        decoded.target_valid,
        {"encoder": first.positional_encoding["encoder"], "decoder": decoded.positional_encoding["decoder"]},
        encoder | decoded.attention,
    )
    for row, (slot, p) in enumerate(zip(slots, ready)):
        results[slot] = _analysis(ckpt, p, trace, row, logits[row, : len(p.target_ids)])


def _analysis(ckpt: Checkpoint, p: _Prepared, trace: Trace, row: int, logits: torch.Tensor) -> Analysis:
    tok, cfg = ckpt.tokenizer, ckpt.config
    notes = list(p.notes)
    all_ids = p.target_ids + (p.source_ids or [])
    unknown = tuple(sorted({piece for i, piece in zip(all_ids, tok.pieces(all_ids)) if i == cfg.unk_id}))
    read = p.text
    if cfg.switches.sum_outputs:  # a centre-word model reads the words around the blank, lower-cased
        read = " ".join(centre_context(p.text, cfg.max_len // 2, []))
    outside = outside_vocabulary(tok, read)
    if outside:  # named, with what the model reads instead (byte pieces or <unk>)
        notes.append(vocabulary_note(ckpt.name, outside))
    elif unknown:
        notes.append("Some characters are not in the model's vocabulary and became <unk>.")
    source = tuple(tok.pieces(p.source_ids)) if p.source_ids is not None else None
    target = tuple(tok.pieces(p.target_ids))
    predictions = tuple(tuple(top) for top in top_k(logits, p.request.k, tok.pieces, tok.never_written))
    positional_encoding = {
        name: _np(rows[: len(source if name == "encoder" else target)]).astype(np.float32)
        for name, rows in trace.positional_encoding.items()
    }
    return Analysis(
        checkpoint=ckpt.name,
        kind=cfg.kind,
        text=p.text,
        source_pieces=source,
        target_pieces=target,
        target_ids=tuple(p.target_ids),
        sublayers=_sublayers(ckpt.model, trace, row, source, target),
        positional_encoding=positional_encoding,
        predictions=predictions,
        output_text=tok.decode(p.target_ids) if cfg.has_cross_attention else None,
        positional=cfg.positional,
        kv_heads=cfg.kv_heads,
        generated=p.generated,
        continuation=tok.decode(p.target_ids[len(p.target_ids) - p.generated :]) if p.request.continuation else None,
        notes=tuple(notes),
        unknown_pieces=unknown,
        blank=cfg.switches.sum_outputs,
        certainty=rows_of(ckpt, p.target_ids, logits) if cfg.has_decoder and len(p.target_ids) > 1 else (),
    )


def analyze(
    ckpt: Checkpoint,
    text: str,
    target: str | None = None,
    k: int = 5,
    max_tokens: int = 64,
    continuation: int = 0,
    sampling: Sampling | None = None,
    target_ids: tuple[int, ...] | None = None,
) -> Analysis:
    """Clean and tokenize `text`, run the model once with every head recorded, and return the Analysis.

    Encoder-decoder: `target` is the decoder's text, or `target_ids` its ids as an analysis decoded them (see
    Request); without either the model's own output is used (greedy, or the beam its card measured better).
    Language model: with `continuation`, it first writes that many tokens after the text (greedy, or `sampling`). Raises
    InputError when the text cannot be analysed."""
    result = analyze_many(ckpt, [Request(text, target, k, max_tokens, continuation, sampling, target_ids)])[0]
    if isinstance(result, InputError):
        raise result
    return result


def generate_text(ckpt: Checkpoint, text: str, max_tokens: int, beam: int = 1) -> str:
    """The translation (encoder-decoder) or the continuation (language model) of `text`."""
    notes: list[str] = []
    cleaned = clean_text(text).text
    cfg = ckpt.config
    if not cfg.has_decoder:
        raise InputError(f"{ckpt.name} is an encoder: it reads a whole text at once and writes none.")
    if isinstance(ckpt.model, EncoderDecoder):
        source = torch.tensor([encode_source(ckpt, cleaned, notes)])
        result = generate(ckpt.model, [cfg.bos_id], source, max_tokens, beam)
    else:
        prefix = encode_prefix(ckpt, cleaned, notes, reserve=min(max_tokens, cfg.max_len // 2))
        result = generate(ckpt.model, prefix, None, max_tokens, beam)
    return ckpt.tokenizer.decode(result.ids)


@torch.inference_mode()
def translate_many(ckpt: Checkpoint, texts: Sequence[str], max_tokens: int, batch: int = 32) -> list[str]:
    """Greedy outputs of an encoder-decoder for many texts, `batch` at a time: what the app's worker decodes
    (`greedy_many`, equal to one text at a time: tests/test_worker.py), for evaluating on a test set."""
    sources = [encode_source(ckpt, clean_text(text).text, []) for text in texts]
    out: list[str] = []
    for i in range(0, len(sources), batch):
        out += [ckpt.tokenizer.decode(g.ids) for g in greedy_many(ckpt.model, sources[i : i + batch], max_tokens)]
    return out


def batch_masks(ckpt: Checkpoint, texts: Sequence[str]) -> BatchMasks:
    """Tokenise `texts` as the model's first stack reads them, pad them to one length, and compute the
    padding and attention masks with the model's own functions. Raises InputError for an empty text."""
    cfg = ckpt.config
    notes: list[str] = []
    ids = [encode_first_stack(ckpt, clean_text(text).text, notes) for text in texts]
    padded = pad_rows(ids, cfg.pad_id)
    valid = padding_mask(padded, cfg.pad_id)
    causal = not cfg.has_encoder  # the first stack is a decoder: no peeking ahead
    mask = attention_mask(valid, valid, causal=causal)
    pieces = [ckpt.tokenizer.pieces(row.tolist()) for row in padded]
    return BatchMasks("decoder" if causal else "encoder", causal, pieces, _np(valid), _np(mask))


def positional_table(ckpt: Checkpoint) -> np.ndarray:
    """(max_len, d_model) float32: the sinusoidal buffer or the learned parameter, whichever the model has; with
    rotary positions (max_len, d_head): the cos | sin of each position's rotation angles (nothing is added)."""
    return _np(ckpt.model.positions.table).astype(np.float32)


def positions_used(ckpt: Checkpoint, text: str) -> int | None:
    """How many positions the text takes in the model's first stack (None if the text is rejected)."""
    try:
        return len(encode_first_stack(ckpt, clean_text(text).text, []))
    except InputError:
        return None


def head_detail(
    ckpt: Checkpoint,
    text: str,
    sublayer: str,
    head: int,
    k: int = 5,
    max_tokens: int = 64,
    target_ids: tuple[int, ...] | None = None,
) -> HeadDetail:
    """Head `head` of `sublayer`: its raw scores and values for `text`, from one traced pass run as `analyze` runs it
    (same `k` and `max_tokens`, so the rows are the pages' analysis's rows); copies, so the rest of the pass is
    freed. `target_ids`: an encoder-decoder's output as the pages' analysis decoded it, fed as it is (no second
    decoding). Raises InputError for a text the model cannot take, KeyError for a sub-layer it has not."""
    given = target_ids if ckpt.config.has_cross_attention else None
    found = analyze(ckpt, text, k=k, max_tokens=max_tokens, target_ids=given).sublayers[sublayer]
    if found.scores is None or found.values is None:
        raise ValueError(f"{sublayer}: the traced pass recorded no scores or values")
    return HeadDetail(sublayer, head, found.scores[head].copy(), found.values[head].copy())

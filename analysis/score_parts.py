"""Why a head attends where it does: one raw score q_i·k_j/√d_k split into the residual stream's parts on each side.

A head's query at position i is W^Q applied to the stream entering its sub-layer there (through the sub-layer's norm in
a pre-norm model), its key at j W^K applied to the stream at j (the same stream for self-attention; for
cross-attention the encoder's output). Each stream is a sum of what wrote it: the token embeddings, the positions
(added ones; rotary positions enter no stream: they turn q and k, which stays linear), BERT's token types, each
earlier head's output through its slice of W^O, each earlier feed-forward layer's output, and biases (the
attention output and feed-forward biases, the norms' own biases, W^Q's and W^K's). A norm is not linear, but with
its scale — the per-position denominator σ = √(Var + ε), or the root mean square of an RMSNorm — frozen at the value
it took in the real run, it is: each part is centred by itself (the mean-centring is linear, so it goes into the
parts exactly), multiplied by gain/σ, and the norm's bias joins the biases. A post-norm model (the paper's) puts
every part through the norm after each sub-layer; a pre-norm model through the norm before the projection only.

The score is then bilinear: Σ over query parts a and key parts b of (W^Q a)·(W^K b)/√d_k, a table whose cells sum
to the model's own raw score (tests/test_score_parts.py: float64 arithmetic, within 1e-6 of a float64 model's score,
on every shipped checkpoint and the published variants). Everything is read from one traced pass (Trace.activations
and the attention records): the model is not run again by hand.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from analysis.attribution import decoder_inputs
from inference.checkpoint import Checkpoint
from inference.text import clean_text, encode_encoder_only
from model.forward import forward
from model.names import layer_name, parse_sublayer_name, sublayer_name
from model.trace import Trace
from model.transformer import PositionalEncoding

Parts = dict[str, Tensor]  # part name → (T, d_model) float64: what it wrote into the stream at each position
BIASES = "biases"
ORDER = {"self_attn": 0, "cross_attn": 1}  # a sub-layer's index among its layer's residual connections (not ffn)


@dataclass(frozen=True)
class ScoreParts:
    """One head's raw score q·k/√d_k for one query and key, split into query parts × key parts (0-based here).

    sublayer: `decoder.layers.1.self_attn`; head, query, key: 0-based indices. query_parts / key_parts: the names of
    the rows and columns (`token embeddings`, `positions`, `L1 H2` (a head, layers and heads from 1), `L1 cross H2`,
    `L1 feed-forward`, `biases`); table: (rows, columns) float64, the cells sum to `total`; score: the model's own
    raw score from the trace (before the mask: a masked key still has one); masked: whether the mask forbids it.
    """

    sublayer: str
    head: int
    query: int
    key: int
    query_parts: tuple[str, ...]
    key_parts: tuple[str, ...]
    table: np.ndarray
    score: float
    masked: bool

    @property
    def total(self) -> float:
        """The sum of every cell: the score again, up to float64 rounding."""
        return float(self.table.sum())


def _frozen_norm(norm: nn.Module, parts: Parts, stream: Tensor) -> Parts:
    """`parts` through `norm` with its scale frozen at its value on `stream` (T, d_model), the sum of the parts in
    the real run: each part centred (LayerNorm) and multiplied by gain/σ per position; the norm's bias joins the
    biases."""
    if isinstance(norm, nn.Identity):
        return parts
    s = stream.double()
    gain = norm.weight.double() if getattr(norm, "weight", None) is not None else torch.ones(s.shape[-1])
    if isinstance(norm, nn.LayerNorm):
        centres, sigma = True, torch.sqrt(s.var(dim=-1, unbiased=False, keepdim=True) + norm.eps)  # (T, 1)
    elif isinstance(norm, nn.RMSNorm):
        eps = norm.eps if norm.eps is not None else torch.finfo(stream.dtype).eps
        centres, sigma = False, torch.sqrt((s * s).mean(dim=-1, keepdim=True) + eps)
    else:
        raise ValueError(f"score parts know LayerNorm and RMSNorm, not {type(norm).__name__}")
    out = {}
    for name, part in parts.items():
        centred = part - part.mean(dim=-1, keepdim=True) if centres else part
        out[name] = centred * gain / sigma
    if getattr(norm, "bias", None) is not None:
        out[BIASES] = out.get(BIASES, torch.zeros_like(s)) + norm.bias.double()
    return out


def _add(parts: Parts, name: str, value: Tensor) -> None:
    parts[name] = parts[name] + value if name in parts else value


def _layer(model: nn.Module, stack: str, i: int) -> nn.Module:
    layers = getattr(model, stack).layers  # one module applied to every layer in a shared-layers model
    return layers[0] if len(layers) == 1 else layers[i]


def _head_label(layer: int, type_: str, head: int) -> str:
    return f"L{layer + 1} {'cross ' if type_ == 'cross_attn' else ''}H{head + 1}"


def _embedded(model: nn.Module, trace: Trace, stack: str) -> Parts:
    """The first layer's input as parts: token embeddings, added positions, BERT's token types (and its norm)."""
    acts = trace.activations
    parts: Parts = {"token embeddings": acts[f"{stack}.embed"][0].double()}
    if isinstance(model.positions, PositionalEncoding):  # rotary positions add nothing to the stream
        parts["positions"] = trace.positional_encoding[stack].double().expand_as(parts["token embeddings"])
    token_types = getattr(model, "token_types", None)
    if token_types is not None:
        parts["token types"] = token_types.weight[0].double().expand_as(parts["token embeddings"])
    embed_norm = getattr(model, "embed_norm", None)
    if embed_norm is not None:
        parts = _frozen_norm(embed_norm, parts, sum(parts.values()))
    return parts


def _heads_written(attention: nn.Module, trace: Trace, sublayer: str) -> tuple[list[Tensor], Tensor | None]:
    """Each head's output through its slice of W^O, (T, d_model) each, and W^O's bias: read from the record."""
    record = trace.attention[sublayer]
    z = (record.weights[0] @ record.values[0]).double()  # (H, T, d_head): each head's softmax(QKᵀ/√d_k)V
    w_o = attention.w_o.weight.double()  # (d_model, H·d_head)
    per_head = w_o.T.reshape(z.shape[0], z.shape[2], -1)  # (H, d_head, d_model)
    bias = getattr(attention.w_o, "bias", None)
    return [z[h] @ per_head[h] for h in range(z.shape[0])], None if bias is None else bias.double()


def stream_parts(model: nn.Module, trace: Trace, stack: str, stop: str | None = None) -> Parts:
    """The parts of `stack`'s stream entering sub-layer `stop` (before its sub-layer's norm), or, with `stop` None,
    of the stack's output (after a pre-norm model's final norm): what the generator or cross-attention reads.
    `trace`: a traced pass with activations (one text, batch row 0)."""
    acts = {name: t[0] for name, t in trace.activations.items()}
    parts = _embedded(model, trace, stack)
    n_layers = len([n for n in trace.attention if n.startswith(f"{stack}.") and n.endswith(".self_attn")])
    for i in range(n_layers):
        layer, name = _layer(model, stack, i), layer_name(stack, i)
        types = ["self_attn"] + (["cross_attn"] if getattr(layer, "cross_attn", None) is not None else [])
        before = {"self_attn": "resid_pre", "cross_attn": "resid_mid"}
        ff_before = "resid_mid_cross" if len(types) == 2 else "resid_mid"
        for type_ in types:
            sublayer = sublayer_name(stack, i, type_)
            if sublayer == stop:
                return parts
            written, bias = _heads_written(getattr(layer, type_), trace, sublayer)
            for h, out in enumerate(written):
                parts[_head_label(i, type_, h)] = out
            if bias is not None:
                _add(parts, BIASES, bias.expand_as(written[0]))
            residual = layer.sublayer[ORDER[type_]]
            if not residual.pre_norm:  # Norm(x + Sublayer(x)), frozen at its run's σ
                stream = acts[f"{name}.{before[type_]}"] + acts[f"{name}.{type_}.out"]
                parts = _frozen_norm(residual.norm, parts, stream)
        out = acts[f"{name}.feed_forward.out"].double()
        b_2 = getattr(layer.feed_forward.w_2, "bias", None)
        if b_2 is not None:
            _add(parts, BIASES, b_2.double().expand_as(out))
            out = out - b_2.double()
        parts[f"L{i + 1} feed-forward"] = out
        if not layer.sublayer[-1].pre_norm:
            stream = acts[f"{name}.{ff_before}"] + acts[f"{name}.feed_forward.out"]
            parts = _frozen_norm(layer.sublayer[-1].norm, parts, stream)
    if stop is not None:
        raise ValueError(f"no sub-layer {stop!r} in the {stack}")
    return _frozen_norm(getattr(model, stack).norm, parts, acts[f"{layer_name(stack, n_layers - 1)}.resid_post"])


def _projected(project: Callable[[Tensor], Tensor], parts: Parts) -> tuple[list[str], Tensor]:
    """`project` (x (1, T, d_model) → (1, H, T, d_head), bias and rotary turns included) applied to each part
    without its bias, which goes to the biases part: names and (P, H, T, d_head)."""
    names = list(parts)
    stacked = torch.stack([parts[n] for n in names])  # (P, T, d_model)
    zero = project(torch.zeros(1, *stacked.shape[1:], dtype=torch.float64))  # (1, H, T, d_head): the bias alone
    out = project(stacked) - zero
    if BIASES in names:
        out[names.index(BIASES)] += zero[0]
    else:
        names.append(BIASES)
        out = torch.cat([out, zero])
    return names, out


def pass_inputs(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...]) -> tuple[Tensor, Tensor | None]:
    """The ids (1, T) and source (1, S) or None of the pass an Analysis of `text` made (its `target_ids`: the
    decoder's input), for `score_parts`; an encoder-only model reads the text alone."""
    if ckpt.config.has_decoder:
        source, ids = decoder_inputs(ckpt, text, target_ids)
        return ids, source
    return torch.tensor([encode_encoder_only(ckpt, clean_text(text).text, [])]), None


@torch.inference_mode()
def score_parts(
    model: nn.Module, ids: Tensor, source: Tensor | None, sublayer: str, head: int, query: int, key: int
) -> ScoreParts:
    """Head `head`'s raw score of query `query` for key `key` in sub-layer `sublayer` (all 0-based) on the pass over
    `ids` (1, T) (and `source` (1, S), an encoder-decoder's), split into query parts × key parts (the module's
    docstring). One traced forward pass with activations."""
    return row_parts(model, ids, source, sublayer, head, query, [key])[0]


@torch.inference_mode()
def row_parts(
    model: nn.Module, ids: Tensor, source: Tensor | None, sublayer: str, head: int, query: int, keys: Sequence[int]
) -> tuple[ScoreParts, ...]:
    """`score_parts` of each of `keys` (0-based, in the order given) for the one query: one traced pass and one
    projection of every part at every position serve them all, so a query's whole row of keys costs about what
    one key does."""
    stack, layer_index, type_ = parse_sublayer_name(sublayer)
    _, trace = forward(model, ids, source, record=True, activations=True)
    if sublayer not in trace.attention:
        raise ValueError(f"this model has no sub-layer {sublayer!r}: choose one of {', '.join(trace.attention)}")
    record = trace.attention[sublayer]
    n_heads, n_queries, n_keys = record.scores.shape[1:]
    asked = [("head", head, n_heads), ("query", query, n_queries), *(("key", key, n_keys) for key in keys)]
    for what, value, count in asked:
        if not 0 <= value < count:
            raise ValueError(f"{what} {value + 1} is out of range: {sublayer} has {what}s 1 to {count}")
    layer = _layer(model, stack, layer_index)
    attention = copy.deepcopy(getattr(layer, type_)).double()  # float64 arithmetic with the model's own weights
    residual = layer.sublayer[ORDER[type_]]
    q_side = stream_parts(model, trace, stack, stop=sublayer)
    if residual.pre_norm:
        before = "resid_pre" if type_ == "self_attn" else "resid_mid"
        q_side = _frozen_norm(residual.norm, q_side, trace.activations[f"{layer_name(stack, layer_index)}.{before}"][0])
    k_side = q_side if type_ == "self_attn" else stream_parts(model, trace, "encoder")
    q_names, q = _projected(lambda x: attention.queries(x, 0), q_side)
    k_names, k = _projected(lambda x: attention.new_keys_values(x, 0)[0], k_side)
    chosen = list(keys)
    # (K, P_q, P_k): for each key j, cell (a, b) = (W^Q a)·(W^K b)/√d_k at the query and at j
    tables = torch.einsum("ad,kbd->kab", q[:, head, query], k[:, head, chosen].transpose(0, 1))
    tables = tables / math.sqrt(attention.d_head)
    return tuple(
        ScoreParts(
            sublayer=sublayer,
            head=head,
            query=query,
            key=key,
            query_parts=tuple(q_names),
            key_parts=tuple(k_names),
            table=tables[i].numpy(),
            score=float(record.scores[0, head, query, key]),
            masked=not bool(record.mask[0, query, key]),
        )
        for i, key in enumerate(chosen)
    )

"""What each part of a model writes toward one prediction: direct logit attribution, and the logit lens.

**Direct logit attribution** (Elhage et al. 2021; TransformerLens's `decompose_resid` / `logit_attrs`). A decoder's
residual stream is a sum: the token embeddings, the positions, and what every sub-layer adds — each attention
head's output through its slice of W_O (its write), the attention's output bias, each feed-forward. The logit of a
token t at a position is u_t · Norm(stream) + b_t, u_t the generator's row. With every norm's scale frozen at the
value it took in this pass, each norm is an affine map, so the logit splits exactly into one number per part:
part · (the direction u_t pulled back through the norms after it). A pre-norm model passes its stream through its
final norm only; a post-norm model (the paper's) through the norm of every later sub-layer, so a part written early
is read through all of them. The norms' own biases, the attention output biases and the generator's bias are one
more part, "biases". The parts sum to the model's logit (tests/test_attribution.py, within 1e-3); with a `versus`
token they sum to the difference of the two logits. A head's number is what it writes *directly*; what it changes
through later layers is patching's question, not this one.

**The logit lens** (nostalgebraist 2020): the stream after each layer read as if it were the last — the final norm
(not frozen) and the generator — gives each layer's top guess at each position: a word, never padding, the start
of text or the unknown token (`never_guessed`), with its probability over the whole vocabulary.

Decoder stacks only (a language model, a translator's decoder): an encoder-only model's output head and its
sum over positions are not linear in the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from inference.checkpoint import Checkpoint
from inference.decoding import pad_rows, top_k
from inference.text import clean_text, encode_source
from inference.tokenizer import TokenizerLike
from model.forward import forward
from model.names import layer_name, sublayer_name
from model.trace import Trace


@dataclass(frozen=True)
class Attribution:
    """A prediction's logit split into the parts that wrote it (0-based layers and heads).

    position: the decoder position whose next token is scored; token / versus: the ids compared (versus None:
    the logit of `token` alone). heads: attention type (`decoder.self_attn`, `decoder.cross_attn`) → (L, H) each
    head's direct contribution; feed_forward: (L,) each layer's feed-forward; embeddings, positions, biases: one
    number each (positions None for rotary positions, which turn queries and keys and enter no stream). logit:
    the model's own logit (or difference), which the parts sum to.
    """

    position: int
    token: int
    versus: int | None
    heads: dict[str, np.ndarray]
    feed_forward: np.ndarray
    embeddings: float
    positions: float | None
    biases: float
    logit: float

    @property
    def total(self) -> float:
        """The sum of every part: the logit again, up to the arithmetic's rounding."""
        heads = sum(float(h.sum()) for h in self.heads.values())
        return heads + float(self.feed_forward.sum()) + self.embeddings + (self.positions or 0.0) + self.biases


@dataclass(frozen=True)
class LogitLens:
    """Each layer's stream decoded as if it were the last. Rows: the embeddings (row 0), then after layer 1, 2, …;
    columns: the decoder positions. top: (L + 1, T) the top token's id, never padding, the start of text or the
    unknown token (`never_guessed`), pieces the same as the tokenizer's pieces; prob: its probability over the whole
    vocabulary; final_prob: the probability of the model's own final top token (of the same) at that position."""

    top: np.ndarray
    pieces: tuple[tuple[str, ...], ...]
    prob: np.ndarray
    final_prob: np.ndarray


def decoder_inputs(ckpt: Checkpoint, text: str, target_ids: tuple[int, ...]) -> tuple[Tensor | None, Tensor]:
    """The source (an encoder-decoder's, from `text`) and the decoder's ids (an Analysis's `target_ids`) as (1, n)
    tensors: the pass an analysis made, run again."""
    if not ckpt.config.has_decoder:
        raise ValueError(
            "logit attribution and the logit lens read a decoder's stream; an encoder-only model's output head is "
            "not linear in it: choose a language model or a translator"
        )
    source = None
    if ckpt.config.has_cross_attention:
        source = torch.tensor([encode_source(ckpt, clean_text(text).text, [])])
    return source, torch.tensor([list(target_ids)])


def checked_id(token: object, vocab: int) -> int | None:
    """`token` when it is an id inside a vocabulary of `vocab` tokens; None when it is a piece or word (a str) for
    the tokenizer to read; TypeError or ValueError in one line for anything else."""
    if isinstance(token, bool) or not isinstance(token, int | str):
        raise TypeError(f"a token is an id (int) or a piece or word (str), not {type(token).__name__}")
    if isinstance(token, int):
        if not 0 <= token < vocab:
            raise ValueError(f"token id {token} is outside the vocabulary (0..{vocab - 1})")
        return token
    return None


def token_id(ckpt: Checkpoint, token: int | str) -> int:
    """A token named by its id, its piece (`▁mat`) or a word that the tokenizer reads as one piece (`mat` →
    `▁mat`); ValueError naming the pieces when it reads as several."""
    vocab = ckpt.config.vocab_size
    if (found := checked_id(token, vocab)) is not None:
        return found
    pieces = ckpt.tokenizer.pieces(list(range(vocab)))
    if token in pieces:
        return pieces.index(token)
    ids = ckpt.tokenizer.encode(token)
    if len(ids) == 1:
        return ids[0]
    read = " + ".join(ckpt.tokenizer.pieces(ids)) or "nothing"
    raise ValueError(f"{token!r} is not one token of this model: it reads as {read}; give one piece, or an id")


def _frozen(norm: nn.Module, stream: Tensor) -> tuple[Tensor, bool, Tensor | None] | None:
    """A norm at its value on `stream` (d_model,), as an affine map y = scale ⊙ C(s) + bias: its scale (gain over
    the frozen σ), whether C centres, its bias. None for no norm (a post-norm model's last "final norm")."""
    if isinstance(norm, nn.Identity):
        return None
    s = stream.double()
    gain = norm.weight.double() if getattr(norm, "weight", None) is not None else torch.ones_like(s)
    bias = norm.bias.double() if getattr(norm, "bias", None) is not None else None
    if isinstance(norm, nn.LayerNorm):
        sigma = torch.sqrt(s.var(unbiased=False) + norm.eps)
        return gain / sigma, True, bias
    if isinstance(norm, nn.RMSNorm):
        eps = norm.eps if norm.eps is not None else torch.finfo(stream.dtype).eps
        return gain / torch.sqrt((s * s).mean() + eps), False, bias
    raise ValueError(f"logit attribution knows LayerNorm and RMSNorm, not {type(norm).__name__}")


def _pull_back(frozen: tuple[Tensor, bool, Tensor | None] | None, d: Tensor) -> tuple[Tensor, float]:
    """The direction `d` on a norm's output pulled back to its input (the frozen map's transpose), and what the
    norm's bias adds along `d`."""
    if frozen is None:
        return d, 0.0
    scale, centres, bias = frozen
    back = scale * d
    if centres:  # the centring matrix is symmetric: its transpose centres too
        back = back - back.mean()
    return back, 0.0 if bias is None else float(bias @ d)


def _bias(linear: nn.Module) -> Tensor | None:
    return linear.bias.double() if getattr(linear, "bias", None) is not None else None


Pass = tuple[Tensor | None, Tensor]  # (source (1, S) or None, target (1, T)): decoder_inputs' answer


def _padded(ckpt: Checkpoint, passes: Sequence[Pass]) -> tuple[Tensor | None, Tensor]:
    """The passes' sources and targets, each stacked into one batch padded at the end with the pad id: the model
    masks padded keys (model.attention.padding_mask), and a target's own positions come before its padding, which
    the causal mask keeps them from reading, so each row's positions compute what its pass alone computes."""
    pad = ckpt.config.pad_id
    targets = pad_rows([t[0].tolist() for _, t in passes], pad)
    if passes[0][0] is None:
        return None, targets
    return pad_rows([s[0].tolist() for s, _ in passes], pad), targets


def attribute(
    ckpt: Checkpoint,
    source: Tensor | None,
    target: Tensor,
    position: int,
    token: int | None = None,
    versus: int | None = None,
) -> Attribution:
    """The logit of `token` (default: the model's top prediction) after decoder position `position` (0-based) of
    the pass over `target` (1, T) — minus `versus`'s when given — split into what each part wrote (the module's
    docstring). One traced forward pass."""
    return attribute_many(ckpt, [(source, target)], [position], token, versus)[0]


@torch.inference_mode()
def attribute_many(
    ckpt: Checkpoint,
    passes: Sequence[Pass],
    positions: Sequence[int],
    token: int | None = None,
    versus: int | None = None,
) -> list[Attribution]:
    """`attribute` of each pass at its position (0-based), from one traced forward pass over them all, padded
    (`_padded`): each equals its pass's `attribute` alone (tests/test_any_model.py)."""
    source, target = _padded(ckpt, passes)
    logits, trace = forward(ckpt.model, target, source, record=True, activations=True)
    found = []
    for row, ((_, alone), position) in enumerate(zip(passes, positions, strict=True)):
        steps = alone.shape[1]
        if not 0 <= position < steps:
            raise ValueError(f"position {position + 1} is outside 1..{steps}")
        found.append(_split(ckpt, logits, trace, row, position, token, versus))
    return found


def _split(
    ckpt: Checkpoint, logits: Tensor, trace: Trace, row: int, position: int, token: int | None, versus: int | None
) -> Attribution:
    """Row `row` of a traced batch's logit at `position` split into its parts (`attribute`)."""
    model = ckpt.model
    vocab = logits.shape[-1]
    if token is None:
        token = top_k(logits[row : row + 1, position], 1, ckpt.tokenizer.pieces, ckpt.tokenizer.never_written)[0][0].id
    for name, value in (("token", token), ("versus", versus)):
        if value is not None and not 0 <= value < vocab:
            raise ValueError(f"{name} id {value} is outside the vocabulary (0..{vocab - 1})")
    acts = {name: t[row, position].double() for name, t in trace.activations.items() if name.startswith("decoder.")}
    generator = model.generator
    u = generator.weight[token].double()
    logit = float(logits[row, position, token])
    biases = 0.0
    gen_bias = _bias(generator)
    if gen_bias is not None:
        biases += float(gen_bias[token])
    if versus is not None:
        u = u - generator.weight[versus].double()
        logit -= float(logits[row, position, versus])
        if gen_bias is not None:
            biases -= float(gen_bias[versus])

    decoder = model.decoder
    layers = len(decoder.layers)
    final_input = acts[f"{layer_name('decoder', layers - 1)}.resid_post"]
    d, added = _pull_back(_frozen(decoder.norm, final_input), u)
    biases += added
    types = ["self_attn"] + (["cross_attn"] if decoder.layers[0].cross_attn is not None else [])
    heads = {f"decoder.{t}": np.zeros((layers, decoder.layers[0].self_attn.n_heads)) for t in types}
    feed_forward = np.zeros(layers)
    post = not decoder.layers[0].sublayer[0].pre_norm
    for i in reversed(range(layers)):
        layer, name = decoder.layers[i], layer_name("decoder", i)
        before = {"self_attn": "resid_pre", "cross_attn": "resid_mid"}
        ff_before = "resid_mid_cross" if len(types) == 2 else "resid_mid"
        # the sub-layers in reverse: the feed-forward last added, then cross-attention, then self-attention
        subs = [(layer.sublayer[-1], "feed_forward", ff_before)]
        subs += [(layer.sublayer[k], t, before[t]) for k, t in reversed(list(enumerate(types)))]
        for residual, part, stream_name in subs:
            out = acts[f"{name}.{part}.out"]
            if post:  # Norm(x + out): the direction reaches x and out through the norm
                d, added = _pull_back(_frozen(residual.norm, acts[f"{name}.{stream_name}"] + out), d)
                biases += added
            if part == "feed_forward":
                feed_forward[i] = float(out @ d)
                continue
            attention = getattr(layer, part)
            record = trace.attention[sublayer_name("decoder", i, part)]
            z = (record.weights[row, :, position, None] @ record.values[row])[
                :, 0
            ].double()  # (H, d_head): each head's output
            w_o = attention.w_o.weight.double()  # (d_model, H·d_head)
            per_head = w_o.T.reshape(*z.shape, -1) @ d  # (H, d_head): W_O's slice read along d
            heads[f"decoder.{part}"][i] = (z * per_head).sum(-1).cpu().numpy()
            o_bias = _bias(attention.w_o)
            if o_bias is not None:
                biases += float(o_bias @ d)
    embed = acts["decoder.embed"]
    first = acts[f"{layer_name('decoder', 0)}.resid_pre"]
    return Attribution(
        position=position,
        token=token,
        versus=versus,
        heads=heads,
        feed_forward=feed_forward,
        embeddings=float(embed @ d),
        positions=None if ckpt.config.positional == "rotary" else float((first - embed) @ d),
        biases=biases,
        logit=logit,
    )


def never_guessed(tokenizer: TokenizerLike) -> frozenset[int]:
    """The ids the lens never names: those a model is never asked to write (the tokenizer's never_written, as
    decoding.top_k leaves them out), those no text is made of (padding, the start of text and the pieces spelled
    so: the tokenizer's not_text) and the unknown token, which names no word, unless it is also the end of text (a
    published model's one control token), which is written."""
    return tokenizer.never_written | tokenizer.not_text | ({tokenizer.unk_id} - {tokenizer.eos_id})


def logit_lens(ckpt: Checkpoint, source: Tensor | None, target: Tensor) -> LogitLens:
    """Every layer's stream through the final norm and the generator (the module's docstring): one traced pass."""
    return logit_lens_many(ckpt, [(source, target)])[0]


@torch.inference_mode()
def logit_lens_many(ckpt: Checkpoint, passes: Sequence[Pass]) -> list[LogitLens]:
    """`logit_lens` of each pass, from one traced forward pass over them all, padded (`_padded`); each pass's
    padding is dropped before its streams are decoded."""
    model = ckpt.model
    source, target = _padded(ckpt, passes)
    logits, trace = forward(model, target, source, record=False, activations=True)
    layers = len(model.decoder.layers)
    streams = [trace.activations[f"{layer_name('decoder', 0)}.resid_pre"]]
    streams += [trace.activations[f"{layer_name('decoder', i)}.resid_post"] for i in range(layers)]
    never = sorted(never_guessed(ckpt.tokenizer))
    found = []
    for row, (_, alone) in enumerate(passes):
        steps = alone.shape[1]
        own = torch.stack([s[row, :steps] for s in streams])  # (L + 1, T, d_model): this pass's positions only
        decoded = model.logits(model.decoder.norm(own))  # (L + 1, T, vocab)
        probs = torch.softmax(decoded.float(), dim=-1)  # the model's probabilities, over its whole vocabulary
        final = torch.softmax(logits[row, :steps].float(), dim=-1)
        shown, final_shown = probs.clone(), final.clone()
        shown[..., never], final_shown[..., never] = -1.0, -1.0
        top = shown.argmax(dim=-1)  # (L + 1, T)
        prob = probs.gather(-1, top[..., None])[..., 0]
        answer = final_shown.argmax(dim=-1)  # (T,)
        final_prob = probs.gather(-1, answer.expand(probs.shape[0], -1)[..., None])[..., 0]
        pieces = tuple(tuple(ckpt.tokenizer.pieces(r)) for r in top.tolist())
        found.append(LogitLens(top.cpu().numpy(), pieces, prob.cpu().numpy(), final_prob.cpu().numpy()))
    return found

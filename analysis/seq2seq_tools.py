"""The translator's tools on a `transformers` encoder-decoder run by its own forward (analysis.seq2seq): its
Analysis (the source, and its greedy output or a given target, teacher-forced), forced decoding, any module's
activation by path, and activation patching of a same-length source pair with the target held fixed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from analysis.agreement import METHODS, TranslatorAgreement, _largest, shuffled
from analysis.attribution import checked_id
from analysis.circuits import HeadMatrices
from analysis.forced import ForcedRow
from analysis.fork import TOP_K, Branch, Fork, _candidate
from analysis.imported import TraceError, from_huggingface
from analysis.patching import BATCH, PairError, SourcePatching, choose_position, normalise_cells, only_cells
from analysis.record import Analysis
from analysis.seq2seq import Layout, Seq2SeqError, greedy, hooked, layout, module, read_inputs, run, start_id
from inference.prediction import Prediction
from model.names import sublayer_name

CONTEXT_KEYS = ("max_position_embeddings", "n_positions")


@dataclass(frozen=True)
class Pair:
    """What one run reads: the source (1, S) and the decoder's input (1, T), its start token first; their pieces."""

    source: Tensor
    target: Tensor
    source_pieces: list[str]
    target_pieces: list[str]


def _tokenizer(tokenizer: Any) -> Any:
    if tokenizer is None or not callable(tokenizer) or not hasattr(tokenizer, "convert_ids_to_tokens"):
        raise ValueError(
            "a Hugging Face model needs its tokenizer: atlas.analyze(model, text, "
            "tokenizer=AutoTokenizer.from_pretrained(...))"
        )
    return tokenizer


def _context(model: nn.Module) -> int | None:
    """The model's positions, where it has a bound (T5's relative positions have none)."""
    found = (getattr(model.config, k, None) for k in CONTEXT_KEYS)
    return next((v for v in found if isinstance(v, int) and not isinstance(v, bool)), None)


def source_ids(model: nn.Module, tokenizer: Any, text: str) -> Tensor:
    """`text` as the encoder reads it, (1, S); cut to the model's positions where it has a bound."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the source is empty: give the text to translate")
    ids = _tokenizer(tokenizer)(text, return_tensors="pt")["input_ids"]
    context = _context(model)
    return ids if context is None else ids[:, :context]


def target_ids(
    model: nn.Module, tokenizer: Any, source: Tensor, target: str | Sequence[int] | None, max_tokens: int
) -> Tensor:
    """The decoder's input (1, T): the model's greedy output for `source`; a target text as its tokenizer reads a
    target (`text_target=`), after the decoder's start token; or ids given, the start token put first where
    missing."""
    start, context = start_id(model), _context(model)
    if target is None:
        ids = greedy(model, source, max_tokens if context is None else min(max_tokens, context - 1))
    elif isinstance(target, str):
        if not target.strip():
            raise ValueError("the target is empty: give the output to hold, or leave target out (the greedy output)")
        ids = [start, *_tokenizer(tokenizer)(text_target=target)["input_ids"]]
    else:
        ids = [int(i) for i in target]
        ids = ids if ids and ids[0] == start else [start, *ids]
    vocab = model.config.vocab_size
    if not all(0 <= i < vocab for i in ids):
        raise ValueError(f"target ids are 0 to {vocab - 1} for this model; these have others")
    return torch.tensor([ids])


def pair(model: nn.Module, tokenizer: Any, text: str, target: Any, max_tokens: int = 64) -> Pair:
    source = source_ids(model, tokenizer, text)
    decoder = target_ids(model, tokenizer, source, target, max_tokens)
    pieces = tokenizer.convert_ids_to_tokens
    return Pair(source, decoder, list(pieces(source[0].tolist())), list(pieces(decoder[0].tolist())))


def _predictions(logits: Tensor, k: int, tokenizer: Any) -> tuple[tuple[Prediction, ...], ...]:
    """Each decoder position's `k` likeliest next tokens, most probable first (equal ones by id)."""
    probs = torch.softmax(logits.double(), dim=-1)
    k = min(k, probs.shape[-1])
    order = torch.argsort(-probs, dim=-1, stable=True)[:, :k]
    rows = []
    for row, ids in zip(probs, order.tolist(), strict=True):
        names = tokenizer.convert_ids_to_tokens(ids)
        rows.append(tuple(Prediction(str(n), i, float(row[i])) for n, i in zip(names, ids, strict=True)))
    return tuple(rows)


def analysis(
    model: nn.Module, tokenizer: Any, text: str, target: Any = None, k: int = 5, max_tokens: int = 64
) -> Analysis:
    """The Analysis of `text` by an encoder-decoder: every head of the encoder, the decoder and the
    cross-attention on the source and the decoder's input (its greedy output, or `target`), teacher-forced, and
    each decoder position's top `k` predictions."""
    found = pair(model, tokenizer, text, target, max_tokens)
    where = layout(model)
    with hooked(model, read=list(where.values.values())) as kept:
        outputs = run(model, found.source, found.target, attentions=True)
    if outputs.cross_attentions is None or any(a is None for a in outputs.cross_attentions):
        raise TraceError(f"{type(model).__name__} returned no attention weights, even with eager attention")
    name = getattr(model.config, "name_or_path", "") or type(model).__name__
    result = from_huggingface(outputs, found.target_pieces, source_tokens=found.source_pieces, name=name)
    ids = found.target[0].tolist()
    sublayers = {}
    for name, sublayer in result.sublayers.items():
        values, norms = _values(model, where, name, kept[where.values[name]])
        sublayers[name] = dataclasses.replace(sublayer, values=values, value_norms=norms)
    return dataclasses.replace(
        result,
        sublayers=sublayers,
        text=text,
        target_ids=tuple(ids),
        predictions=_predictions(outputs.logits[0].cpu(), k, tokenizer),
        output_text=tokenizer.decode(ids, skip_special_tokens=True),
    )


def _values(model: nn.Module, where: Layout, name: str, projected: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A sub-layer's values (H, Tk, d_head) from its value projection's output (1, Tk, H × d_head), and each key's
    ‖v_j W_O^h‖ (H, Tk) through its head's slice of the output projection, its bias left out (added once, not per
    key): what `value_weighted` weighs (analysis.analyze.value_norms for ours)."""
    heads = where.n_heads
    values = projected[0].double().reshape(projected.shape[1], heads, -1).transpose(0, 1)  # (H, Tk, d_head)
    w_o = module(model, where.outputs[name]).weight.detach().double()  # (d_model, H · d_head)
    per_head = w_o.reshape(w_o.shape[0], heads, -1)  # (d_model, H, d_head)
    norms = torch.linalg.vector_norm(torch.einsum("hkd,mhd->hkm", values, per_head), dim=-1)
    return values.float().cpu().numpy(), norms.float().cpu().numpy()


def forced_rows(model: nn.Module, tokenizer: Any, text: str, reference: str) -> list[ForcedRow]:
    """Forced decoding: `reference` fed to the decoder, and for each of its tokens the probability the model gave
    it, its rank (1: the model's own choice) and that choice with its probability."""
    found = pair(model, tokenizer, text, reference)
    probs = torch.softmax(run(model, found.source, found.target).logits[0].double().cpu(), dim=-1)
    ids = found.target[0].tolist()
    rows = []
    for step, token in enumerate(ids[1:]):
        row = probs[step]
        top = int(torch.argmax(row))
        rank = int((row > row[token]).sum()) + 1
        top_piece = tokenizer.convert_ids_to_tokens([top])[0]
        piece = found.target_pieces[step + 1]
        rows.append(ForcedRow(step + 1, token, piece, float(row[token]), rank, top, top_piece, float(row[top])))
    return rows


def activations(model: nn.Module, source: Tensor, target: Tensor, paths: Sequence[str]) -> dict[str, np.ndarray]:
    """Each module's output at `paths` (the library's module paths, `model.named_modules()`), from one
    teacher-forced pass: path → (T, …) of the one row, as float32."""
    with hooked(model, read=list(paths)) as kept:
        run(model, source, target)
    return {p: kept[p][0].float().cpu().numpy() for p in paths}


# --- patching a same-length source pair, the target held fixed ----------------------------------------------------


@dataclass(frozen=True)
class Runs:
    """The clean and corrupted runs one patching starts from: the pair's sources (1, S) and the target (1, T);
    the decoder position measured, the tokens compared and each run's logit difference answer − versus; the
    clean run's stream entering each layer (our layer name → (1, len, d)) and heads (our sub-layer name →
    (1, T, heads × d_head), what enters the output projection)."""

    clean: Tensor
    corrupted: Tensor
    target: Tensor
    position: int
    answer: int
    versus: int
    clean_diff: float
    corrupted_diff: float
    streams: dict[str, Tensor]
    heads: dict[str, Tensor]


def prepare(
    model: nn.Module,
    clean: Tensor,
    corrupted: Tensor,
    target: Tensor,
    position: int | None,
    answer: int | None,
    versus: int | None,
) -> Runs:
    """The two runs, the position (None: the first decoder position whose top prediction differs between them)
    and the tokens (None: each run's own top prediction there); PairError when nothing differs."""
    if clean.shape != corrupted.shape:
        raise PairError(
            f"patching pairs source position with position: the sources are {clean.shape[1]} and "
            f"{corrupted.shape[1]} tokens; change words for words of the same token count"
        )
    where = layout(model)
    paths = [*where.layers.values(), *where.outputs.values()]
    with read_inputs(model, paths) as kept:
        clean_logits = run(model, clean, target).logits[0].double().cpu()
    corrupted_logits = run(model, corrupted, target).logits[0].double().cpu()
    position, answer, versus = choose_position(clean_logits, corrupted_logits, position, answer, versus)
    diff = lambda logits: float(logits[position, answer] - logits[position, versus])
    streams = {name: kept[path] for name, path in where.layers.items()}
    heads = {name: kept[path] for name, path in where.outputs.items()}
    return Runs(
        clean, corrupted, target, position, answer, versus, diff(clean_logits), diff(corrupted_logits), streams, heads
    )


def _patched_metric(model: nn.Module, runs: Runs, inputs: dict[str, Any], rows: int) -> np.ndarray:
    with hooked(model, inputs=inputs):
        logits = run(model, runs.corrupted.expand(rows, -1), runs.target.expand(rows, -1)).logits.double().cpu()
    return (logits[:, runs.position, runs.answer] - logits[:, runs.position, runs.versus]).numpy()


def patch_heads(model: nn.Module, runs: Runs, cells: Sequence[tuple[str, int]]) -> np.ndarray:
    """The metric of the corrupted source with each cell's head ((sub-layer name, head)) output taken from the clean
    run at every position, one batch row a cell."""
    where = layout(model)
    d_head = next(iter(runs.heads.values())).shape[-1] // where.n_heads
    by_sublayer: dict[str, list[tuple[int, int]]] = {}
    for row, (sublayer, head) in enumerate(cells):
        by_sublayer.setdefault(sublayer, []).append((row, head))

    def edit(sublayer: str) -> Callable[[Tensor], Tensor]:
        def apply(x: Tensor) -> Tensor:
            x = x.clone()
            for row, head in by_sublayer[sublayer]:
                cut = slice(head * d_head, (head + 1) * d_head)
                x[row, :, cut] = runs.heads[sublayer][0, :, cut].to(x.dtype)
            return x

        return apply

    return _patched_metric(model, runs, {where.outputs[b]: edit(b) for b in by_sublayer}, len(cells))


def patch_streams(model: nn.Module, runs: Runs, cells: Sequence[tuple[str, int]]) -> np.ndarray:
    """The metric with each cell's stream ((layer name, position)) entering that layer taken from the clean run
    at that one position, one batch row a cell."""
    where = layout(model)
    by_layer: dict[str, list[tuple[int, int]]] = {}
    for row, (layer, position) in enumerate(cells):
        by_layer.setdefault(layer, []).append((row, position))

    def edit(layer: str) -> Callable[[Tensor], Tensor]:
        def apply(x: Tensor) -> Tensor:
            x = x.clone()
            for row, position in by_layer[layer]:
                x[row, position] = runs.streams[layer][0, position].to(x.dtype)
            return x

        return apply

    return _patched_metric(model, runs, {where.layers[n]: edit(n) for n in by_layer}, len(cells))


def patch_module(model: nn.Module, runs: Runs, path: str, positions: Sequence[int]) -> np.ndarray:
    """The metric with the output of the module at `path` (any, by its library path) taken from the clean run at
    each one of `positions` in turn, one batch row each."""
    with hooked(model, read=[path]) as kept:
        run(model, runs.clean, runs.target)
    clean = kept[path]

    def apply(x: Tensor) -> Tensor:
        if x.shape[1:] != clean.shape[1:]:
            raise Seq2SeqError(
                f"{path}'s output is {tuple(x.shape[1:])} here and {tuple(clean.shape[1:])} in the clean run"
            )
        x = x.clone()
        for row, position in enumerate(positions):
            x[row, position] = clean[0, position].to(x.dtype)
        return x

    with hooked(model, outputs={path: apply}):
        logits = run(model, runs.corrupted.expand(len(positions), -1), runs.target.expand(len(positions), -1)).logits
    logits = logits.double().cpu()
    return (logits[:, runs.position, runs.answer] - logits[:, runs.position, runs.versus]).numpy()


def cells(model: nn.Module, runs: Runs, what: str) -> list[tuple[str, int]]:
    """What `what` patches, in our names: (sub-layer name, head) for "heads", (layer name, position) for "residual"."""
    if what == "heads":
        return [(name, h) for name in runs.heads for h in range(layout(model).n_heads)]
    if what == "residual":
        return [(name, i) for name, stream in runs.streams.items() for i in range(stream.shape[1])]
    raise ValueError(f"what is one of 'heads', 'residual', not {what!r}")


def patch_source(
    model: nn.Module, runs: Runs, what: str = "heads", batch: int = BATCH, only: str | None = None
) -> SourcePatching:
    """Every head of both stacks, or the stream entering every layer of both stacks at each position, patched from
    the clean source's run into the corrupted one's, the target held fixed; normalised as analysis.patching does."""
    todo = only_cells(cells(model, runs, what), only)
    patched = patch_heads if what == "heads" else patch_streams
    values = np.concatenate([patched(model, runs, todo[i : i + batch]) for i in range(0, len(todo), batch)])
    return normalise_cells(
        what, todo, values, runs.position, runs.answer, runs.versus, runs.clean_diff, runs.corrupted_diff
    )


def token_of(tokenizer: Any, token: int | str, vocab: int) -> int:
    """A token named by its id, its piece, or a word its tokenizer reads as one piece (its end token aside)."""
    if (checked := checked_id(token, vocab)) is not None:
        return checked
    found = tokenizer.convert_tokens_to_ids(token)
    if isinstance(found, int) and found != getattr(tokenizer, "unk_token_id", None):
        return found
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return int(ids[0])
    read = " + ".join(tokenizer.convert_ids_to_tokens(ids)) or "nothing"
    raise ValueError(f"{token!r} is not one token of this model: it reads as {read}; give one piece, or an id")


def module_or_error(model: nn.Module, path: str) -> nn.Module:
    """The module at the library path `path`: ValueError of one line naming near ones when there is none."""
    try:
        return module(model, path)
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None


def output_positions(model: nn.Module, runs: Runs, path: str) -> int:
    """How many positions the output of the module at `path` has on the clean run (its stack's length)."""
    with hooked(model, read=[path]) as kept:
        run(model, runs.clean, runs.target)
    if kept[path].dim() < 3:
        raise ValueError(f"{path}'s output is {tuple(kept[path].shape)}: patching puts in one position at a time")
    return kept[path].shape[1]


def rank_heads(
    model: nn.Module,
    tokenizer: Any,
    text: str,
    mode: str = "zero",
    batch: int = BATCH,
    found: Pair | None = None,
    rows: slice = slice(None),
) -> list:
    """Each head of every attention switched off alone (`mode` "zero": its output 0; "mean": its mean over the
    positions of the intact pass), the text's greedy output (or `found`'s target) held fixed: (sub-layer name, head,
    KL(intact ‖ ablated) averaged over the output's positions `rows`), as analysis.ablation ranks ours; one batch
    row a head."""
    found = pair(model, tokenizer, text, None) if found is None else found
    where = layout(model)
    with read_inputs(model, list(where.outputs.values())) as kept:
        before = torch.log_softmax(run(model, found.source, found.target).logits[0].double().cpu(), -1)[rows]
    d_head = next(iter(kept.values())).shape[-1] // where.n_heads
    todo = [(name, h) for name in where.sublayers for h in range(where.n_heads)]
    table = []
    for start in range(0, len(todo), batch):
        chosen = todo[start : start + batch]

        def edit(sublayer: str, chosen: list = chosen) -> Callable[[Tensor], Tensor]:
            def apply(x: Tensor) -> Tensor:
                x = x.clone()
                for row, (name, head) in enumerate(chosen):
                    if name == sublayer:
                        cut = slice(head * d_head, (head + 1) * d_head)
                        x[row, :, cut] = 0.0 if mode == "zero" else x[row, :, cut].mean(dim=0, keepdim=True)
                return x

            return apply

        count = len(chosen)
        edits = {where.outputs[b]: edit(b) for b in dict.fromkeys(name for name, _ in chosen)}
        with hooked(model, inputs=edits):
            logits = run(model, found.source.expand(count, -1), found.target.expand(count, -1)).logits
        after = torch.log_softmax(logits.double().cpu(), -1)[:, rows]
        kl = (before.exp() * (before - after)).sum(-1).mean(-1)  # (rows,)
        table += [(name, head, float(k)) for (name, head), k in zip(chosen, kl, strict=True)]
    return sorted(table, key=lambda row: -row[2])


def _next(model: nn.Module, source: Tensor, prefix: list[int]) -> tuple[Tensor, dict[str, np.ndarray]]:
    """The logits after `prefix`'s last token (vocab,) and every decoder sub-layer's weights of that query, (H, Tk)."""
    out = run(model, source, torch.tensor([prefix]), attentions=True)
    rows = {}
    for type_, layers in (("self_attn", out.decoder_attentions), ("cross_attn", out.cross_attentions)):
        for i, weights in enumerate(layers):
            rows[sublayer_name("decoder", i, type_)] = weights[0, :, -1].float().cpu().numpy()
    return out.logits[0, -1].float().cpu(), rows


def _branch(model, source, prefix, start, first, steps, pieces) -> Branch:
    """Write `first`, then greedily up to `steps` tokens in all, each step a teacher-forced pass of the prefix."""
    eos = getattr(model.config, "eos_token_id", None)
    (logits, rows), ids, all_logits, attention, token, finished = start, [], [], [], first, False
    for _ in range(steps):
        all_logits.append(logits)
        attention.append(rows)
        if token == eos:
            finished = True
            break
        ids.append(token)
        if len(ids) == steps:
            break
        logits, rows = _next(model, source, [*prefix, *ids])
        token = _candidate(logits, 1, frozenset())
    stacked = torch.stack(all_logits)  # (steps, vocab)
    chosen = torch.tensor(ids + [eos] * finished)
    probs = torch.softmax(stacked, dim=-1).gather(1, chosen[:, None])[:, 0]
    top = _predictions(stacked, TOP_K, pieces)
    return Branch(tuple(ids), finished, probs.numpy(), stacked.numpy(), top, tuple(attention))


def fork(model: nn.Module, tokenizer: Any, text: str, step: int, choice: int, max_tokens: int) -> Fork:
    """analysis.fork.fork for a `transformers` encoder-decoder: greedy for `step` tokens (0-based step), then the
    likeliest and the `choice`-th likeliest token, each continued greedily to `max_tokens` written in all."""
    source, prompt = source_ids(model, tokenizer, text), [start_id(model)]
    context = _context(model)
    room = max_tokens if context is None else min(max_tokens, context - 1)
    if step >= room:
        raise ValueError(f"step {step + 1} is past the {room} tokens written here: fork at step 1 to {room}")
    if choice > TOP_K:
        raise ValueError(f"choose one of the {TOP_K} likeliest candidates, not the {choice}th")
    start, shared = _next(model, source, prompt), []
    for _ in range(step):
        token = _candidate(start[0], 1, frozenset())
        if token == getattr(model.config, "eos_token_id", None):
            raise ValueError(
                f"greedy decoding ends the text at step {len(shared) + 1}: fork at step 1 to {len(shared) + 1}"
            )
        shared.append(token)
        start = _next(model, source, [*prompt, *shared])
    prefix, left = [*prompt, *shared], room - step
    branches = [
        _branch(model, source, prefix, start, _candidate(start[0], c, frozenset()), left, tokenizer)
        for c in (1, choice)
    ]
    return Fork(tuple(prompt), tuple(shared), step, choice, *branches)


# --- the logit lens --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lens:
    """The decoder's stream after its embeddings (the first layer's input) and after each layer, read as the model
    reads its last layer's output: logits (layers + 1, T, vocab)."""

    pair: Pair
    logits: Tensor


def _readers(model: nn.Module) -> list[Any]:
    """The ways a decoder's last layer output may become logits: the decoder's final norm (T5's final_layer_norm,
    an mBART's layer_norm) or none, the tied embeddings' rescaling by d_model^-½ (T5) or none, then the output
    layer and its bias (final_logits_bias: Marian, BART)."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    norms = [m for m in (getattr(decoder, "final_layer_norm", None), getattr(decoder, "layer_norm", None)) if m]
    bias = getattr(model, "final_logits_bias", None)
    d_model = getattr(model.config, "d_model", None) or model.config.hidden_size
    readers = []
    for norm in [*norms, None]:
        for scale in (1.0, d_model**-0.5):

            def read(x: Tensor, norm: Callable | None = norm, scale: float = scale) -> Tensor:
                y = head((norm(x) if norm is not None else x) * scale)
                return y if bias is None else y + bias

            readers.append(read)
    return readers


def lens(model: nn.Module, tokenizer: Any, text: str, target: Any = None, max_tokens: int = 64) -> Lens:
    """Every decoder layer's stream through the reader that turns the last layer's output into the model's own
    logits (within 1e-4: found among `_readers`, never assumed); Seq2SeqError when none does."""
    found = pair(model, tokenizer, text, target, max_tokens)
    where = layout(model)
    paths = [p for n, p in where.layers.items() if n.startswith("decoder.")]
    with read_inputs(model, paths[:1]) as first, hooked(model, read=paths) as kept:
        logits = run(model, found.source, found.target).logits
    streams = [first[paths[0]], *(kept[p] for p in paths)]
    with torch.no_grad():
        for read in _readers(model):
            if torch.allclose(read(streams[-1]), logits, atol=1e-4, rtol=1e-4):
                return Lens(found, torch.stack([read(s)[0] for s in streams]).float().cpu())
    raise Seq2SeqError(
        f"{type(model).__name__}: no final norm and output layer of its decoder turn its last layer's output into "
        "its logits, so the lens cannot read its layers"
    )


# --- how heads compose, from the weights -----------------------------------------------------------------------


def head_matrices(model: nn.Module, stack: str = "encoder") -> HeadMatrices:
    """W_Q, W_K, W_V (d_model × d_head) and W_O (d_head × d_model) of every self-attention head of `stack`, as
    analysis.circuits.head_matrices gives ours: a pre-norm's gain folded into the reading matrices where the
    attention sits in a wrapper with its `layer_norm` (T5's sublayers); a post-norm model's norms (Marian, BART)
    act after the residual sum, so nothing is folded."""
    where = layout(model)
    names = [n for n in where.sublayers if n.startswith(f"{stack}.") and n.endswith(".self_attn")]
    if not names:
        raise Seq2SeqError(f"{type(model).__name__} has no {stack} stack")
    found = dict(model.named_modules())
    heads, parts = where.n_heads, {"w_q": [], "w_k": [], "w_v": [], "w_o": []}
    with torch.no_grad():
        for name in names:
            path = where.sublayers[name]
            attention, parent = found[path], found[path.rsplit(".", 1)[0]]  # a library path: its parent module
            kids = dict(attention.named_children())
            q, k, v = (
                kids[next(p for p in group if p in kids)]
                for group in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"))
            )
            norm = getattr(parent, "layer_norm", None)  # T5's wrapper's; a BART layer names its norms otherwise
            d_model = q.weight.shape[1]
            gain = norm.weight.detach().double() if norm is not None else torch.ones(d_model, dtype=torch.float64)
            for key, linear in (("w_q", q), ("w_k", k), ("w_v", v)):
                w = linear.weight.detach().double().reshape(heads, -1, d_model).transpose(1, 2)  # (H, d_model, dh)
                parts[key].append((gain[None, :, None] * w).numpy())
            w_o = found[where.outputs[name]].weight.detach().double()  # (d_model, H · d_head)
            parts["w_o"].append(w_o.T.reshape(heads, -1, d_model).numpy())
    arrays = {key: np.concatenate(chunks) for key, chunks in parts.items()}
    return HeadMatrices(**arrays, stack=stack, n_layers=len(names), n_heads=heads)


# --- do the explanations agree? -----------------------------------------------------------------------------------


def agreement(
    model: nn.Module, tokenizer: Any, text: str, position: int | None, corrupted: Any, target: Any = None
) -> TranslatorAgreement:
    """analysis.agreement.translator_agreement for a `transformers` encoder-decoder: the attention columns of the
    decoder's heads, ablation (zero, mean) of every head at the position, activation patching of a corrupted
    source of the same length (the one given, else the source shuffled between its first and last, seeded);
    direct logit attribution NaN (its frozen-norm path is not read here) and attribution patching NaN."""
    result = analysis(model, tokenizer, text, target)
    found = Pair(
        source_ids(model, tokenizer, text), torch.tensor([list(result.target_ids)]), [], list(result.target_pieces)
    )
    ids = list(result.target_ids)
    position = 0 if position is None else position
    if not 0 <= position < len(ids):
        raise ValueError(f"position {position + 1} is outside the target's tokens: choose one of 1..{len(ids)}")
    answer = result.predictions[position][0].id
    where = layout(model)
    nan = {name: np.full(where.n_heads, np.nan) for name in where.sublayers}
    scores = {m: {n: v.copy() for n, v in nan.items()} for m in METHODS}
    for name, sublayer in result.sublayers.items():
        if sublayer.stack == "decoder":
            skip = sublayer.type == "self_attn"
            scores["attention"][name] = _largest(sublayer.weights, position, skip)
            scores["value-weighted attention"][name] = _largest(sublayer.value_weighted().weights, position, skip)
    for mode in ("zero", "mean"):
        rows = slice(position, position + 1)
        for name, head, kl in rank_heads(model, tokenizer, text, mode, found=found, rows=rows):
            scores[f"ablation ({mode})"][name][head] = kl
    source = found.source[0].tolist()
    if corrupted is None:
        other = shuffled(source)
        corrupted_from = "the source with the tokens between its first and last shuffled"
    else:
        other = source_ids(model, tokenizer, corrupted)[0].tolist() if isinstance(corrupted, str) else list(corrupted)
        corrupted_from = "the source given" if isinstance(corrupted, str) else "the token ids given"
    note, versus = "direct logit attribution and attribution patching are not read for this model", None
    if other is None:
        note = "too few different tokens in the source to shuffle into a corrupted one"
    else:
        bad = torch.tensor([other])
        if bad.shape != found.source.shape:
            raise PairError(
                f"the corrupted source has {bad.shape[1]} tokens and the source {found.source.shape[1]}: patching "
                "pairs source position with position"
            )
        logits = run(model, bad, found.target).logits[0, position].double()
        versus = next(int(t) for t in torch.sort(logits, descending=True, stable=True).indices[:2] if int(t) != answer)
        try:
            runs = prepare(model, found.source, bad, found.target, position, answer, versus)
            patched = patch_source(model, runs, "heads")
        except PairError as exc:
            note = str(exc)
        else:
            for (name, head), value in zip(patched.cells, patched.scores, strict=True):
                scores["activation patching"][name][head] = value
    corrupted_ids = None if other is None else tuple(int(i) for i in other)
    return TranslatorAgreement(
        position, answer, versus, tuple(source), tuple(ids), corrupted_ids, corrupted_from, note, scores
    )

"""Activation patching on a minimal pair (`patch`, `patch_scores`: heads, the residual stream, or one module path), a
translator's source pair with its target held fixed, and any recorded activation by its module path (`activations`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from analysis import seq2seq_tools
from analysis.analyze import analyze as _analyze
from analysis.attribution import token_id
from analysis.patching import (
    WHATS,
    PairError,
    attribution_patch_runs,
    attribution_patch_translator,
    normalise_cells,
    pair_ids,
    patch_runs,
    patch_translator,
    prepare_ids,
    prepare_translator,
    run_cells,
)
from analysis.score_parts import pass_inputs
from analysis.seq2seq import Seq2SeqError, is_seq2seq
from analysis.seq2seq import layout as seq2seq_layout
from atlas.api.arguments import checkpoint_of, is_ids, library_on_cpu, texts_of, token_ids_of, warn_cut
from inference.checkpoint import Checkpoint
from inference.text import clean_text, encode_prefix, encode_source
from model.forward import forward
from model.names import attention_type, layer_name, parse_sublayer_name
from viz.labels import display_piece
from viz.patching import pair_labels, patching_frame, patching_heatmap, patching_title

# --- activation patching on a minimal pair ----------------------------------------------------------------------


def _patched(model, clean, corrupted, answer, versus, what, approximate, where):
    if approximate and what != "heads":
        raise ValueError("attribution patching approximates the heads only: what='heads'")
    if what not in WHATS:
        raise ValueError(f"what is one of {', '.join(map(repr, WHATS))}, not {what!r}")
    pair = _pair(model, clean, corrupted, where)
    ids = [i[0].tolist() for i in pair]
    chosen = [None if t is None else token_id(model, t) for t in (answer, versus)]
    runs = prepare_ids(model, *pair, *chosen)
    result = attribution_patch_runs(model, runs) if approximate else patch_runs(model, runs, what)
    labels = pair_labels(*[[display_piece(p) for p in model.tokenizer.pieces(i)] for i in ids])
    return result, labels


def _pair(model: Checkpoint, clean: object, corrupted: object, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The pair's ids (1, T) each: two texts as patching reads them, or two rows of token ids (`token_ids_of`);
    PairError when their lengths differ."""
    if not is_ids(clean) and not is_ids(corrupted):
        notes: list[str] = []
        pair = pair_ids(model, clean, corrupted, notes)
        warn_cut(notes)
        return pair
    if not (is_ids(clean) and is_ids(corrupted)):
        raise TypeError(f"{where} pairs two texts or two rows of token ids, not one of each")
    pair = [token_ids_of(model, x, where)[1] for x in (clean, corrupted)]
    if len(pair[0]) != len(pair[1]):
        raise PairError(f"patching pairs position with position: the ids are {len(pair[0])} and {len(pair[1])} long")
    return torch.tensor([pair[0]]), torch.tensor([pair[1]])


def patch(
    model: Checkpoint | object,
    clean: str | Sequence[int] | torch.Tensor,
    corrupted: str | Sequence[int] | torch.Tensor,
    answer: int | str | None = None,
    versus: int | str | None = None,
    what: str = "heads",
    approximate: bool = False,
    *,
    target: str | Sequence[int] | None = None,
    position: int | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure:
    """Compare's activation patching: `corrupted` (a language model's text of the same token count as `clean`)
    run again with each head's output (`what="heads"`) or the stream entering each layer at each position
    (`"residual"`) taken from `clean`'s run; the grid shows how much of the logit difference `answer` − `versus`
    each patch restores (1: all, 0: none). `answer` defaults to the clean text's top guess, `versus` to the
    corrupted one's (ids, pieces or one-piece words). `approximate`: attribution patching, one backward pass.

    A translator (a loaded one, or a `transformers` encoder-decoder with its `tokenizer`): `clean` and `corrupted`
    are two sources of the same token count and the decoder reads one `target` for both (None: the clean source's
    own output), teacher-forced; the logits compared are at decoder `position` (from 1; None: the first where the
    two sources' top predictions differ); every head of both stacks, or the stream entering every layer of both
    stacks at each of its positions, is patched; `approximate` (a loaded translator, heads only): attribution
    patching of every head of both stacks, one backward pass."""
    if isinstance(what, str) and what not in WHATS and not approximate:
        table = _path_patching(model, clean, corrupted, answer, versus, what, target, position, tokenizer, device)
        return _path_figure(table)
    if _is_translator(model):
        found, labels, _ = _translator_patching(
            model, clean, corrupted, answer, versus, what, approximate, target, position, tokenizer, device
        )
        return _translator_figure(found, labels, approximate)
    model = checkpoint_of(model, tokenizer, "patch", device)
    result, labels = _patched(model, clean, corrupted, answer, versus, what, approximate, "patch")
    named = [display_piece(p) for p in model.tokenizer.pieces([result.answer, result.versus])]
    return patching_heatmap(result.scores, what, labels, patching_title(what, *named, result.approximate))


def patch_scores(
    model: Checkpoint | object,
    clean: str | Sequence[str] | Sequence[int] | torch.Tensor,
    corrupted: str | Sequence[str] | Sequence[int] | torch.Tensor,
    answer: int | str | None = None,
    versus: int | str | None = None,
    what: str = "heads",
    approximate: bool = False,
    *,
    target: str | Sequence[int] | None = None,
    position: int | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame | list[pd.DataFrame]:
    """`patch`'s results as a table: one row per patch (layer and head, or position and its tokens, from 1) with the
    share restored, the largest first; the two runs' logit differences and the tokens in `.attrs`. Lists of clean
    and corrupted texts, as long as each other, give a list of tables, one per pair, in order: pair by pair, not
    stacked into one batch, since a pair's patched runs already fill batches of their own (analysis.patching.BATCH
    rows per pass, all on that pair's corrupted text with that pair's clean activations patched in); stacking
    pairs would save at most one pass per pair and pad every patched run to the longest pair.

    A translator's pair (`patch`'s `target` and `position`): one row per head of every attention of both stacks
    ("attention", "layer", "head") or per layer of both stacks and position of its input ("stack", "layer",
    "position", "token"), the share restored, the largest first; `.attrs` also holds the position (from 1).

    `what` a module path patches that one activation (`activations` reads them): an attention sub-layer of ours
    ("decoder.layers.1.self_attn": each of its heads), a layer's "….resid_pre" or "….resid_post" (each
    position; the last layer's output goes through the final norm and is not patched); for a `transformers`
    encoder-decoder also any of its own modules ("model.encoder.layers.0.fc2": its output at each position). One
    row per head or position; `.attrs["patched"]` names the path."""
    if isinstance(what, str) and what not in WHATS and not approximate:
        return _path_patching(model, clean, corrupted, answer, versus, what, target, position, tokenizer, device)
    if _is_translator(model):
        found, labels, _ = _translator_patching(
            model, clean, corrupted, answer, versus, what, approximate, target, position, tokenizer, device
        )
        return _translator_table(found, labels, approximate)
    model = checkpoint_of(model, tokenizer, "patch_scores", device)
    if not (isinstance(clean, str) or is_ids(clean)) or not (isinstance(corrupted, str) or is_ids(corrupted)):
        cleans, corrupteds = texts_of(clean, "patch_scores"), texts_of(corrupted, "patch_scores")
        if len(cleans) != len(corrupteds):
            raise ValueError(f"patch_scores pairs texts one to one: {len(cleans)} clean, {len(corrupteds)} corrupted")
        return [
            patch_scores(model, c, x, answer, versus, what, approximate)
            for c, x in zip(cleans, corrupteds, strict=True)
        ]
    result, labels = _patched(model, clean, corrupted, answer, versus, what, approximate, "patch_scores")
    table = patching_frame(result.scores, what, labels)
    answer_piece, versus_piece = model.tokenizer.pieces([result.answer, result.versus])
    table.attrs |= {"answer": answer_piece, "versus": versus_piece, "clean": result.clean}
    table.attrs |= {"corrupted": result.corrupted, "approximate": result.approximate}
    return table


# --- any recorded activation, by its module path -----------------------------------------------------------------


def activations(
    model: Checkpoint | object,
    text: str,
    *,
    names: Sequence[str] | None = None,
    target: str | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> dict[str, np.ndarray]:
    """Every activation one pass of `text` recorded, by its module path, as arrays of the one text (positions
    first): for a loaded checkpoint (or a mapped `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX, or a
    TransformerLens bridge of one, with `tokenizer`, on `device`) the trace's names (model.trace.Trace.activations:
    `decoder.layers.0.resid_pre`, `….self_attn.out`, `….feed_forward.hidden`, `decoder.output` …), a translator's
    on the pass `analyze` makes (its own output, or `target`); for a `transformers` encoder-decoder with its
    `tokenizer` the outputs of the modules at `names` as `model.named_modules()` names them (default: every
    layer's), on the pass `analyze` makes. `names` keeps those only, in that order; a name the pass does not
    have is a ValueError that names some it has. `patch_scores(..., what=name)` patches one of them."""
    if names is not None and (isinstance(names, str) or not all(isinstance(n, str) for n in names)):
        raise TypeError("names is a list of module paths (str), or None for all")
    if is_seq2seq(model):
        try:
            found = seq2seq_tools.pair(model, tokenizer, text, target)
            paths = list(names) if names is not None else list(seq2seq_layout(model).layers.values())
            return seq2seq_tools.activations(model, found.source, found.target, paths)
        except Seq2SeqError as exc:
            raise ValueError(str(exc)) from None
    model = checkpoint_of(model, tokenizer, "activations", device)
    analysis = _analyze(model, text, target=target)
    ids, source = pass_inputs(model, analysis.text, analysis.target_ids)
    with torch.inference_mode():
        _, trace = forward(model.model, ids, source, record=False, activations=True)
    recorded = trace.activations
    chosen = list(recorded) if names is None else list(names)
    missing = [n for n in chosen if n not in recorded]
    if missing:
        raise ValueError(f"{model.name} records no {missing[0]!r}: it records {', '.join(list(recorded)[:4])} …")
    return {n: recorded[n][0].float().cpu().numpy() for n in chosen}


def _our_name(what: str) -> tuple[str, str]:
    """A module path of ours as what it patches: ("heads", sub-layer name) for an attention sub-layer, ("residual",
    layer name) for a layer's input (`resid_pre`) or output (`resid_post`: the next layer's input); ("", what) else."""
    for suffix, step in ((".resid_pre", 0), (".resid_post", 1)):
        if what.endswith(suffix):
            try:
                stack, layer, _ = parse_sublayer_name(f"{what.removesuffix(suffix)}.self_attn")  # every layer has one
            except ValueError:
                return "", what
            return "residual", layer_name(stack, layer + step)
    try:
        parse_sublayer_name(what)
    except ValueError:
        return "", what
    return "heads", what


PATCHABLE = "an attention sub-layer (decoder.layers.1.self_attn), or a layer's resid_pre or resid_post"


def _path_patching(model, clean, corrupted, answer, versus, what, target, position, tokenizer, device):
    """`patch_scores(..., what=path)`: the patch of one module path at each head or position, as a table."""
    kind, name = _our_name(what)
    library = is_seq2seq(model) and not kind
    if library:
        seq2seq_tools.module_or_error(model, what)
    elif not kind:
        raise ValueError(f"what is 'heads', 'residual' or a module path: {PATCHABLE}; not {what!r}")
    if _is_translator(model):
        found, labels, runs = _translator_patching(
            model,
            clean,
            corrupted,
            answer,
            versus,
            "heads" if library else kind,
            False,
            target,
            position,
            tokenizer,
            device,
            only=None if library else name,
        )
        if library:
            positions = seq2seq_tools.output_positions(model, runs, what)
            values = seq2seq_tools.patch_module(model, runs, what, range(positions))
            found = normalise_cells(
                "residual",
                [(what, p) for p in range(positions)],
                values,
                runs.position,
                runs.answer,
                runs.versus,
                runs.clean_diff,
                runs.corrupted_diff,
            )
        table = _translator_table(found, labels)
    else:
        ckpt = checkpoint_of(model, tokenizer, "patch_scores", device)
        pair = _pair(ckpt, clean, corrupted, "patch_scores")
        chosen = [None if t is None else token_id(ckpt, t) for t in (answer, versus)]
        runs = prepare_ids(ckpt, *pair, *chosen)
        layers = len(runs.streams)
        stack, layer, _ = parse_sublayer_name(name if kind == "heads" else f"{name}.self_attn")
        if stack != "decoder" or layer >= layers:
            raise ValueError(f"{ckpt.name} has no {what!r} to patch: {PATCHABLE}, of its decoder layers 1 to {layers}")
        across = ckpt.config.n_heads if kind == "heads" else pair[0].shape[1]
        values = run_cells(ckpt, runs, kind, [(layer, i) for i in range(across)])
        span = runs.clean - runs.corrupted
        if abs(span) < 1e-9:
            raise PairError("the two texts give the same logit difference: there is nothing for a patch to restore")
        shown = pair_labels(*[[display_piece(p) for p in ckpt.tokenizer.pieces(i[0].tolist())] for i in pair])
        cross = "head" if kind == "heads" else "position"
        table = pd.DataFrame({cross: range(1, across + 1), "restored": (values - runs.corrupted) / span})
        if kind != "heads":
            table.insert(1, "token", shown)
        table = table.sort_values("restored", ascending=False, kind="stable").reset_index(drop=True)
        table.attrs |= {"clean": runs.clean, "corrupted": runs.corrupted}
        table.attrs |= dict(zip(("answer", "versus"), ckpt.tokenizer.pieces([runs.answer, runs.versus]), strict=True))
    table.attrs["patched"] = what
    return table


# --- a translator's source pair, the target held fixed ------------------------------------------------------------


def _is_translator(model: object) -> bool:
    """A loaded encoder-decoder, or a `transformers` one (run by its own forward)."""
    return is_seq2seq(model) or (isinstance(model, Checkpoint) and model.config.has_cross_attention)


@dataclass(frozen=True)
class _PairLabels:
    """The pieces a translator's patching reads, for its table and figure: `pair_labels` of the two sources, the
    target's, and the two tokens compared."""

    source: list[str]
    target: list[str]
    answer: str
    versus: str


def _translator_patching(
    model,
    clean,
    corrupted,
    answer,
    versus,
    what,
    approximate,
    target,
    position,
    tokenizer,
    device,
    only=None,
    runs_only=False,
):
    """A translator's SourcePatching (analysis.patching for ours, analysis.seq2seq_tools for a transformers
    one) and its labels; every bad input a ValueError of one line."""
    if approximate and (what != "heads" or is_seq2seq(model)):
        raise ValueError(
            "attribution patching approximates the heads of a model this app runs: what='heads', and a "
            "transformers encoder-decoder is patched run by run (leave approximate out)"
        )
    if what not in WHATS:
        raise ValueError(f"what is one of {', '.join(map(repr, WHATS))}, not {what!r}")
    if not isinstance(clean, str) or not isinstance(corrupted, str):
        raise TypeError("a translator's patching pairs two source texts (str)")
    if position is not None and (isinstance(position, bool) or not isinstance(position, Integral) or position < 1):
        raise ValueError(f"position is a decoder position counted from 1, not {position!r}")
    asked = None if position is None else int(position) - 1
    try:
        if is_seq2seq(model):
            library_on_cpu(device)
            pair = [seq2seq_tools.source_ids(model, tokenizer, t) for t in (clean, corrupted)]
            decoder = seq2seq_tools.target_ids(model, tokenizer, pair[0], target, 64)
            chosen = [
                None if t is None else seq2seq_tools.token_of(tokenizer, t, model.config.vocab_size)
                for t in (answer, versus)
            ]
            runs = seq2seq_tools.prepare(model, *pair, decoder, asked, *chosen)
            found = None if runs_only else seq2seq_tools.patch_source(model, runs, what, only=only)
            pieces = tokenizer.convert_ids_to_tokens
        else:
            ckpt = checkpoint_of(model, tokenizer, "patch", device)
            notes: list[str] = []
            pair = [torch.tensor([encode_source(ckpt, clean_text(t).text, notes)]) for t in (clean, corrupted)]
            if target is None:
                ids = list(_analyze(ckpt, clean).target_ids)
            elif isinstance(target, str):
                ids = encode_prefix(ckpt, clean_text(target).text, notes)
            else:
                ids = [int(i) for i in target]
            warn_cut(notes)
            chosen = [None if t is None else token_id(ckpt, t) for t in (answer, versus)]
            runs = prepare_translator(ckpt, *pair, torch.tensor([ids]), asked, *chosen)
            if runs_only:
                found = None
            elif approximate:
                found = attribution_patch_translator(ckpt, runs)
            else:
                found = patch_translator(ckpt, runs, what, only=only)
            decoder = runs.target
            pieces = ckpt.tokenizer.pieces
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None
    shown = lambda ids: [display_piece(p) for p in pieces(list(ids))]
    labels = _PairLabels(
        pair_labels(shown(pair[0][0].tolist()), shown(pair[1][0].tolist())),
        pair_labels(*[shown(decoder[0].tolist())] * 2),
        *shown([runs.answer, runs.versus]),
    )
    return found, labels, runs


def _translator_rows(found, labels: _PairLabels) -> list[dict[str, Any]]:
    rows = []
    for (name, i), score in zip(found.cells, found.scores, strict=True):
        if not _our_name(name)[0] and not name.startswith(("encoder.layers.", "decoder.layers.")):
            rows.append({"module": name, "position": i + 1, "restored": float(score)})  # a library's own path
        elif found.what == "heads":
            stack, layer, _ = parse_sublayer_name(name)
            rows.append(
                {"attention": attention_type(name), "layer": layer + 1, "head": i + 1, "restored": float(score)}
            )
        else:
            stack, layer, _ = parse_sublayer_name(f"{name}.self_attn")  # every layer of both stacks has one
            token = (labels.source if stack == "encoder" else labels.target)[i]
            rows.append(
                {"stack": stack, "layer": layer + 1, "position": i + 1, "token": token, "restored": float(score)}
            )
    return rows


def _translator_table(found, labels: _PairLabels, approximate: bool = False) -> pd.DataFrame:
    table = pd.DataFrame(_translator_rows(found, labels))
    table = table.sort_values("restored", ascending=False, kind="stable").reset_index(drop=True)
    table.attrs |= {"answer": labels.answer, "versus": labels.versus, "clean": found.clean}
    table.attrs |= {"corrupted": found.corrupted, "approximate": approximate, "position": found.position + 1}
    return table


def _path_figure(table: pd.DataFrame) -> go.Figure:
    """One module path's patches as a one-row heatmap, in order of head or position."""
    across = "head" if "head" in table else "position"
    ordered = table.sort_values(across, kind="stable")
    grid = ordered["restored"].to_numpy(dtype=float)[None]
    labels = [str(t) for t in ordered.get("token", ordered[across])]
    title = (
        f"Activation patching: how much of ‘{table.attrs['answer']}’ − ‘{table.attrs['versus']}’ each patch restores"
    )
    return patching_heatmap(
        grid, "heads" if across == "head" else "residual", labels, title, rows=[table.attrs["patched"]]
    )


def _translator_figure(found, labels: _PairLabels, approximate: bool = False) -> go.Figure:
    """One row per sub-layer (heads) or per layer (residual) of both stacks, NaN where a stack has no such column."""
    rows = _translator_rows(found, labels)
    side = "attention" if found.what == "heads" else "stack"
    across = "head" if found.what == "heads" else "position"
    names = list(dict.fromkeys((r[side], r["layer"]) for r in rows))
    width = max(r[across] for r in rows)
    grid = np.full((len(names), width), np.nan)
    for r in rows:
        grid[names.index((r[side], r["layer"])), r[across] - 1] = r["restored"]
    title = patching_title(found.what, labels.answer, labels.versus, approximate)
    positions = [str(i + 1) for i in range(width)]
    return patching_heatmap(grid, found.what, positions, title, rows=[f"{a} {layer}" for a, layer in names])

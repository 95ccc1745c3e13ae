"""Attention Atlas in a notebook: load a checkpoint, analyse a text, draw the app's views, save a trace.

    import atlas
    atlas.offline()                                  # figures inline, plotly.js inside the notebook
    lm = atlas.load("lm-english")                    # a folder of checkpoints/, or any checkpoint path
    analysis = atlas.analyze(lm, "The cat sat on the mat.")
    atlas.head(analysis, layer=2, head=3)            # the Explore page's heatmap
    atlas.save(analysis, "cat.json")                 # the app's "Download JSON", byte for byte

Attention computed elsewhere becomes the same `Analysis` (analysis.imported): `from_huggingface` (a model's
`output_attentions=True`), `from_transformer_lens` (a `run_with_cache` cache), `from_arrays` (weights as arrays),
`read_trace` (a `.json` or `.npz` this app or `save` wrote). Their problems are `TraceError`s.

Layers, heads and token positions count from 1 here, as every label of the app and its URL do (`?L=2&H=3` is layer
2, head 3); the Analysis's arrays and the trace files stay 0-based. A number out of range is a ValueError that
names the valid range.

Each view is built by the `viz` functions the app's pages call, with the pages' titles and opening choices, so a
figure here equals the page's (tests/test_notebook.py compares `head` and `heads` with ui.charts'). This module
imports neither streamlit nor the pages; `import atlas` loads it on first use only (atlas/__init__.py), so
`python -m atlas` does not.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.io.base_renderers import NotebookRenderer

from analysis import seq2seq_tools
from analysis.ablation import head_importance, rank_by_attribution, ranking_setup
from analysis.agreement import agreement as _agreement
from analysis.agreement import translator_agreement as _translator_agreement_of
from analysis.analyze import Request, analyze_many
from analysis.analyze import analyze as _analyze
from analysis.attribution import Pass, attribute_many, decoder_inputs, never_guessed, token_id
from analysis.attribution import logit_lens_many as _logit_lens_many
from analysis.circuits import MODES, composition_of, random_like
from analysis.circuits import baseline as _chance
from analysis.circuits import composition as _composition
from analysis.corpus.run import Settings, run_corpus
from analysis.corpus.store import Corpus, open_corpus
from analysis.detectors import detect
from analysis.export import to_json, to_npz_bytes
from analysis.forced import forced as _forced
from analysis.fork import Branch, source_of
from analysis.fork import fork as _fork
from analysis.head_diff import LayoutError, head_differences
from analysis.head_diff import grids as head_grids
from analysis.imported import MAX_FILE_BYTES, TraceError, from_arrays, from_huggingface, from_transformer_lens
from analysis.imported import read_trace as _read_trace
from analysis.induction import measure
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
from analysis.record import Analysis, Block
from analysis.rollout import analysis_rollout
from analysis.score_parts import pass_inputs, row_parts
from analysis.seq2seq import Seq2SeqError, is_seq2seq
from analysis.seq2seq import layout as seq2seq_layout
from analysis.token_attribution import STEPS as TOKEN_STEPS
from analysis.token_attribution import token_attribution as _token_attribution
from inference import catalog
from inference.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from inference.decoding import Sampling
from inference.files import SourceError, check_target, read_source, user_path, write_file
from inference.pretrained.objects import LOADERS as OBJECT_LOADERS
from inference.pretrained.objects import from_transformers, is_transformers_model
from inference.text import InputError, clean_text, encode_prefix, encode_source
from model.forward import forward
from model.names import attention_type, layer_name, parse_block_name
from viz.agreement import agreement_frame
from viz.attribution import attribution_title, heads_heatmap, lens_heatmap, parts_frame
from viz.circuits import composition_heatmap, composition_table
from viz.forced import forced_frame
from viz.fork import fork_frame
from viz.heads import AVERAGE as AVERAGE  # head(): the mean of the layer's heads, Explore's "average of heads"
from viz.heads import grid_view, head_view
from viz.labels import display_piece, indexed_labels
from viz.masks import mask_view
from viz.paper import MIN_THRESHOLD, THRESHOLD, opening_threshold, paper_view
from viz.patching import pair_labels, patching_frame, patching_heatmap, patching_title
from viz.rollout import rollout_label, rollout_view
from viz.score_parts import score_parts_frame, score_parts_heatmap
from viz.stats import for_display, head_table, with_probe_scores
from viz.style import standalone_html
from viz.tables import heads_frame, position_labels, ranking_frame
from viz.token_attribution import token_attribution_frame, token_attribution_heatmap

__all__ = [
    "AnalysisWarning",
    "TraceError",
    "activations",
    "analyze",
    "composition",
    "composition_scores",
    "corpus",
    "forced",
    "fork",
    "from_arrays",
    "from_huggingface",
    "from_transformer_lens",
    "head",
    "head_stats",
    "heads",
    "load",
    "mask",
    "offline",
    "open_corpus",
    "paper",
    "read_trace",
    "rollout",
    "save",
    "save_figure",
    "score_parts",
]


# --- checkpoints, analyses, traces ---------------------------------------------------------------------------------


def load(path_or_name: str | Path) -> Checkpoint:
    """A checkpoint, loaded and checked (inference.checkpoint.load_checkpoint): a path to a checkpoint folder (or a
    published model's folder or .gguf file), or the bare name of one in the app's checkpoints folder
    (`$ATLAS_CHECKPOINTS`, else the repository's `checkpoints/`; inference.catalog.checkpoints_dir) or of an
    installed model package. An existing path wins over a name. CheckpointError (a ValueError) when neither is
    found, naming the checkpoints there."""
    if not isinstance(path_or_name, (str, Path)):
        raise CheckpointError(
            f"load takes a checkpoint's folder or name (a str or Path), not {type(path_or_name).__name__}"
        )
    return load_checkpoint(catalog.find_checkpoint(path_or_name))


def analyze(
    model: Checkpoint | object,
    text: str | Sequence[str] | Sequence[int] | torch.Tensor,
    *,
    tokenizer: object | None = None,
    target: str | None = None,
    k: int = 5,
    max_tokens: int = 64,
    continuation: int = 0,
    sampling: Sampling | None = None,
    device: str = "cpu",
) -> Analysis | list[Analysis]:
    """The Analysis of `text` by `model`: every head's weights, as the app's pages draw them; for a list of texts,
    one Analysis each, in order, run as one padded batch (analysis.analyze.analyze_many).

    - A loaded checkpoint (atlas.load; analysis.analyze.analyze): also the scores, mask, positional rows and each
      position's top `k` predictions, as the app computes them. An encoder-decoder reads `target` as its output so
      far (without it, its own output: greedy, or the beam its card measured better); a language model with
      `continuation` first writes that many tokens (greedy, or `sampling`). InputError (a ValueError) when the text
      cannot be read.
    - A `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer`, or a TransformerLens bridge of one:
      mapped onto our model (inference.pretrained.objects, the loader its saved folder goes through), then as a
      checkpoint: the same Analysis as `atlas.load` of its folder, tokenized by the same rule
      (docs/published-models.md: a decoder reads bos + the text's tokens).
    - A `transformers` encoder-decoder (Marian, BART, T5, any of q/k/v and an output projection) with its
      `tokenizer`: run by its own forward where it is (analysis.seq2seq_tools), on the source and, as the
      decoder's input after its start token, its greedy output (`generate`, one beam, up to `max_tokens`) or
      `target` (read as its tokenizer reads a target, `text_target=`); every head of the encoder, the decoder
      and the cross-attention, and each decoder position's top `k` predictions.
    - Any other `transformers` model (decoder-only or encoder-only) with its `tokenizer`: run once on the text
      with `output_attentions=True`, switched to eager attention for the call (sdpa and flash attention return no
      weights) and back after; then `from_huggingface`. A decoder-only model reads bos first here too.
    - A TransformerLens 4 model that is not a bridge of those (a `TransformerBridge`, as
      `TransformerBridge.boot_transformers(name)` gives; TransformerLens 4 has no HookedTransformer):
      `model.run_with_cache(text)` and `model.to_str_tokens(text)`, then `from_transformer_lens`.

    The other keywords are a checkpoint's; a model only run by its library gives weights only (no scores or
    predictions). A text longer than the model's context is cut to it with a warning (`AnalysisWarning`) that
    says so, whatever the model. `device`: "cpu" (the default) or "cuda" for a model this app runs (a checkpoint,
    a mapped object; ValueError when no GPU is here); every circuit function takes it too.

    `text` may be token ids instead (a list of ints, or a tensor of one row as `tokenizer(text,
    return_tensors="pt")["input_ids"]`) for a language model this app runs: read as they are, the start token put
    first when they do not begin with it, never cut; the Analysis's text is what they decode to. The circuit
    functions (`logit_attribution`, `logit_lens`, `patch`, with their `_scores`) take ids the same way."""
    ids = _is_ids(text)
    texts = [text] if ids else _texts(text, "analyze")
    model, tokenizer = _mapped(model, tokenizer, "analyze")
    if isinstance(model, Checkpoint):
        if tokenizer is not None:
            raise ValueError("a loaded checkpoint brings its own tokenizer: leave tokenizer out")
        model = _on(model, device)
        given = [_token_ids(model, text, "analyze")] if ids else [(t, None) for t in texts]
        requests = [Request(t, target, k, max_tokens, continuation, sampling, i) for t, i in given]
        results = analyze_many(model, requests)
        for index, result in enumerate(results):
            if isinstance(result, InputError):
                if len(texts) == 1:
                    raise result
                raise InputError(f"text {index + 1}: {result}") from result
            _warn_cut(result.notes)
        return results if isinstance(text, (list, tuple)) and not ids else results[0]
    if _device(device).type != "cpu":
        raise ValueError("device= moves the models this app maps; a library's own model runs where it is: model.to()")
    if ids:
        raise ValueError(
            "token ids go to a loaded checkpoint or a mapped GPT-2, Llama, Qwen2 or GPT-NeoX; this model is run by "
            "its own library on a text: pass the text"
        )
    if hasattr(model, "run_with_cache") and hasattr(model, "to_str_tokens"):
        found = [_transformer_lens(model, t) for t in texts]
    elif is_seq2seq(model):
        found = [_seq2seq_analysis(model, t, tokenizer, target, k, max_tokens) for t in texts]
    elif isinstance(model, torch.nn.Module) and hasattr(model, "config"):
        found = [_huggingface(model, t, tokenizer) for t in texts]
    else:
        raise TypeError(
            f"analyze runs a loaded checkpoint (atlas.load), a Hugging Face model (with tokenizer=) or a "
            f"TransformerLens model, not {type(model).__name__}"
        )
    return found if isinstance(text, (list, tuple)) else found[0]


class AnalysisWarning(UserWarning):
    """Something was changed in what the model read (a text cut to the context): the message says what."""


def _warn_cut(notes: Sequence[str]) -> None:
    """Each note saying the input was cut, as a warning: a notebook shows it, where a note inside the Analysis is
    easily missed."""
    for note in notes:
        if " was cut " in note:
            warnings.warn(note, AnalysisWarning, stacklevel=3)


def _texts(text: object, where: str) -> list[str]:
    """`text` as a list of texts: one str, or a non-empty list or tuple of them."""
    if isinstance(text, str):
        return [text]
    if isinstance(text, (list, tuple)) and text and all(isinstance(t, str) for t in text):
        return list(text)
    if isinstance(text, (list, tuple)):
        bad = (
            "an empty list"
            if not text
            else f"a list holding {type(next(t for t in text if not isinstance(t, str))).__name__}"
        )
        raise TypeError(f"{where} reads a text (a str) or a list of texts, not {bad}")
    raise TypeError(f"{where} reads a text (a str) or a list of texts, not {type(text).__name__}")


def _is_ids(text: object) -> bool:
    """Whether `text` is token ids rather than text: a non-empty list or tuple of whole numbers, or an integer
    tensor of one row ((T,) or (1, T), as a tokenizer's `return_tensors="pt"` gives)."""
    if isinstance(text, torch.Tensor):
        return not text.is_floating_point() and not text.is_complex() and text.dtype != torch.bool
    return (
        isinstance(text, (list, tuple))
        and bool(text)
        and all(isinstance(i, Integral) and not isinstance(i, bool) for i in text)
    )


def _token_ids(model: Checkpoint, ids: object, where: str) -> tuple[str, tuple[int, ...]]:
    """Token ids given instead of a text, for a language model: as the rule reads a text (docs/published-models.md),
    the start token first, put there when the ids do not begin with it; and the text they decode to, the Analysis's
    `text`. Read as they are otherwise: nothing is cut (more ids than the context is an InputError)."""
    if model.config.has_encoder:
        raise ValueError(
            f"{where} reads token ids for a language model only; {model.name} reads a text (its encoder's input "
            "goes through its own tokenizer)"
        )
    if isinstance(ids, torch.Tensor):
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.dim() != 1 or ids.numel() == 0:
            raise ValueError(f"{where} reads one row of token ids, (T,) or (1, T), not a tensor of {tuple(ids.shape)}")
        ids = ids.tolist()
    read = [int(i) for i in ids]  # type: ignore[union-attr]
    if read[0] != model.config.bos_id:
        read = [model.config.bos_id, *read]
    cfg = model.config
    if not all(0 <= i < cfg.vocab_size for i in read):
        raise InputError(f"token ids are 0 to {cfg.vocab_size - 1} for {model.name}; these have others")
    if len(read) > cfg.max_len:
        raise InputError(
            f"{len(read)} token ids with the start token, over {model.name}'s {cfg.max_len} positions: ids are read "
            f"as they are, never cut; pass at most {cfg.max_len - 1} after the start token"
        )
    return model.tokenizer.decode(read[1:]), tuple(read)


def _mapped(model: object, tokenizer: object, where: str) -> tuple[object, object]:
    """A `transformers` GPT-2 or Llama as the Checkpoint its folder would give (tokenizer then inside it), also
    inside a TransformerLens bridge (`TransformerBridge.boot_transformers`: its `original_model`, its tokenizer);
    any other model and tokenizer as they are."""
    inner = getattr(model, "original_model", None)
    if hasattr(model, "run_with_cache") and is_transformers_model(inner) and inner.config.model_type in OBJECT_LOADERS:
        model, tokenizer = inner, tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if is_transformers_model(model) and model.config.model_type in OBJECT_LOADERS:
        if tokenizer is None:
            raise ValueError(
                f"a Hugging Face model needs its tokenizer: atlas.{where}(model, text, "
                "tokenizer=AutoTokenizer.from_pretrained(...))"
            )
        return from_transformers(model, tokenizer), None
    return model, tokenizer


def _device(device: object) -> torch.device:
    """`device` ("cpu", "cuda", "cuda:1", a torch.device) checked to be here: a ValueError of one line otherwise."""
    try:
        chosen = torch.device(device)  # type: ignore[arg-type]
    except (RuntimeError, TypeError):
        # from None: the one line says it all; torch's own parse error under it would read as a crash
        raise ValueError(f'device must be "cpu" or "cuda" (or "cuda:N"), not {device!r}') from None
    if chosen.type == "cpu":
        return chosen
    if chosen.type != "cuda":
        raise ValueError(f'device {device!r}: this app runs models on "cpu" or "cuda"')
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for, but torch finds no CUDA GPU here: leave device out (CPU)")
    if chosen.index is not None and chosen.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), from cuda:0")
    return chosen


def _on(ckpt: Checkpoint, device: object) -> Checkpoint:
    """`ckpt` with its model on `device`: itself when it is there already, else a copy moved there (the caller's
    model stays where it was, for the calls that do not ask)."""
    chosen = _device(device)
    here = next(ckpt.model.parameters()).device
    if here.type == chosen.type and (chosen.index is None or here.index == chosen.index):
        return ckpt
    return dataclasses.replace(ckpt, model=copy.deepcopy(ckpt.model).to(chosen))


def _checkpoint(model: object, tokenizer: object, where: str, device: object = "cpu") -> Checkpoint:
    """The Checkpoint a circuit function runs, on `device`: a loaded one, or a `transformers` GPT-2 or Llama mapped
    onto ours; anything else a TypeError (a model of another architecture: CheckpointError) that names what it
    takes."""
    mapped, tokenizer = _mapped(model, tokenizer, where)
    if isinstance(mapped, Checkpoint):
        if tokenizer is not None:
            raise ValueError("a loaded checkpoint brings its own tokenizer: leave tokenizer out")
        return _on(mapped, device)
    if is_seq2seq(model):
        raise ValueError(
            f"{where} runs a model this app maps onto its own, not a transformers encoder-decoder (which analyze, "
            "forced, rank_heads, fork, logit_lens, composition, agreement, patch and activations run by its forward)"
        )
    if is_transformers_model(model):
        return from_transformers(model, tokenizer)  # names the architectures it maps
    raise TypeError(
        f"{where} takes a loaded model (atlas.load), a transformers GPT-2, Llama, Qwen2 or GPT-NeoX with tokenizer=, "
        f"or a TransformerLens bridge of one, not {type(model).__name__}; another model saved with "
        "save_pretrained(folder) is read by atlas.load(folder) where its architecture is one of these"
    )


def _transformer_lens(model: Any, text: str) -> Analysis:
    """A TransformerLens model's attention on `text`: its cache's `blocks.{l}.attn.hook_pattern`."""
    ids = model.to_tokens(text)  # bos first (prepend_bos), the rule of our decoders too
    ids = _cut({"input_ids": ids}, getattr(getattr(model, "cfg", None), "n_ctx", None))["input_ids"]
    with torch.no_grad():
        _, cache = model.run_with_cache(ids)
    name = getattr(getattr(model, "cfg", None), "model_name", None) or "transformer_lens"
    return from_transformer_lens(cache, model.to_str_tokens(ids), name=str(name))


CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")  # transformers' names for a model's context


def _cut(inputs: dict[str, torch.Tensor], context: object) -> dict[str, torch.Tensor]:
    """`inputs` (each (1, T)) cut to the model's `context` positions, with a warning in the words a checkpoint's
    note uses (inference.text); unchanged when they fit or the context is unknown."""
    length = inputs["input_ids"].shape[1]
    if not isinstance(context, int) or isinstance(context, bool) or length <= context:
        return inputs
    warnings.warn(
        f"The text was cut from {length} to {context} tokens: that fills the model's {context} positions (its "
        "context).",
        AnalysisWarning,
        stacklevel=4,
    )
    return {key: value[:, :context] for key, value in inputs.items()}


def _huggingface(hf_model: Any, text: str, tokenizer: Any) -> Analysis:
    """A Hugging Face model's attention on `text`, computed with eager attention, the model's own implementation
    restored after (a model may be shared; sdpa is what it runs fastest with). Named `hf_model`: a foreign model,
    run by its own forward, not one of ours (which run through model.forward, tests/test_forward.py)."""
    if tokenizer is None or not callable(tokenizer):
        raise ValueError(
            "a Hugging Face model needs its tokenizer: atlas.analyze(model, text, "
            "tokenizer=AutoTokenizer.from_pretrained(...))"
        )
    inputs = tokenizer(text, return_tensors="pt")
    bos = getattr(hf_model.config, "bos_token_id", None)
    ids = inputs["input_ids"]
    if _writes_text(hf_model) and isinstance(bos, int) and (ids.shape[1] == 0 or int(ids[0, 0]) != bos):
        # one tokenization per model (docs/published-models.md): a decoder reads bos + the text's tokens
        inputs = {"input_ids": torch.cat([torch.tensor([[bos]]), ids], dim=1)}
    inputs = _cut(
        dict(inputs), next((getattr(hf_model.config, k) for k in CONTEXT_KEYS if hasattr(hf_model.config, k)), None)
    )
    device = next(hf_model.parameters()).device
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
    before = getattr(hf_model.config, "_attn_implementation", None)
    switch = before not in (None, "eager") and hasattr(hf_model, "set_attn_implementation")
    try:
        if switch:
            hf_model.set_attn_implementation("eager")
        with torch.no_grad():
            outputs = hf_model(
                **{key: v.to(device) for key, v in inputs.items()}, output_attentions=True, return_dict=True
            )
    finally:
        if switch:
            hf_model.set_attn_implementation(before)
    attentions = getattr(outputs, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        raise TraceError(
            f"{type(hf_model).__name__} returned no attention weights: load it with attn_implementation='eager' "
            "(sdpa and flash attention compute them without keeping them)"
        )
    name = getattr(hf_model.config, "name_or_path", "") or type(hf_model).__name__
    return from_huggingface(outputs, tokens, name=name)


def _seq2seq_analysis(hf_model: Any, text: str, tokenizer: Any, target: object, k: int, max_tokens: int) -> Analysis:
    """A `transformers` encoder-decoder's Analysis (analysis.seq2seq_tools.analysis); its bad inputs one line."""
    try:
        return seq2seq_tools.analysis(hf_model, tokenizer, text, target, k, max_tokens)
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None


def _writes_text(hf_model: Any) -> bool:
    """Whether a `transformers` model is a language model that writes text (can_generate): a decoder."""
    can_generate = getattr(hf_model, "can_generate", None)
    return bool(callable(can_generate) and can_generate())


def save(analysis: Analysis, path: str | Path) -> Path:
    """Write `analysis` as the Explore page's download buttons and `python -m atlas trace -o` do
    (analysis.export, docs/trace-format.md): `.json`, the trace format, or `.npz`, NumPy arrays. `read_trace`
    reads either back, on this machine or another. Returns the path written. ValueError of one line for any
    other suffix, a path that is not a regular file's (a folder, a named pipe, a device: never opened) and a
    write that fails (a full disk, a name too long, no permission), which leaves no half-written file
    (inference.files.write_file)."""
    if not isinstance(analysis, Analysis):
        raise TypeError(f"save writes an Analysis (atlas.analyze's, or an imported one), not {type(analysis).__name__}")
    if not isinstance(path, (str, Path)):
        raise TypeError(f"save writes to a path (a str or Path), not {type(path).__name__}")
    path = user_path(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".npz"):
        raise ValueError(f"{path}: save writes a .json trace or an .npz archive, not {suffix or 'a file without one'}")
    return write_file(path, to_json(analysis).encode() if suffix == ".json" else to_npz_bytes(analysis))


def read_trace(source: str | Path | bytes, filename: str | None = None) -> Analysis:
    """The Analysis in a trace file that `save`, the app's downloads or `python -m atlas trace -o` wrote
    (analysis.imported.read_trace: `.json` or `.npz`, told apart by the suffix): `read_trace("cat.json")` reads the
    file at that path (a str or Path); `read_trace(data, "cat.json")` reads bytes already in memory, as the app's
    upload does, `filename` saying which format they are. FileNotFoundError names a path with no file there (or a
    folder); every problem with the file itself (a named pipe or a device, never opened; a file too big, refused by
    its size unread; no permission; a `~user` this machine does not know; its content) is a TraceError naming it."""
    if filename is not None or isinstance(source, (bytes, bytearray, memoryview)):
        return _read_trace(source, filename)  # type: ignore[arg-type]  # it names a wrong type itself
    if not isinstance(source, (str, Path)):
        raise TraceError(
            f"read_trace reads a trace file's path (a str or Path), or its bytes with their file name, "
            f"not {type(source).__name__}"
        )
    try:
        path = user_path(source)
    except ValueError as exc:
        raise TraceError(str(exc)) from None
    try:  # measured before reading: a named pipe, a device or a file too big for a trace is refused unopened
        data = read_source(path, MAX_FILE_BYTES, "trace file")
    except (FileNotFoundError, SourceError) as exc:
        if path.is_dir() or isinstance(exc, FileNotFoundError):
            what = "a folder, not a trace file" if path.is_dir() else "no such file"
            raise FileNotFoundError(f"{path}: {what}; read_trace reads a .json or .npz that atlas.save wrote") from None
        raise TraceError(str(exc)) from None
    return _read_trace(data, path.name)


# --- choosing what to draw: names as the app has them, numbers counted from 1 --------------------------------------


def _attention(analysis: Analysis, attention: str | None, default: str | None = None) -> str:
    """`attention` checked against the analysis; None: `default`, else the first the model has."""
    present = analysis.attentions
    if attention is None:
        return default if default in present else present[0]
    if attention not in present:
        choices = ", ".join(f"{a!r} ({analysis.attention_label(a)})" for a in present)
        raise ValueError(f"this {analysis.kind} model has no {attention!r} attention: choose one of {choices}")
    return attention


def _index(value: object, count: int, what: str, where: str) -> int:
    """A 1-based `value` (a layer, a head, a position) checked to be 1 to `count`; returned 0-based."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{what} must be a whole number from 1 to {count}, not {value!r}")
    if not 1 <= int(value) <= count:
        hint = " (they count from 1, as the app's labels do)" if int(value) == 0 else ""
        raise ValueError(f"{what} {value} is out of range: {where} has {what}s 1 to {count}{hint}")
    return int(value) - 1


def _block(analysis: Analysis, attention: str, layer: int) -> tuple[Block, int]:
    """The block of 1-based `layer` of `attention`, and the layer 0-based."""
    layers = analysis.layers(attention)
    index = _index(layer, len(layers), "layer", analysis.attention_label(attention))
    return analysis.block(attention, layers[index]), layers[index]


def _heads(block: Block, heads: Sequence[int], where: str) -> list[int]:
    return [_index(h, block.n_heads, "head", where) for h in heads]


def _opening_attention(analysis: Analysis) -> str:
    """Where Explore and the Paper view open: the cross-attention when the model has one, else its first."""
    return "decoder.cross_attn" if "decoder.cross_attn" in analysis.attentions else analysis.attentions[0]


# --- the app's views -----------------------------------------------------------------------------------------------


def head(
    analysis: Analysis, layer: int, head: int | str, attention: str | None = None, norms: bool = False
) -> go.Figure:
    """The Explore page's heatmap of one head: queries as rows, keys as columns, the weights on a fixed 0–1 scale.

    `layer` and `head` count from 1 (`head="average"`: the mean of the layer's heads); `attention` is
    "encoder.self_attn", "decoder.self_attn" or "decoder.cross_attn" (None: the cross-attention if the model has
    one, else its first, as the page opens); `norms=True`: each key's share of what the row moves, the page's
    "weight × value norm" switch (see `value_weighted`)."""
    attention = _attention(analysis, attention, _opening_attention(analysis))
    block, index = _block(analysis, attention, layer)
    where = f"layer {index + 1} of {analysis.attention_label(attention)}"
    h = AVERAGE if head == AVERAGE else _index(head, block.n_heads, "head", where)
    weights = (block.value_weighted() if norms else block).weights
    label = analysis.attention_label(attention)
    return head_view(weights, block.query_pieces, block.key_pieces, label, index, h, norms)


def heads(analysis: Analysis, attention: str | None = None, norms: bool = False) -> go.Figure:
    """The Explore page's grid of every head of one attention: a row per layer (layer 1 on top), a column per head,
    each head a thumbnail of its weights. `attention` and `norms` as in `head`."""
    attention = _attention(analysis, attention, _opening_attention(analysis))
    shown = analysis.value_weighted() if norms else analysis
    return grid_view(shown.stacked(attention), analysis.attention_label(attention), norms)


def paper(
    analysis: Analysis,
    layer: int,
    head: int | None = None,
    attention: str | None = None,
    query: int | None = None,
    threshold: float | None = None,
) -> go.Figure:
    """The Paper view (the picture of Figures 3–5 of "Attention Is All You Need"): a line from each query token on
    the left to each key token on the right for every weight ≥ `threshold`, its opacity the weight, one colour per
    head. `layer`, `head` and `query` (a token position) count from 1; `head=None`: every head of the layer;
    `query=None`: every query token's lines. `threshold` None: where the page's slider opens, 0.1, or the largest
    weight drawn where that is smaller (not below 0.05). `attention` as in `head`."""
    attention = _attention(analysis, attention, _opening_attention(analysis))
    block, index = _block(analysis, attention, layer)
    where = f"layer {index + 1} of {analysis.attention_label(attention)}"
    chosen = None if head is None else _heads(block, [head], where)
    position = None if query is None else _index(query, len(block.query_pieces), "query position", "the text")
    weights = block.weights if chosen is None else block.weights[chosen]
    if threshold is None:
        threshold = opening_threshold(weights, position, THRESHOLD, MIN_THRESHOLD)
    one = None if chosen is None else chosen[0]
    return paper_view(block, analysis.attention_label(attention), index, one, position, threshold)


def rollout(
    analysis: Analysis,
    layer: int | None = None,
    attention: str | None = None,
    residual: bool = True,
    heads: Sequence[int] | None = None,
) -> go.Figure:
    """The Attention rollout page (Abnar & Zuidema 2020): each layer's head-averaged attention, with the residual as
    0.5·A + 0.5·I (`residual=False`: the raw product), multiplied through layers 1 to `layer`; row i is what
    position i draws from each input token. `layer` counts from 1 (None: the last); `heads` the heads averaged,
    from 1 (None: all). `attention` as in `head`, but None opens on the model's first attention, as the page does;
    "decoder.cross_attn" follows an encoder-decoder's output positions back to the source tokens."""
    attention = _attention(analysis, attention)
    first = analysis.block(attention, analysis.layers(attention)[0])
    where = analysis.attention_label(attention)
    picked = None
    if heads is not None:
        if not len(heads):
            raise ValueError(f"no head to average: give heads 1 to {first.n_heads}, or None for all")
        picked = _heads(first, heads, where)
        picked = None if len(set(picked)) == first.n_heads else picked
    result = analysis_rollout(analysis, attention, residual, picked)
    index = result.n_layers - 1 if layer is None else _index(layer, result.n_layers, "layer", where)
    label = rollout_label(analysis, attention)
    return rollout_view(result.maps, result.query_pieces, result.key_pieces, label, index, result.heads, residual)


def mask(analysis: Analysis, attention: str | None = None) -> go.Figure:
    """The Masks page's mask of the analysed input: which key each query may attend to (the padding and no-peek
    rules applied; every layer of an attention has the same). `attention` as in `head`, but None opens on the
    model's first attention, as the page's first tab."""
    attention = _attention(analysis, attention)
    block = analysis.block(attention, analysis.layers(attention)[0])
    return mask_view(block.mask, block.query_pieces, block.key_pieces, analysis.attention_label(attention))


def value_weighted(analysis: Analysis) -> Analysis:
    """`analysis` with every head's weights replaced by each key's share of what the query's row moves,
    ‖α_ij · v_j W_O^h‖ / Σ_j ‖α_ij · v_j W_O^h‖ (Kobayashi et al. 2020), the app's "weight × value norm": every
    view draws it as it draws weights (`atlas.head(atlas.value_weighted(analysis), 2, 3)`); `analyze` of a
    `transformers` encoder-decoder has them too. ValueError for attention taken from outside (a trace file, a
    model's outputs given to `from_huggingface`, a TransformerLens cache), which comes without values: the
    message names the models that have them."""
    if not isinstance(analysis, Analysis):
        raise TypeError(f"value_weighted takes an Analysis (atlas.analyze), not {type(analysis).__name__}")
    return analysis.value_weighted()


def head_stats(
    analysis: Analysis,
    model: Checkpoint | object | None = None,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """The Head statistics page's table: one row per head of every block, layers and heads counted from 1, with
    its entropy (bits), mean distance, and the weight on the previous token, the first token and its own
    position, averaged over the queries of the analysed text (viz.stats.head_table). The page draws no figure of
    it.

    Given the decoder-only `model` the analysis came from, two more columns, as the page shows for a model: each
    self-attention head's "induction" and "previous_token_probe" scores on the induction probe, `<s>` and 50 random
    tokens repeated (analysis.induction.measure: its mean weight on the token after the query's earlier copy, and
    on the token just before; 1 = a perfect induction or previous-token head), NaN for a head the probe does not
    score. The probe does not depend on the text; it runs the model once, on 4 probes of 101 tokens.
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if not isinstance(analysis, Analysis):
        raise TypeError(f"head_stats takes an Analysis (atlas.analyze), not {type(analysis).__name__}")
    table = head_table(analysis)
    if model is None:
        return for_display(table)
    model = _checkpoint(model, tokenizer, "head_stats", device)
    if model.config.has_encoder:
        raise ValueError(
            f"{model.name} is an {model.config.kind} model: the induction probe runs a decoder-only model on a "
            "repeated run of random tokens; leave model out for the table without its columns"
        )
    probe = measure(model.model, model.config.vocab_size, model.config.bos_id)
    return for_display(with_probe_scores(table, probe.induction, probe.previous_token))


def rank_heads(
    model: Checkpoint | object,
    text: str,
    mode: str = "zero",
    approximate: bool = False,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """Head ablation's "Rank every head": each head switched off alone (`mode` "zero": its output becomes 0;
    "mean": its mean over the positions), ranked by the KL divergence of the predictions from the intact model's
    (at the last position for a language model, averaged over the greedy output's steps for a translator, over
    every position for an encoder), the largest first; layers and heads from 1. Each head its own run, up to 64 runs
    a forward pass side by side (analysis.ablation.rank_heads: one batch row a head, equal to a pass a head);
    `approximate`: one forward and one backward pass for all (attribution patching), ranked by the first-order drop
    in the log-probability of the top prediction ("log p drop (approx.)").
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`; or a `transformers`
    encoder-decoder with its `tokenizer`, run by its own forward (its heads' outputs cut by hooks, no
    `approximate`)."""
    if mode not in ("zero", "mean"):
        raise ValueError(f"mode is 'zero' or 'mean', not {mode!r}")
    if is_seq2seq(model) and not approximate:
        if _device(device).type != "cpu":
            raise ValueError(
                "device= moves the models this app maps; a library's own model runs where it is: model.to()"
            )
        analysis = seq2seq_tools.analysis(model, tokenizer, text)
        table = ranking_frame(analysis, seq2seq_tools.rank_heads(model, tokenizer, text, mode))
        return table.sort_values("KL (nats)", ascending=False, kind="stable").reset_index(drop=True)
    model = _checkpoint(model, tokenizer, "rank_heads", device)
    analysis = _analyze(model, text)
    if approximate:
        table = rank_by_attribution(model, ranking_setup(model, text), mode)
        return ranking_frame(analysis, table, "log p drop (approx.)")
    return ranking_frame(analysis, head_importance(model, text, mode))


def detect_heads(
    model: Checkpoint | Analysis | Sequence[Analysis] | object,
    texts: str | Sequence[str] | None = None,
    pattern: str | np.ndarray = "previous token",
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """Head statistics' "Detect a pattern": the share of each self-attention head's attention that falls where
    `pattern` points (1: all of it), over `texts` — one string, or a list (a file's lines) — analysed by `model`,
    or over Analyses given as `model` (from `analyze`, `from_huggingface`, `read_trace`; `texts` None). `pattern`:
    "previous token", "first token", "current token", "same token", "induction", or a (T, T) array of 0 and 1 that
    fits every text (TransformerLens's `detect_head`). One row per head (layer and head from 1), highest first.
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if not isinstance(model, Analysis) and not (isinstance(model, (list, tuple)) and model):
        if texts is None:
            raise ValueError("detect_heads needs texts to run the model on: a string or a list of them")
        model = _checkpoint(model, tokenizer, "detect_heads", device)
        lines = [texts] if isinstance(texts, str) else list(texts)
        analyses = _analyzed(model, lines)
    else:
        if texts is not None:
            raise ValueError("texts go with a loaded model; Analyses carry their own texts")
        analyses = [model] if isinstance(model, Analysis) else list(model)
        if not all(isinstance(a, Analysis) for a in analyses):
            raise TypeError("detect_heads takes a loaded model (atlas.load) with texts, or Analyses")
    scores = detect(analyses, pattern)
    return heads_frame(scores, {a: analyses[0].attention_label(a) for a in scores}, "score")


def _analyzed(model: Checkpoint, lines: list[str]) -> list[Analysis]:
    """Each line's Analysis, from one padded batch (analyze_many); an InputError names the line (from 1)."""
    found = []
    for index, result in enumerate(analyze_many(model, [Request(line) for line in lines])):
        if isinstance(result, InputError):
            if len(lines) == 1:
                raise result
            raise InputError(f"text {index + 1}: {result}") from result
        found.append(result)
    return found


def corpus(
    model: Checkpoint | str | Path,
    texts: str | Path,
    out: str | Path,
    *,
    batch: int = 16,
    shard: int = 1000,
    top_k: int = 20,
    sample: int = 256,
    device: str = "cpu",
    progress: bool = True,
) -> Corpus:
    """Every self-attention head over a corpus, as `python -m atlas corpus` makes it (analysis.corpus.run;
    docs/corpus.md): `texts` a .txt (a text a line), .jsonl (a "text" field a line), .parquet (a "text" column) or a
    folder of them, streamed through `model` (loaded, or a name or path for `load`) `batch` texts at a time and
    reduced per head into the folder `out`, in shards of `shard` texts; a folder of the same run continues where it
    stopped. Returns `open_corpus(out)`. CorpusError (a ValueError) for input it cannot read, a model it cannot
    run, or an `out` that holds something else."""
    ckpt = load(model) if isinstance(model, (str, Path)) else _checkpoint(model, None, "corpus", device)
    settings = Settings(batch, shard, top_k, sample)
    run_corpus(_on(ckpt, device), user_path(texts), user_path(out), settings, progress=progress)
    return open_corpus(out)


# --- circuits: what the weights say about heads ------------------------------------------------------------------


def composition(
    model: Checkpoint | object,
    mode: str = "K",
    stack: str | None = None,
    *,
    centre: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure:
    """How the self-attention heads of `model` compose, from its weights alone (analysis.circuits: Elhage et al.
    2021): for `mode` "Q", "K" or "V", how much each later head's queries, keys or values read what each earlier
    head writes, as ‖W_OV^early · W_QK^late‖ over the product of their norms, between 0 and 1. Rows are the heads
    that write, columns the heads that read, labelled "L2 H3" (from 1). An induction head K-composes with a
    previous-token head. `stack`: "encoder" or "decoder" (default: the model's first). `model`: a loaded
    checkpoint, or a `transformers` GPT-2 or Llama with its `tokenizer` (every circuit function takes either).
    `centre`: the reading matrices centred where heads read through a LayerNorm, as TransformerLens's `fold_ln`
    (analysis.circuits). A `transformers` encoder-decoder: its own weights (analysis.seq2seq_tools.head_matrices;
    `stack` default "encoder"), no `centre`."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
    if is_seq2seq(model):
        return composition_heatmap(_seq2seq_composition(model, stack, centre, device).scores[mode], mode)
    model = _checkpoint(model, tokenizer, "composition", device)
    return composition_heatmap(_composition(model.model, stack, centre).scores[mode], mode)


def composition_scores(
    model: Checkpoint | object,
    stack: str | None = None,
    *,
    centre: bool = False,
    baseline: int | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """`composition`'s scores as a table: one row per pair of heads that can compose (earlier layer and head, later
    layer and head, from 1) with its Q, K and V scores, the strongest K-composition first. `centre` as
    `composition`. `baseline` (a seed): `.attrs["baseline"]` holds each mode's mean score over heads of the same
    shapes with random weights drawn with that seed, what chance gives, and the table a "K over baseline"
    column (the score divided by it); None: no baseline."""
    if baseline is not None and (isinstance(baseline, bool) or not isinstance(baseline, Integral)):
        raise ValueError(f"baseline is the random weights' seed, a whole number (or None), not {baseline!r}")
    if is_seq2seq(model):
        composed = _seq2seq_composition(model, stack, centre, device)
    else:
        model = _checkpoint(model, tokenizer, "composition_scores", device)
        composed = _composition(model.model, stack, centre)
    if composed.n_layers < 2:
        raise ValueError("heads compose across layers: a model of one layer has no pair to score")
    table = composition_table(composed.scores)
    table.attrs["centre"] = centre
    if baseline is not None:
        if is_seq2seq(model):
            drawn = composition_of(random_like(seq2seq_tools.head_matrices(model, composed.stack), int(baseline)))
            chance = {m: float(np.nanmean(v)) for m, v in drawn.scores.items()}
        else:
            chance = _chance(model.model, int(baseline), stack)
        table["K over baseline"] = table["K"] / chance["K"]
        table.attrs["baseline"] = chance
    return table


def _seq2seq_composition(hf_model: Any, stack: str | None, centre: bool, device: object) -> Any:
    """A `transformers` encoder-decoder's composition scores from its weights (analysis.seq2seq_tools)."""
    if _device(device).type != "cpu":
        raise ValueError("device= moves the models this app maps; a library's own model runs where it is: model.to()")
    if centre:
        raise ValueError("centre folds a pre-norm LayerNorm's centring; a transformers encoder-decoder's is not read")
    if stack not in (None, "encoder", "decoder"):
        raise ValueError(f"stack is 'encoder' or 'decoder', not {stack!r}")
    try:
        return composition_of(seq2seq_tools.head_matrices(hf_model, stack or "encoder"))
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None


# --- what heads write: direct logit attribution and the logit lens ------------------------------------------------


def _decoder_passes(model: Checkpoint, text: object, where: str) -> list[tuple[Analysis, Pass]]:
    """Each text's Analysis (one text, a row of token ids, or a list of texts: analysed as one padded batch,
    analysis.analyze.analyze_many) with the decoder pass it made (decoder_inputs), in order; an InputError names
    the text of a list that cannot be read (from 1)."""
    if _is_ids(text):
        decoded, ids = _token_ids(model, text, where)
        requests = [Request(decoded, target_ids=ids)]
    else:
        requests = [Request(t) for t in _texts(text, where)]
    found = []
    for index, result in enumerate(analyze_many(model, requests)):
        if isinstance(result, InputError):
            if len(requests) == 1:
                raise result
            raise InputError(f"text {index + 1}: {result}") from result
        _warn_cut(result.notes)
        found.append((result, decoder_inputs(model, result.text, result.target_ids)))
    return found


def _attributed(model, text, position, token, versus, where) -> list[tuple[Analysis, Any]]:
    """Each text's Analysis and its Attribution at `position` (from 1; None: the model's default), all texts'
    from one padded batch (analysis.attribution.attribute_many)."""
    passes = _decoder_passes(model, text, where)
    indices = []
    for _, (_, target) in passes:
        steps = target.shape[1]
        if position is None:  # a translator's first output word; a language model's next token after the text
            indices.append(0 if model.config.has_cross_attention else steps - 1)
        else:
            indices.append(_index(position, steps, "position", f"the decoder's input ({steps} tokens)"))
    chosen = [None if t is None else token_id(model, t) for t in (token, versus)]
    parts = attribute_many(model, [p for _, p in passes], indices, *chosen)
    return [(analysis, found) for (analysis, _), found in zip(passes, parts, strict=True)]


def _one_or_list(text: object, found: list) -> Any:
    """A list of texts' answers as a list, in order; one text's (or one row of ids') as itself."""
    return found if isinstance(text, (list, tuple)) and not _is_ids(text) else found[0]


def logit_attribution(
    model: Checkpoint | object,
    text: str | Sequence[int] | torch.Tensor,
    position: int | None = None,
    token: int | str | None = None,
    versus: int | str | None = None,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure:
    """The Logit attribution page's heatmap: what each head wrote directly toward `token` (an id, a piece such as
    "▁mat", or a word read as one piece; default: the model's top guess) after decoder position `position` (from
    1; default: the last token of a language model's text, a translator's first output word), minus what it wrote
    toward `versus` when given. The norms' scales are frozen at this pass's values, so every part — heads,
    feed-forwards, embeddings, positions, biases — sums to the logit (`logit_attribution_scores`)."""
    model = _checkpoint(model, tokenizer, "logit_attribution", device)
    if not isinstance(text, str) and not _is_ids(text):
        raise TypeError(
            f"logit_attribution draws one text (a str), not {type(text).__name__}: "
            "logit_attribution_scores takes a list"
        )
    [(analysis, parts)] = _attributed(model, text, position, token, versus, "logit_attribution")
    labels = {a: analysis.attention_label(a) for a in parts.heads}
    named = model.tokenizer.pieces([parts.token] + ([] if parts.versus is None else [parts.versus]))
    where = position_labels(analysis)[parts.position]
    title = attribution_title(display_piece(named[0]), where, display_piece(named[1]) if len(named) > 1 else None)
    return heads_heatmap(parts.heads, labels, title)


def logit_attribution_scores(
    model: Checkpoint | object,
    text: str | Sequence[str] | Sequence[int] | torch.Tensor,
    position: int | None = None,
    token: int | str | None = None,
    versus: int | str | None = None,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame | list[pd.DataFrame]:
    """`logit_attribution`'s parts as a table: one row per head (attention, layer and head from 1, its
    contribution), the largest push first, then one row per feed-forward layer and the embeddings, positions and
    biases; the contributions sum to the model's logit, kept with the token, versus and position (from 1) in
    `.attrs`. A list of texts gives a list of tables, in order."""
    model = _checkpoint(model, tokenizer, "logit_attribution_scores", device)
    found = _attributed(model, text, position, token, versus, "logit_attribution_scores")
    return _one_or_list(text, [_parts_table(model, analysis, parts) for analysis, parts in found])


def token_attribution(
    model: Checkpoint | object,
    text: str,
    position: int | None = None,
    token: int | str | None = None,
    *,
    steps: int = TOKEN_STEPS,
    figure: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame | go.Figure:
    """Which input tokens the prediction of `token` (an id, a piece or a one-piece word; default: the model's top
    guess) after decoder position `position` (from 1; default as `logit_attribution`) rests on: one row per input
    token (a translator's source, then its decoder's input; each place from 1 within its stack) with a column per
    method — integrated gradients (`steps` equal parts from a baseline of zero embeddings), gradient × input,
    saliency, rollout and attention flow (texts up to 64 tokens a stack). `.attrs`: the logit, the baseline's
    logit, integrated gradients' gap to their difference, the token, the position and notes. `figure=True`: the
    app's heatmap of the same, methods × tokens, each row against its own largest value."""
    model = _checkpoint(model, tokenizer, "token_attribution", device)
    if not isinstance(text, str):
        raise ValueError(f"token_attribution reads one text (a str), not {type(text).__name__}")
    [(analysis, (_, target))] = _decoder_passes(model, text, "token_attribution")
    steps_in = target.shape[1]
    if position is None:
        index = 0 if model.config.has_cross_attention else steps_in - 1
    else:
        index = _index(position, steps_in, "position", f"the decoder's input ({steps_in} tokens)")
    chosen = None if token is None else token_id(model, token)
    found = _token_attribution(model, analysis, index, chosen, steps)
    for note in found.notes:
        warnings.warn(note, AnalysisWarning, stacklevel=2)
    named = model.tokenizer.pieces([found.token])[0]
    if figure:
        title = f"Which input tokens ‘{named}’ after {position_labels(analysis)[index]} rests on"
        return token_attribution_heatmap(found.pieces, found.stacks, found.scores, title)
    table = token_attribution_frame(found.pieces, found.stacks, found.scores)
    table.attrs |= {
        "logit": found.logit,
        "baseline": found.baseline,
        "gap": found.gap,
        "token": named,
        "position": index + 1,
        "notes": list(found.notes),
    }
    return table


def compare_models(
    first: Checkpoint | object,
    second: Checkpoint | object,
    text: str,
    *,
    figure: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame | go.Figure:
    """Two models on one text, head by head (analysis.head_diff): one row per head (its attention, layer and head
    from 1) with how far its attention moved from `first` to `second` — the total variation of a query's two rows
    of weights averaged over the queries (0: alike, 1: no key shared), the largest change of one weight, and the
    query (from 1, with its token) that moved most — the most changed head first. The models must share a
    tokenizer and a layout (layers, heads); a translator's second model is fed the first's output, so both
    decoders read the same tokens. `figure=True`: a layer × head heatmap of the total variation per attention.
    `tokenizer`: for a published model given as an object (both must read it alike)."""
    models = [_checkpoint(m, tokenizer, "compare_models", device) for m in (first, second)]
    if not isinstance(text, str):
        raise ValueError(f"compare_models reads one text (a str), not {type(text).__name__}")
    [ours] = analyze_many(models[0], [Request(text)])
    if isinstance(ours, InputError):
        raise ours
    again = Request(text, target_ids=ours.target_ids) if models[1].config.has_cross_attention else Request(text)
    [theirs] = analyze_many(models[1], [again])
    if isinstance(theirs, InputError):
        raise InputError(f"the second model: {theirs}") from theirs
    try:
        found = head_differences(ours, theirs)
    except LayoutError as exc:
        raise ValueError(f"compare_models matches heads one to one: {exc}") from None
    labels = {a: ours.attention_label(a) for a in ours.attentions}
    if figure:
        title = "How far each head moved from the first model to the second"
        return heads_heatmap(head_grids(found), labels, title, "total variation", signed=False)
    pieces = {a: ours.block(a, ours.layers(a)[0]).query_pieces for a in ours.attentions}
    table = pd.DataFrame(
        {
            "attention": [labels[d.attention] for d in found],
            "layer": [d.layer + 1 for d in found],
            "head": [d.head + 1 for d in found],
            "total variation": [d.total_variation for d in found],
            "largest change": [d.largest for d in found],
            "query": [d.query + 1 for d in found],
            "query token": [pieces[d.attention][d.query] for d in found],
        }
    )
    return table.sort_values("total variation", ascending=False, kind="stable").reset_index(drop=True)


def _parts_table(model: Checkpoint, analysis: Analysis, parts: Any) -> pd.DataFrame:
    """One Attribution as `logit_attribution_scores`' table."""
    labels = {a: analysis.attention_label(a) for a in parts.heads}
    table = parts_frame(parts.heads, parts.feed_forward, parts.embeddings, parts.positions, parts.biases, labels)
    named = model.tokenizer.pieces([parts.token] + ([] if parts.versus is None else [parts.versus]))
    table.attrs |= {"logit": parts.logit, "token": named[0], "versus": named[1] if len(named) > 1 else None}
    table.attrs["position"] = parts.position + 1
    return table


def forced(
    model: Checkpoint | object, text: str, reference: str, *, tokenizer: object | None = None, device: str = "cpu"
) -> pd.DataFrame:
    """Forced decoding, the Explore page's reference table: `reference` (a translator's reference translation of
    `text`, a language model's continuation of it) fed to the decoder token by token, and for each token (from 1)
    the probability the model gave it, its rank among the whole vocabulary (1: the model's own choice) and that
    choice with its probability. A translator's last row is the end of text. Raises InputError for an empty or too
    long reference. `model`: a loaded checkpoint, a mapped `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX (or a
    TransformerLens bridge of one) with `tokenizer`, run on `device`; or a `transformers` encoder-decoder (Marian,
    BART, T5) with its `tokenizer`, run by its own forward where it is, the reference read as its tokenizer reads
    a target (`text_target=`)."""
    if is_seq2seq(model):
        try:
            return forced_frame(seq2seq_tools.forced_rows(model, tokenizer, text, reference))
        except Seq2SeqError as exc:
            raise ValueError(str(exc)) from None
    model = _checkpoint(model, tokenizer, "forced", device)
    found = _forced(model, text, reference)
    table = forced_frame(found.rows)
    table.attrs["notes"] = found.notes
    return table


def logit_lens(
    model: Checkpoint | object,
    text: str | Sequence[str] | Sequence[int] | torch.Tensor,
    *,
    as_table: bool = False,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> go.Figure | pd.DataFrame | list[go.Figure] | list[pd.DataFrame]:
    """The logit lens: the stream after the embeddings and after each layer, read through the final norm and the
    output layer as if it were the last: each layer's top guess for the next token at every decoder position,
    coloured by its probability; the top row is the model's own prediction.

    `as_table`: the same as a DataFrame, one row per layer and position: "layer" (0: the embeddings, then 1 to L),
    "position" (from 1) and its "token", the "top guess" with its "probability", and "final guess probability"
    (what this layer gives the model's own final top guess). The guesses leave out the tokens no text is made of
    (analysis.attribution.never_guessed: padding, the unknown token, a start token never written); they are named
    in `.attrs["hidden"]`, this model's pieces. A list of texts gives a list of figures (or tables), in order, from
    one padded batch (analysis.attribution.logit_lens_many). A `transformers` encoder-decoder with its
    `tokenizer` (one text, its source): the decoder's stream on its greedy output, read through the final norm and
    output layer found to turn its last layer's output into its own logits (analysis.seq2seq_tools.lens), its
    special tokens left out."""
    if is_seq2seq(model):
        return _seq2seq_lens(model, text, as_table, tokenizer, device)
    model = _checkpoint(model, tokenizer, "logit_lens", device)
    passes = _decoder_passes(model, text, "logit_lens")
    lenses = _logit_lens_many(model, [p for _, p in passes])
    found = []
    for (analysis, _), lens in zip(passes, lenses, strict=True):
        if as_table:
            found.append(_lens_table(model, analysis, lens))
            continue
        readable = [[display_piece(p) for p in row] for row in lens.pieces]
        title = "The logit lens: each layer's guess for the next token"
        found.append(lens_heatmap(readable, lens.prob, position_labels(analysis), title))
    return _one_or_list(text, found)


def _seq2seq_lens(hf_model: Any, text: object, as_table: bool, tokenizer: Any, device: object) -> Any:
    """`logit_lens` of a `transformers` encoder-decoder on its translation of `text` (analysis.seq2seq_tools.lens):
    every guess over the whole vocabulary, its special tokens named in `.attrs["hidden"]` and left out."""
    if _device(device).type != "cpu":
        raise ValueError("device= moves the models this app maps; a library's own model runs where it is: model.to()")
    if not isinstance(text, str):
        raise TypeError(
            f"logit_lens of a transformers encoder-decoder reads one source text, not {type(text).__name__}"
        )
    try:
        found = seq2seq_tools.lens(hf_model, tokenizer, text)
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None
    probs = torch.softmax(found.logits.double(), dim=-1)  # (layers + 1, T, vocab)
    hidden = sorted(set(getattr(tokenizer, "all_special_ids", [])))
    shown = probs.clone()
    shown[..., hidden] = -1.0
    top = shown.argmax(-1)  # (layers + 1, T)
    prob = probs.gather(-1, top[..., None])[..., 0].numpy()
    final = probs[..., :].gather(-1, top[-1][None, :, None].expand(len(probs), -1, 1))[..., 0].numpy()
    pieces = [tokenizer.convert_ids_to_tokens(row.tolist()) for row in top]
    labels = indexed_labels(found.pair.target_pieces)
    if not as_table:
        readable = [[display_piece(p) for p in row] for row in pieces]
        return lens_heatmap(readable, prob, labels, "The logit lens: each layer's guess for the next token")
    rows = [
        {
            "layer": layer,
            "position": position + 1,
            "token": str(found.pair.target_pieces[position]),
            "top guess": str(guess),
            "probability": float(prob[layer, position]),
            "final guess probability": float(final[layer, position]),
        }
        for layer, guesses in enumerate(pieces)
        for position, guess in enumerate(guesses)
    ]
    table = pd.DataFrame(rows)
    table.attrs["hidden"] = [str(p) for p in tokenizer.convert_ids_to_tokens(hidden)]
    return table


def _lens_table(model: Checkpoint, analysis: Analysis, lens: Any) -> pd.DataFrame:
    """The logit lens's rows (analysis.attribution.LogitLens) as a long table, pieces as the tokenizer spells them."""
    rows = []
    for layer, guesses in enumerate(lens.pieces):
        for position, guess in enumerate(guesses):
            rows.append(
                {
                    "layer": layer,
                    "position": position + 1,
                    "token": str(analysis.target_pieces[position]),
                    "top guess": str(guess),
                    "probability": float(lens.prob[layer, position]),
                    "final guess probability": float(lens.final_prob[layer, position]),
                }
            )
    table = pd.DataFrame(rows)
    table.attrs["hidden"] = [str(p) for p in model.tokenizer.pieces(sorted(never_guessed(model.tokenizer)))]
    return table


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
    """The pair's ids (1, T) each: two texts as patching reads them, or two rows of token ids (`_token_ids`);
    PairError when their lengths differ."""
    if not _is_ids(clean) and not _is_ids(corrupted):
        notes: list[str] = []
        pair = pair_ids(model, clean, corrupted, notes)
        _warn_cut(notes)
        return pair
    if not (_is_ids(clean) and _is_ids(corrupted)):
        raise TypeError(f"{where} pairs two texts or two rows of token ids, not one of each")
    pair = [_token_ids(model, x, where)[1] for x in (clean, corrupted)]
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
    model = _checkpoint(model, tokenizer, "patch", device)
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

    `what` a module path patches that one activation (`activations` reads them): an attention block of ours
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
    model = _checkpoint(model, tokenizer, "patch_scores", device)
    if not (isinstance(clean, str) or _is_ids(clean)) or not (isinstance(corrupted, str) or _is_ids(corrupted)):
        cleans, corrupteds = _texts(clean, "patch_scores"), _texts(corrupted, "patch_scores")
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
    model = _checkpoint(model, tokenizer, "activations", device)
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
    """A module path of ours as what it patches: ("heads", block name) for an attention block, ("residual", layer
    name) for a layer's input (`resid_pre`) or output (`resid_post`: the next layer's input); ("", what) else."""
    for suffix, step in ((".resid_pre", 0), (".resid_post", 1)):
        if what.endswith(suffix):
            try:
                stack, layer, _ = parse_block_name(f"{what.removesuffix(suffix)}.self_attn")  # every layer has one
            except ValueError:
                return "", what
            return "residual", layer_name(stack, layer + step)
    try:
        parse_block_name(what)
    except ValueError:
        return "", what
    return "heads", what


PATCHABLE = "an attention block (decoder.layers.1.self_attn), or a layer's resid_pre or resid_post"


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
        ckpt = _checkpoint(model, tokenizer, "patch_scores", device)
        pair = _pair(ckpt, clean, corrupted, "patch_scores")
        chosen = [None if t is None else token_id(ckpt, t) for t in (answer, versus)]
        runs = prepare_ids(ckpt, *pair, *chosen)
        layers = len(runs.streams)
        stack, layer, _ = parse_block_name(name if kind == "heads" else f"{name}.self_attn")
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
            if _device(device).type != "cpu":
                raise ValueError(
                    "device= moves the models this app maps; a library's own model runs where it is: model.to()"
                )
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
            ckpt = _checkpoint(model, tokenizer, "patch", device)
            notes: list[str] = []
            pair = [torch.tensor([encode_source(ckpt, clean_text(t).text, notes)]) for t in (clean, corrupted)]
            if target is None:
                ids = list(_analyze(ckpt, clean).target_ids)
            elif isinstance(target, str):
                ids = encode_prefix(ckpt, clean_text(target).text, notes)
            else:
                ids = [int(i) for i in target]
            _warn_cut(notes)
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
            stack, layer, _ = parse_block_name(name)
            rows.append(
                {"attention": attention_type(name), "layer": layer + 1, "head": i + 1, "restored": float(score)}
            )
        else:
            stack, layer, _ = parse_block_name(f"{name}.self_attn")  # every layer of both stacks has one
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
    """One row per block (heads) or per layer (residual) of both stacks, NaN where a stack has no such column."""
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


# --- do the explanations agree? ----------------------------------------------------------------------------------


def agreement(
    model: Checkpoint | object,
    text: str,
    position: int | None = None,
    corrupted: str | Sequence[int] | None = None,
    *,
    target: str | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """Every self-attention head's importance for one prediction of a language model — the next token after
    `position` (from 1; default the text's last token), the model's top guess there — by seven methods, one column
    each (analysis.agreement): "attention" (the largest weight the position gives any token but the first, the
    start of text), "value-weighted attention" (the same, of `value_weighted`'s shares), "direct logit attribution"
    (what `logit_attribution_scores` gives the head), "ablation (zero)" and "ablation (mean)" (the KL divergence at
    the position with the head switched off alone, as `rank_heads`), "activation patching" and "attribution
    patching" (the share of the logit difference the head restores, as `patch_scores`). Rows: (layer, head) from 1.

    Patching needs a corrupted text of the same token count: `corrupted`; else the second text of the Compare pair
    the model's card measured when `text` is its first; else the text up to the position with the tokens between
    the start of text and it shuffled (seeded). `corrupted` may be token ids: `.attrs["corrupted_ids"]` (the start
    of text, then the corrupted run's tokens up to the position) given back as `corrupted=` runs the same patching
    again, where `.attrs["corrupted"]`, their decoded text, may re-tokenize to other tokens. `.attrs` names the
    answer, versus, the corrupted text and its ids and where they came from, and a note when the patching columns
    are NaN. The methods' Spearman correlations:
    `frame.abs().rank().corr()` ranks the signed columns by magnitude as the app does. Costs layers × heads × 2
    ablated runs, up to 64 a forward pass side by side, the patched runs and a few more passes; ValueError for a model
    that is not a language model or a position out of range.

    A translator (a loaded one, or a `transformers` encoder-decoder with its `tokenizer`, run by its own forward:
    direct logit attribution and attribution patching NaN there): its prediction after decoder `position` (None:
    the first output word) of `target` (None: its own output), held fixed for every run; one row per head of every
    attention of both stacks, indexed (attention, layer, head); attention columns and direct logit attribution
    for the decoder's heads (NaN for the encoder's), ablation and both patchings for all, the corrupted run a
    source of the same token count (`corrupted`; else the source shuffled between its first and last token,
    seeded).
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if is_seq2seq(model):
        if _device(device).type != "cpu":
            raise ValueError(
                "device= moves the models this app maps; a library's own model runs where it is: model.to()"
            )
        return _translator_agreement(model, text, position, corrupted, target, tokenizer)
    model = _checkpoint(model, tokenizer, "agreement", device)
    if model.config.has_cross_attention:
        return _translator_agreement(model, text, position, corrupted, target)
    if position is not None and (isinstance(position, bool) or not isinstance(position, Integral)):
        raise ValueError(f"position must be a whole number counted from 1, not {position!r}")
    if corrupted is not None and not isinstance(corrupted, str) and not _is_ids(corrupted):
        raise ValueError(f"corrupted is a text or a list of token ids, not {type(corrupted).__name__}")
    if isinstance(corrupted, torch.Tensor):
        corrupted = corrupted.reshape(-1).tolist()
    found = _agreement(model, text, None if position is None else int(position) - 1, corrupted)
    table = agreement_frame(found.scores)
    pieces = model.tokenizer.pieces
    table.attrs |= {"position": found.position + 1, "answer": pieces([found.answer])[0]}
    table.attrs["versus"] = None if found.versus is None else pieces([found.versus])[0]
    table.attrs["corrupted"] = None if found.corrupted is None else model.tokenizer.decode(list(found.corrupted[1:]))
    table.attrs["corrupted_ids"] = None if found.corrupted is None else list(found.corrupted)
    table.attrs |= {"corrupted_from": found.corrupted_from, "note": found.note}
    return table


def _translator_agreement(
    model: Checkpoint | Any, text: str, position: object, corrupted: object, target: object, tokenizer: Any = None
):
    """`agreement` of a translator (analysis.agreement.translator_agreement) as its table."""
    if position is not None and (isinstance(position, bool) or not isinstance(position, Integral)):
        raise ValueError(f"position must be a whole number counted from 1, not {position!r}")
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target is the decoder's text (a str), not {type(target).__name__}")
    if isinstance(corrupted, torch.Tensor):
        corrupted = corrupted.reshape(-1).tolist()
    asked = None if position is None else int(position) - 1
    if is_seq2seq(model):
        try:
            found = seq2seq_tools.agreement(model, tokenizer, text, asked, corrupted, target)
        except Seq2SeqError as exc:
            raise ValueError(str(exc)) from None
        n_heads = seq2seq_layout(model).n_heads
        pieces = tokenizer.convert_ids_to_tokens

        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids, skip_special_tokens=True)
    else:
        found = _translator_agreement_of(model, text, asked, corrupted, target)
        n_heads, pieces, decode = model.config.n_heads, model.tokenizer.pieces, model.tokenizer.decode
    rows, index = [], []
    for name in found.scores["attention"]:
        stack, layer, type_ = parse_block_name(name)
        for head in range(n_heads):
            index.append((f"{stack}.{type_}", layer + 1, head + 1))
            rows.append([float(found.scores[m][name][head]) for m in found.scores])
    index = pd.MultiIndex.from_tuples(index, names=["attention", "layer", "head"])
    table = pd.DataFrame(rows, columns=list(found.scores), index=index)
    table.attrs |= {"position": found.position + 1, "answer": pieces([found.answer])[0]}
    table.attrs["versus"] = None if found.versus is None else pieces([found.versus])[0]
    table.attrs["corrupted"] = None if found.corrupted is None else decode(list(found.corrupted))
    table.attrs["corrupted_ids"] = None if found.corrupted is None else list(found.corrupted)
    table.attrs |= {"corrupted_from": found.corrupted_from, "note": found.note, "target_ids": list(found.target)}
    return table


# --- why a head attends where it does; what if the model had written another word ---------------------------------


@dataclass(frozen=True)
class ScoreSplit:
    """`score_parts`' answer. table: query parts (rows) × key parts (columns), their cells summing to `score`, the
    model's own raw score q·k/√d_k (before the mask); attention, layer, head, query and key as asked (from 1), with
    the two tokens' labels; masked: whether the mask forbids this key (its raw score exists all the same)."""

    table: pd.DataFrame
    score: float
    attention: str
    layer: int
    head: int
    query: int
    key: int
    query_token: str
    key_token: str
    masked: bool

    def figure(self) -> go.Figure:
        """The table as the Attention math page draws it: a heatmap centred on 0, titled with the raw score the
        cells sum to (the page says it below the figure)."""
        title = f"Why {self.query_token} attends to {self.key_token}: layer {self.layer}, head {self.head}"
        return score_parts_heatmap(self.table, f"{title}, raw score {self.score:+.4f}")


def score_parts(
    model: Checkpoint | object,
    text: str,
    *,
    layer: int,
    head: int,
    query: int,
    key: int | Sequence[int],
    attention: str | None = None,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> ScoreSplit | list[ScoreSplit]:
    """Why a head attends where it does: head `head` of layer `layer`'s raw score q·k/√d_k of query position `query`
    for key position `key` (all from 1, as the Attention math page labels them) split into the residual stream's
    parts on each side — token embeddings, positions, each earlier head's output, each earlier feed-forward layer,
    biases (analysis.score_parts). Every normalisation is held at the scale (its per-position denominator) it had in
    this run, which makes it linear; each part is centred on its own, so the cells sum to the model's raw score
    exactly. For cross-attention the key side is the encoder's output, split into the encoder's parts. `attention`
    as in `head` (None: the cross-attention if the model has one, else its first). `model`: a loaded checkpoint,
    or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a TransformerLens bridge of one),
    mapped as the circuit functions map it, and run on `device` as they are.

    `key` a list (or range) of positions gives a list of splits, one per key in that order, from one traced pass:
    a query's whole row, `key=range(1, n + 1)`, costs about what one key does."""
    many = isinstance(key, (list, tuple, range))
    if many and not key:
        raise ValueError("key is a position from 1, or a non-empty list of them")
    model = _checkpoint(model, tokenizer, "score_parts", device)
    analysis = _analyze(model, text)
    attention = _attention(analysis, attention, _opening_attention(analysis))
    block, index = _block(analysis, attention, layer)
    where = f"layer {index + 1} of {analysis.attention_label(attention)}"
    h = _index(head, block.n_heads, "head", where)
    q = _index(query, len(block.query_pieces), "query position", where)
    keys = [_index(k, len(block.key_pieces), "key position", where) for k in (key if many else [key])]
    ids, source = pass_inputs(model, analysis.text, analysis.target_ids)
    query_label, key_labels = indexed_labels(block.query_pieces)[q], indexed_labels(block.key_pieces)
    splits = [
        ScoreSplit(
            score_parts_frame(parts.query_parts, parts.key_parts, parts.table),
            parts.score,
            attention,
            index + 1,
            h + 1,
            q + 1,
            parts.key + 1,
            query_label,
            key_labels[parts.key],
            parts.masked,
        )
        for parts in row_parts(model.model, ids, source, block.name, h, q, keys)
    ]
    return splits if many else splits[0]


@dataclass(frozen=True)
class Forked:
    """`fork`'s answer: the two continuations from the fork step on. table: one row per step (from the fork's, from
    1), each branch's token and its probability; greedy / forked: analysis.fork.Branch, each with its ids, the
    probability of each token, the logits (steps, vocab) it chose from, the top candidates of each step and every
    decoder head's attention row at each step (block name → (heads, keys)); the two texts as decoded; step and
    choice as asked (from 1); shared: the text written before the fork, the same in both."""

    table: pd.DataFrame
    greedy: Branch
    forked: Branch
    greedy_text: str
    forked_text: str
    shared: str
    step: int
    choice: int


def fork(
    model: Checkpoint | object,
    text: str,
    *,
    step: int,
    choice: int = 2,
    max_tokens: int = 20,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> Forked:
    """What if the model had written another word? Decode greedily after `text` (a language model's prompt, a
    translator's source), and at decoding step `step` (from 1: the first token written) take the `choice`-th likeliest
    candidate (1: greedy's own; up to 5) instead, then continue greedily both ways, up to `max_tokens` tokens
    written in all (analysis.fork). Deterministic; the key/value cache of the shared prefix is computed once and
    reused by both branches. A fork at choice 1 is greedy decoding itself. A `transformers` encoder-decoder with
    its `tokenizer` forks its translation of `text`, run by its own forward (each step a teacher-forced pass).
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if is_seq2seq(model):
        return _seq2seq_fork(model, text, step, choice, max_tokens, tokenizer, device)
    model = _checkpoint(model, tokenizer, "fork", device)
    if not model.config.has_decoder:
        raise ValueError(f"{model.name} is an encoder and writes nothing: choose a language model or translator")
    for what, value in (("step", step), ("choice", choice), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{what} must be a whole number from 1, not {value!r}")
    if not isinstance(text, str):
        raise TypeError(f"fork reads a text (a str), not {type(text).__name__}")
    cleaned, notes = clean_text(text).text, []
    if not cleaned:
        raise InputError("The text is empty: type something for the model to read.")
    source = source_of(model, cleaned)
    prompt = [model.config.bos_id]
    if source is None:  # a language model continues its text
        prompt = encode_prefix(model, cleaned, notes, reserve=min(max_tokens, model.config.max_len // 2))
    tok = model.tokenizer
    asked = (int(step) - 1, int(choice), int(max_tokens))
    found = _fork(model.model, prompt, source, *asked, tok.pieces, tok.never_written)
    branches = [found.greedy, found.forked]
    pieces = [tok.pieces(list(b.ids)) for b in branches]
    table = fork_frame(int(step), pieces[0], found.greedy.probs, pieces[1], found.forked.probs)
    shared = list(found.shared)
    texts = [tok.decode(shared + list(b.ids)) for b in branches]
    return Forked(table, *branches, *texts, tok.decode(shared), int(step), int(choice))


def _seq2seq_fork(hf_model, text, step, choice, max_tokens, tokenizer, device) -> Forked:
    """`fork` of a `transformers` encoder-decoder (analysis.seq2seq_tools.fork), run by its own forward."""
    if _device(device).type != "cpu":
        raise ValueError("device= moves the models this app maps; a library's own model runs where it is: model.to()")
    for what, value in (("step", step), ("choice", choice), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{what} must be a whole number from 1, not {value!r}")
    try:
        found = seq2seq_tools.fork(hf_model, tokenizer, text, int(step) - 1, int(choice), int(max_tokens))
    except Seq2SeqError as exc:
        raise ValueError(str(exc)) from None
    pieces = tokenizer.convert_ids_to_tokens
    branches = [found.greedy, found.forked]
    table = fork_frame(int(step), *[x for b in branches for x in (pieces(list(b.ids)), b.probs)])
    shared = list(found.shared)
    texts = [tokenizer.decode(shared + list(b.ids), skip_special_tokens=True) for b in branches]
    return Forked(table, *branches, *texts, tokenizer.decode(shared, skip_special_tokens=True), int(step), int(choice))


# --- figures as files ----------------------------------------------------------------------------------------------

FIGURE_SUFFIXES = (".html", ".svg", ".png", ".pdf")
PNG_SCALE = 2  # pixels per layout pixel: sharp on a high-density screen or a slide; the app's toolbar's too
KALEIDO = "kaleido==1.5.0"  # requirements-dev.txt; it draws with the system's Chrome or Chromium


def save_figure(
    fig: go.Figure, path: str | Path, scale: float | None = None, width: int | None = None, height: int | None = None
) -> Path:
    """Write a figure of this API (or any Plotly figure) to `path`, the format chosen by its suffix:

    - `.html`: a page that opens anywhere offline, plotly.js (4.8 MB) inside it, no CDN; still interactive;
    - `.svg`, `.pdf`: vector, drawn by Plotly's own renderer (kaleido driving a headless Chromium), for papers;
    - `.png`: `scale` pixels per layout pixel (default PNG_SCALE), so `width`×`height` (default: the figure's
      layout size, else Plotly's 700×500) comes out `scale` times as many pixels each way.

    Returns the path written. ValueError for another suffix, a `scale` for anything but a PNG, and, as `save`
    says, for a path that is not a regular file's or a write that fails; RuntimeError naming what to install when
    kaleido or a Chromium is missing."""
    if not isinstance(fig, go.Figure):
        raise TypeError(f"save_figure writes a plotly Figure (atlas.head and the rest), not {type(fig).__name__}")
    if not isinstance(path, (str, Path)):
        raise TypeError(f"save_figure writes to a path (a str or Path), not {type(path).__name__}")
    path = user_path(path)
    suffix = path.suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise ValueError(f"{path}: save_figure writes {', '.join(FIGURE_SUFFIXES)}, not {suffix or 'a bare name'}")
    check_target(path)  # before drawing, which takes kaleido seconds
    if scale is not None and suffix != ".png":
        raise ValueError(f"scale is a PNG's pixels per layout pixel; a {suffix} file has no pixels to scale")
    if suffix == ".html":
        # The app's own offline page (Explore's "All heads as one HTML file"), drawn in chromium with the network
        # blocked by tests/test_browser_downloads.py: the library inside, no CDN.
        return write_file(path, standalone_html(fig).encode("utf-8"))
    if importlib.util.find_spec("kaleido") is None:
        raise RuntimeError(f"{path}: {suffix} files are drawn by kaleido, not installed here: pip install {KALEIDO}")
    factor = (scale or PNG_SCALE) if suffix == ".png" else 1
    try:
        data = pio.to_image(fig, format=suffix[1:], scale=factor, width=width, height=height)
    except RuntimeError as exc:  # plotly's words for kaleido finding no browser name a download; a system one does
        if "Chrome" not in str(exc):
            raise
        raise RuntimeError(
            f"{path}: kaleido found no Chrome or Chromium to draw with: install one (apt install chromium) or set "
            "BROWSER_PATH to its executable"
        ) from exc
    return write_file(path, data)


# --- figures in a notebook without a network -----------------------------------------------------------------------


class EmbeddedNotebookRenderer(NotebookRenderer):
    """Plotly's "notebook" renderer (`connected=False`: the first figure shown puts plotly.js itself into the
    notebook, once) whose figures' HTML loads no MathJax from a CDN, as the stock one's does ("cdn")."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
        html = pio.to_html(
            fig_dict,
            config=self.config,
            include_plotlyjs=False,  # activate() embedded the library
            include_mathjax=False,
            full_html=False,
            default_width="100%",
            default_height=525,
            validate=False,
        )
        return {"text/html": html}


EMBEDDED = "atlas_embedded"  # EmbeddedNotebookRenderer's name in plotly.io.renderers
OFFLINE = f"plotly_mimetype+{EMBEDDED}"


def offline() -> None:
    """Show figures in notebooks with no network: plotly.io.renderers.default becomes `OFFLINE`, both of
    - "plotly_mimetype": the figure's JSON, which VS Code, JupyterLab and Notebook 7 prefer and draw with a
      plotly.js of their own (Jupyter's is the extension the plotly package installs);
    - EmbeddedNotebookRenderer: HTML for the classic Notebook, nbviewer and HTML exports, with plotly.js (4.8 MB)
      embedded in the notebook by the first figure shown.
    Nothing is fetched from a CDN. Call it once, in a notebook, before the first figure: a second call changes
    nothing (the library is embedded once per kernel). It is not done on import: it sets Plotly's default for the
    whole process, where a plain script wants Plotly's own (a browser tab)."""
    if pio.renderers.default != OFFLINE:
        pio.renderers[EMBEDDED] = EmbeddedNotebookRenderer()
        pio.renderers.default = OFFLINE

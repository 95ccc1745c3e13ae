"""Checkpoints, analyses, traces: `load` a checkpoint, `analyze` a text with it (or with a model run by its own
library), `save` the Analysis as the app's downloads do, and `read_trace` one back.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from analysis import seq2seq_tools
from analysis.analyze import Request, analyze_many
from analysis.export import to_json, to_npz_bytes
from analysis.imported import MAX_FILE_BYTES, TraceError, from_huggingface, from_transformer_lens
from analysis.imported import read_trace as _read_trace
from analysis.record import Analysis
from analysis.seq2seq import Seq2SeqError, is_seq2seq
from atlas.api.arguments import (
    AnalysisWarning,
    is_ids,
    library_on_cpu,
    mapped_model,
    on_device,
    texts_of,
    token_ids_of,
    warn_cut,
)
from inference import catalog
from inference.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from inference.decoding import Sampling
from inference.files import SourceError, read_source, user_path, write_file
from inference.text import InputError


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
    ids = is_ids(text)
    texts = [text] if ids else texts_of(text, "analyze")
    model, tokenizer = mapped_model(model, tokenizer, "analyze")
    if isinstance(model, Checkpoint):
        if tokenizer is not None:
            raise ValueError("a loaded checkpoint brings its own tokenizer: leave tokenizer out")
        model = on_device(model, device)
        given = [token_ids_of(model, text, "analyze")] if ids else [(t, None) for t in texts]
        requests = [Request(t, target, k, max_tokens, continuation, sampling, i) for t, i in given]
        results = analyze_many(model, requests)
        for index, result in enumerate(results):
            if isinstance(result, InputError):
                if len(texts) == 1:
                    raise result
                raise InputError(f"text {index + 1}: {result}") from result
            warn_cut(result.notes)
        return results if isinstance(text, (list, tuple)) and not ids else results[0]
    library_on_cpu(device)
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

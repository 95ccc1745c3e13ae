"""What a call of the notebook API is given, checked: a model (loaded, or a published one mapped onto ours), texts or
token ids, a device, and layers, heads and positions counted from 1; each wrong one a clear error of one line.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Sequence
from numbers import Integral

import torch

from analysis.record import Analysis, Sublayer
from analysis.seq2seq import is_seq2seq
from inference.checkpoint import Checkpoint
from inference.pretrained.objects import LOADERS as OBJECT_LOADERS
from inference.pretrained.objects import from_transformers, is_transformers_model
from inference.text import InputError


class AnalysisWarning(UserWarning):
    """Something was changed in what the model read (a text cut to the context): the message says what."""


def warn_cut(notes: Sequence[str]) -> None:
    """Each note saying the input was cut, as a warning: a notebook shows it, where a note inside the Analysis is
    easily missed."""
    for note in notes:
        if " was cut " in note:
            warnings.warn(note, AnalysisWarning, stacklevel=3)


def texts_of(text: object, where: str) -> list[str]:
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


def is_ids(text: object) -> bool:
    """Whether `text` is token ids rather than text: a non-empty list or tuple of whole numbers, or an integer
    tensor of one row ((T,) or (1, T), as a tokenizer's `return_tensors="pt"` gives)."""
    if isinstance(text, torch.Tensor):
        return not text.is_floating_point() and not text.is_complex() and text.dtype != torch.bool
    return (
        isinstance(text, (list, tuple))
        and bool(text)
        and all(isinstance(i, Integral) and not isinstance(i, bool) for i in text)
    )


def token_ids_of(model: Checkpoint, ids: object, where: str) -> tuple[str, tuple[int, ...]]:
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


def mapped_model(model: object, tokenizer: object, where: str) -> tuple[object, object]:
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


def checked_device(device: object) -> torch.device:
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


def on_device(ckpt: Checkpoint, device: object) -> Checkpoint:
    """`ckpt` with its model on `device`: itself when it is there already, else a copy moved there (the caller's
    model stays where it was, for the calls that do not ask)."""
    chosen = checked_device(device)
    here = next(ckpt.model.parameters()).device
    if here.type == chosen.type and (chosen.index is None or here.index == chosen.index):
        return ckpt
    return dataclasses.replace(ckpt, model=copy.deepcopy(ckpt.model).to(chosen))


def checkpoint_of(model: object, tokenizer: object, where: str, device: object = "cpu") -> Checkpoint:
    """The Checkpoint a circuit function runs, on `device`: a loaded one, or a `transformers` GPT-2 or Llama mapped
    onto ours; anything else a TypeError (a model of another architecture: CheckpointError) that names what it
    takes."""
    mapped, tokenizer = mapped_model(model, tokenizer, where)
    if isinstance(mapped, Checkpoint):
        if tokenizer is not None:
            raise ValueError("a loaded checkpoint brings its own tokenizer: leave tokenizer out")
        return on_device(mapped, device)
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


# --- choosing what to draw: names as the app has them, numbers counted from 1 --------------------------------------


def chosen_attention(analysis: Analysis, attention: str | None, default: str | None = None) -> str:
    """`attention` checked against the analysis; None: `default`, else the first the model has."""
    present = analysis.attentions
    if attention is None:
        return default if default in present else present[0]
    if attention not in present:
        choices = ", ".join(f"{a!r} ({analysis.attention_label(a)})" for a in present)
        raise ValueError(f"this {analysis.kind} model has no {attention!r} attention: choose one of {choices}")
    return attention


def zero_based(value: object, count: int, what: str, where: str) -> int:
    """A 1-based `value` (a layer, a head, a position) checked to be 1 to `count`; returned 0-based."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{what} must be a whole number from 1 to {count}, not {value!r}")
    if not 1 <= int(value) <= count:
        hint = " (they count from 1, as the app's labels do)" if int(value) == 0 else ""
        raise ValueError(f"{what} {value} is out of range: {where} has {what}s 1 to {count}{hint}")
    return int(value) - 1


def sublayer_of(analysis: Analysis, attention: str, layer: int) -> tuple[Sublayer, int]:
    """The sub-layer of 1-based `layer` of `attention`, and the layer 0-based."""
    layers = analysis.layers(attention)
    index = zero_based(layer, len(layers), "layer", analysis.attention_label(attention))
    return analysis.sublayer(attention, layers[index]), layers[index]


def head_indices(sublayer: Sublayer, heads: Sequence[int], where: str) -> list[int]:
    return [zero_based(h, sublayer.n_heads, "head", where) for h in heads]


def opening_attention(analysis: Analysis) -> str:
    """Where Explore and the Paper view open: the cross-attention when the model has one, else its first."""
    return "decoder.cross_attn" if "decoder.cross_attn" in analysis.attentions else analysis.attentions[0]


LIBRARY_DEVICE = "device= moves the models this app maps; a library's own model runs where it is: model.to()"


def library_on_cpu(device: object) -> None:
    """A model run by its own library (a `transformers` encoder-decoder) stays where it is: `device` must be the CPU,
    a ValueError of one line else."""
    if checked_device(device).type != "cpu":
        raise ValueError(LIBRARY_DEVICE)

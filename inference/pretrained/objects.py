"""A `transformers` model already in memory (with its tokenizer), as the same Checkpoint its saved folder gives.

One route for both: the object's config, state dict and tokenizer.json are handed to the folder loaders
(inference.pretrained.loaders) as if read from disk, so a GPT-2 or a Llama object becomes exactly the model
`atlas.load` of its `save_pretrained` folder gives — the variants beside the paper's model, every circuit tool
with them — and is tokenized by the same rule (inference.text: a decoder reads bos + the text's tokens).
Nothing is written to disk; the user's model and tokenizer are read, never changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from inference.loaded import Checkpoint, CheckpointError
from inference.pretrained.loaders import (
    HF_CONFIG,
    HF_TOKENIZER,
    Files,
    load_gpt2_folder,
    load_llama_folder,
)

# model_type → the folder loader that maps it; what is not here is refused with the list.
LOADERS = {
    "gpt2": load_gpt2_folder,
    "llama": load_llama_folder,
    "qwen2": load_llama_folder,
    "gpt_neox": load_llama_folder,
}
WRAPPED = "._original_component"  # TransformerLens's name for the module a bridge component wraps
# Prefixes a bare backbone's names lack (LlamaModel's "layers.0…" is LlamaForCausalLM's "model.layers.0…").
BACKBONE = {"llama": "model.", "qwen2": "model.", "gpt_neox": "gpt_neox."}


class ObjectFiles(Files):
    """The files of a Hugging Face folder, taken from a model and tokenizer in memory instead of a path."""

    def __init__(self, path: Path, config: dict[str, Any], tensors: dict[str, torch.Tensor], tokenizer: str) -> None:
        self.path, self._config, self._tensors, self._tokenizer = path, config, tensors, tokenizer
        self._names, self._prefix = None, ""

    def has(self, name: str) -> bool:
        return name in (HF_CONFIG, HF_TOKENIZER)

    def read(self, name: str) -> bytes:
        if name == HF_TOKENIZER:
            return self._tokenizer.encode("utf-8")
        if name == HF_CONFIG:
            return json.dumps(self._config).encode("utf-8")
        raise CheckpointError(f"{self.path}: no {name} in a model object")

    def config(self) -> dict[str, Any]:
        return self._config

    def tensors(self) -> dict[str, torch.Tensor]:
        return self._tensors


def is_transformers_model(obj: object) -> bool:
    """Whether `obj` looks like a `transformers` model: a torch module with a config that names its model_type."""
    return isinstance(obj, torch.nn.Module) and isinstance(
        getattr(getattr(obj, "config", None), "model_type", None), str
    )


def tokenizer_json(tokenizer: object, where: str) -> str:
    """A `transformers` tokenizer's tokenizer.json (its Rust `backend_tokenizer`); a slow one is named."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        raise CheckpointError(
            f"{where}: the tokenizer ({type(tokenizer).__name__}) has no tokenizer.json: pass a fast tokenizer, "
            "AutoTokenizer.from_pretrained(..., use_fast=True)"
        )
    return backend.to_str()


def _own_state(hf_model: Any) -> dict[str, torch.Tensor]:
    """The model's state dict under the library's own names. A TransformerLens bridge wraps each module in place
    (its state dict then says `._original_component.` and adds views of its own, `attn.q`, `mlp.in`): the names
    are unwrapped and kept where a model of the same class and config, built on the meta device (no memory), has
    them."""
    state = hf_model.state_dict()
    if not any(WRAPPED in key for key in state):
        return state
    with torch.device("meta"):
        names = set(type(hf_model)(hf_model.config).state_dict())
    unwrapped = ((key.replace(WRAPPED, ""), value) for key, value in state.items())
    return {key: value for key, value in unwrapped if key in names}


def from_transformers(hf_model: Any, tokenizer: object, name: str | None = None) -> Checkpoint:
    """`hf_model` (a GPT-2, Llama, Qwen2 or GPT-NeoX of `transformers`, any head or none) with its fast
    `tokenizer`, as a Checkpoint on the CPU in float32, through the folder loaders. CheckpointError (a ValueError)
    names an architecture this app does not map, a missing tokenizer, or the first tensor or field that does not
    fit."""
    config = hf_model.config.to_dict()
    model_type = config.get("model_type")
    label = name or getattr(hf_model.config, "name_or_path", "") or type(hf_model).__name__
    path = Path(f"<{type(hf_model).__name__} {label}>" if label != type(hf_model).__name__ else f"<{label}>")
    if model_type not in LOADERS:
        raise CheckpointError(
            f"{path}: a {model_type!r} model is not one this app maps onto its own; it reads "
            f"{', '.join(sorted(LOADERS))} (or, for the weights only, atlas.analyze)"
        )
    if tokenizer is None:
        raise CheckpointError(f"{path}: a transformers model needs its tokenizer: pass tokenizer=")
    prefix = BACKBONE.get(model_type, "")
    tensors = {}
    for key, value in _own_state(hf_model).items():
        bare = key if not prefix or key.startswith((prefix, "lm_head.", "embed_out.")) else prefix + key
        tensors[bare] = value.detach().to("cpu")
    files = ObjectFiles(path, config, tensors, tokenizer_json(tokenizer, str(path)))
    card = {"task": f"{model_type} model from transformers ({type(hf_model).__name__})", "source": label}
    return LOADERS[model_type](path, label, card, files)

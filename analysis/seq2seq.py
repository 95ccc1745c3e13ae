"""A `transformers` encoder-decoder (Marian, BART, T5, …) run by its own forward: its Analysis, any module's output
read by its module path, and activations patched in by module path.

The model is never mapped onto ours: its own forward runs, with eager attention for the call (sdpa and flash
attention return no weights). What it computed inside is read, and patched, with forward hooks registered for one
call and removed after it, always: the one place here that touches a library's modules from outside (the house
runs its own models through model.forward, with no hooks). A `Layout` finds, from the module tree alone, each
layer of each stack and each attention with its output projection, so one adapter serves the three families and
any other of the same shape (q/k/v and an output projection `out_proj` or `o`). Names follow ours:
`encoder.layers.0.self_attn`, `decoder.layers.1.cross_attn`; `Layout.paths` gives the library's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from model.names import layer_name, sublayer_name

OUTPUT_PROJECTIONS = ("out_proj", "o")  # BART and Marian's, T5's
QUERY_PROJECTIONS = ("q_proj", "q")
VALUE_PROJECTIONS = ("v_proj", "v")


class Seq2SeqError(ValueError):
    """A model or a module path this adapter cannot read: the message names it and what it reads."""


def is_seq2seq(model: object) -> bool:
    """Whether `model` is a `transformers` encoder-decoder: a module whose config says is_encoder_decoder."""
    return isinstance(model, nn.Module) and bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))


@dataclass(frozen=True)
class Layout:
    """Where things are in one encoder-decoder: our names → the library's module paths.

    layers: "encoder.layers.{i}" / "decoder.layers.{i}" → the layer's path (its input is the stream entering it);
    sublayers: our sub-layer name → the attention module's path; outputs: our sub-layer name → its output projection's
    path, whose input is every head's output side by side (B, T, heads × d_head); values: our sub-layer name → its value
    projection's path (its output: every head's values side by side); n_heads: heads per attention."""

    layers: dict[str, str]
    sublayers: dict[str, str]
    outputs: dict[str, str]
    values: dict[str, str]
    n_heads: int

    @property
    def paths(self) -> list[str]:
        return [*self.layers.values(), *self.sublayers.values()]


def _stack_layers(model: nn.Module, stack: nn.Module, names: Mapping[int, str], which: str) -> list[nn.Module]:
    lists = [child for child in stack.children() if isinstance(child, nn.ModuleList)]
    if not lists:
        raise Seq2SeqError(f"{type(model).__name__}'s {which} ({names[id(stack)]}) holds no list of layers")
    return list(lists[0])


def _attentions(layer: nn.Module) -> list[nn.Module]:
    """The attention modules of a layer, in the order they run (self-attention, then cross-attention)."""
    found = []
    for module in layer.modules():
        kids = set(dict(module.named_children()))
        if all(kids & set(names) for names in (QUERY_PROJECTIONS, VALUE_PROJECTIONS, OUTPUT_PROJECTIONS)):
            found.append(module)
    return found


def _heads(model: nn.Module, attention: nn.Module) -> int:
    for key in ("num_heads", "n_heads"):
        value = getattr(attention, key, None)
        if isinstance(value, int):
            return value
    for key in ("num_heads", "encoder_attention_heads", "num_attention_heads"):
        value = getattr(model.config, key, None)
        if isinstance(value, int):
            return value
    raise Seq2SeqError(f"{type(model).__name__}: no head count on its attention or its config")


def layout(model: nn.Module) -> Layout:
    """The Layout of `model`, read from its module tree; Seq2SeqError when it is not an encoder-decoder of that
    shape."""
    if not is_seq2seq(model):
        raise Seq2SeqError(f"{type(model).__name__} is not a transformers encoder-decoder (config.is_encoder_decoder)")
    names = {id(m): n for n, m in model.named_modules()}
    layers, sublayers, outputs, values, heads = {}, {}, {}, {}, set()
    for stack, module in (("encoder", model.get_encoder()), ("decoder", model.get_decoder())):
        for i, layer in enumerate(_stack_layers(model, module, names, stack)):
            layers[layer_name(stack, i)] = names[id(layer)]
            found = _attentions(layer)
            types = ["self_attn"] if stack == "encoder" else ["self_attn", "cross_attn"]
            if len(found) != len(types):
                raise Seq2SeqError(
                    f"{names[id(layer)]} holds {len(found)} attention modules; an {stack} layer of an encoder-decoder "
                    f"has {len(types)}"
                )
            for type_, attention in zip(types, found, strict=True):
                name = sublayer_name(stack, i, type_)
                sublayers[name] = names[id(attention)]
                kids = dict(attention.named_children())
                proj = next(k for k in OUTPUT_PROJECTIONS if k in kids)
                outputs[name] = f"{names[id(attention)]}.{proj}"
                values[name] = f"{names[id(attention)]}.{next(k for k in VALUE_PROJECTIONS if k in kids)}"
                heads.add(_heads(model, attention))
    if len(heads) != 1:
        raise Seq2SeqError(f"{type(model).__name__}: attentions of {sorted(heads)} heads; one count is read")
    return Layout(layers, sublayers, outputs, values, heads.pop())


@contextlib.contextmanager
def eager(model: nn.Module) -> Iterator[None]:
    """Eager attention for the sub-layer (the weights returned), the model's own implementation restored after."""
    before = getattr(model.config, "_attn_implementation", None)
    switch = before not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(before)


def _first(output: Any) -> Tensor:
    """A module's output tensor: itself, or the first of a tuple (a layer's (hidden_states, …)), or a
    ModelOutput's first field."""
    if isinstance(output, Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        return output[0]
    raise Seq2SeqError(f"the module returned {type(output).__name__}, not a tensor this adapter reads")


def _with_first(output: Any, value: Tensor) -> Any:
    if isinstance(output, Tensor):
        return value
    return type(output)([value, *output[1:]]) if isinstance(output, list) else (value, *output[1:])


Edit = Callable[[Tensor], Tensor]  # a module's tensor in, the tensor to use instead out


def module(model: nn.Module, path: str) -> nn.Module:
    """The module at `path` (as model.named_modules() names it); Seq2SeqError naming near paths otherwise."""
    found = dict(model.named_modules())
    if path not in found:
        near = [n for n in found if n and path.rsplit(".", 1)[-1] in n][:3] or [n for n in found if n][:3]
        raise Seq2SeqError(
            f"{type(model).__name__} has no module {path!r} (model.named_modules() names them: {near} …)"
        )
    return found[path]


@contextlib.contextmanager
def hooked(
    model: nn.Module,
    read: Sequence[str] = (),
    inputs: Mapping[str, Edit] | None = None,
    outputs: Mapping[str, Edit] | None = None,
) -> Iterator[dict[str, Tensor]]:
    """For the sub-layer: the output of each module of `read` kept in the dict it yields (path → tensor, as run);
    each module of `inputs` given `edit(its first input)` instead, and each of `outputs` returning
    `edit(its output)`. The hooks are removed on leaving, whatever happened."""
    kept: dict[str, Tensor] = {}
    handles = []

    def keep(path: str) -> Callable:
        return lambda _m, _args, out: kept.__setitem__(path, _first(out).detach())

    def edit_input(edit: Edit) -> Callable:
        def hook(_m: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            if args:
                return (edit(args[0]), *args[1:]), kwargs
            key = (
                "hidden_states"
                if "hidden_states" in kwargs
                else next(k for k, v in kwargs.items() if isinstance(v, Tensor))
            )
            return args, {**kwargs, key: edit(kwargs[key])}

        return hook

    def edit_output(edit: Edit) -> Callable:
        return lambda _m, _args, out: _with_first(out, edit(_first(out)))

    try:
        for path, edit in (outputs or {}).items():
            handles.append(module(model, path).register_forward_hook(edit_output(edit)))
        for path in read:
            handles.append(module(model, path).register_forward_hook(keep(path)))
        for path, edit in (inputs or {}).items():
            handles.append(module(model, path).register_forward_pre_hook(edit_input(edit), with_kwargs=True))
        yield kept
    finally:
        for handle in handles:
            handle.remove()


def read_inputs(model: nn.Module, paths: Sequence[str]) -> contextlib.AbstractContextManager[dict[str, Tensor]]:
    """For the sub-layer: the first input of each module of `paths` (a layer's stream entering it; an output
    projection's heads side by side), path → tensor."""
    kept: dict[str, Tensor] = {}

    def keep(path: str) -> Edit:
        def edit(x: Tensor) -> Tensor:
            kept[path] = x.detach()
            return x

        return edit

    @contextlib.contextmanager
    def sublayer() -> Iterator[dict[str, Tensor]]:
        with hooked(model, inputs={p: keep(p) for p in paths}):
            yield kept

    return sublayer()


def run(hf_model: nn.Module, source: Tensor, target: Tensor, *, attentions: bool = False, hidden: bool = False) -> Any:
    """The model's teacher-forced pass: `source` (B, S) to the encoder, `target` (B, T) as the decoder's input,
    no gradient; eager attention when `attentions` (the weights returned). Named `hf_model`: a foreign model,
    run by its own forward, not one of ours (which run through model.forward, tests/test_forward.py)."""
    device = next(hf_model.parameters()).device
    options = {"output_attentions": attentions, "output_hidden_states": hidden, "return_dict": True}
    with torch.no_grad(), eager(hf_model) if attentions else contextlib.nullcontext():
        return hf_model(input_ids=source.to(device), decoder_input_ids=target.to(device), use_cache=False, **options)


def greedy(model: nn.Module, source: Tensor, max_tokens: int) -> list[int]:
    """The model's greedy output for `source` (1, S) as its own `generate` writes it (one beam, no sampling, up to
    `max_tokens` new tokens), its decoder start first."""
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(
            input_ids=source.to(device), do_sample=False, num_beams=1, max_new_tokens=max_tokens, min_new_tokens=1
        )
    return [int(i) for i in out[0].tolist()]


def start_id(model: nn.Module) -> int:
    """The decoder's first input (config.decoder_start_token_id, else its pad, as BART and T5 start)."""
    for key in ("decoder_start_token_id", "pad_token_id"):
        value = getattr(model.config, key, None)
        if isinstance(value, int):
            return value
    raise Seq2SeqError(f"{type(model).__name__}'s config names no decoder_start_token_id")

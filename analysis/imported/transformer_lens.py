"""A TransformerLens `ActivationCache` (`model.run_with_cache(...)`), as an Analysis: `from_transformer_lens`.
TransformerLens itself is never imported: the cache is read as a mapping of hook names to arrays."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from analysis.imported.arrays import from_arrays
from analysis.imported.checks import MAX_LAYERS, TraceError
from analysis.record import Analysis

PATTERN_KEY = re.compile(r"blocks\.(\d+)\.attn\.hook_pattern")  # TransformerLens' name for a layer's weights


def from_transformer_lens(cache: Any, tokens: Sequence[str], name: str = "transformer_lens") -> Analysis:
    """An Analysis of a TransformerLens `ActivationCache` (`model.run_with_cache(...)`), or any mapping with keys
    `blocks.{l}.attn.hook_pattern`, each `[batch, heads, queries, keys]` with a batch of one (or without the batch
    axis: `remove_batch_dim=True`). TransformerLens models are causal language models: decoder-only. `tokens` are
    `model.to_str_tokens(...)` of the same input; the layers must be 0 to L-1, none missing."""
    if not hasattr(cache, "keys") or not hasattr(cache, "__getitem__"):
        raise TraceError(f"a TransformerLens cache is a mapping of hook names to arrays, not {type(cache).__name__}")
    found: dict[int, Any] = {}
    for key in cache.keys():  # an ActivationCache has keys(), and iterating it may not give them
        match = PATTERN_KEY.fullmatch(str(key))
        if match:
            found[int(match[1])] = key
    if not found:
        raise TraceError(
            "the cache holds no blocks.{l}.attn.hook_pattern: run model.run_with_cache(...) without a names_filter "
            "that drops the attention patterns"
        )
    if len(found) > MAX_LAYERS:
        raise TraceError(f"the cache has {len(found)} layers, more than the {MAX_LAYERS} allowed")
    gap = next(i for i in range(len(found) + 1) if i not in found)
    if gap < len(found):
        raise TraceError(
            f"the cache has attention patterns for {len(found)} layers but none for layer {gap + 1} "
            f"(blocks.{gap}.attn.hook_pattern): layers must be 1 to {len(found)}, none missing"
        )
    return from_arrays([cache[found[i]] for i in range(len(found))], tokens, kind="decoder-only", name=name)

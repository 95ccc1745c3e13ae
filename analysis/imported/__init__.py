"""Attention computed elsewhere, as this project's `Analysis`: plain arrays, a Hugging Face model's outputs, a
TransformerLens cache, or a trace file this app exported.

Every way in ends in the same checks, made as carefully as a checkpoint's (inference/checkpoint.py): the shapes
against the tokens, finite weights within [0, 1], nothing where the mask forbids attention, every query's weights
summing to 1, bounded sizes, and every string (a token, a name, the text) one UTF-8 can write (a lone surrogate,
which a JSON `\\ud800` escape makes, would break every page and export of it). Each failure is one `TraceError`
whose message names what disagrees and where, counting from 1 as the pages do ("layer 2, head 1, query 3"); arrays
and files stay 0-based.

What imported attention cannot carry is left out rather than made up, and the Analysis says so in its own terms:

- `text` is the first stack's tokens joined by one space (`TEXT_RULE`): the input text itself is not in the data,
  and no join undoes every tokenizer's markers (`Ġ`, `▁`, `##`), so it is a label for the pages, not the input.
- `positional` is "unknown" (`UNKNOWN_POSITIONAL`): arrays of weights do not say how the model knew positions.
- `positional_encoding` holds the first stack's rows with zero columns, `(T, 0)`, not an empty dict:
  `Analysis.first_positional_encoding` reads the "encoder" or "decoder" entry and the export writes it, so an
  empty dict would raise KeyError there; zero columns say "no positional rows" and still have one row per token.
- `predictions` is empty (no logits), `target_ids` empty (no ids), `scores` and `values` None, `kv_heads` the
  number of heads (every head its own keys: nothing says otherwise).

One module per source, each ending in the shared checks (checks.py): `arrays.from_arrays`,
`huggingface.from_huggingface`, `transformer_lens.from_transformer_lens`, and `trace.read_trace` with its readers
(trace_json.py, trace_npz.py: each parses its format into trace_parsed.Entry records) and its fields' checks
(trace_fields.py). A bound is read in the module that checks it (checks.MAX_TOKENS, arrays.MAX_LAYERS,
trace.MAX_FILE_BYTES …): the names below are copies, for reading.

This package imports neither torch nor the model (as analysis/record.py): a torch tensor is read through its
own `.detach().cpu().numpy()`.
"""

from analysis.imported.arrays import from_arrays
from analysis.imported.checks import (
    KINDS,
    MAX_FILE_BYTES,
    MAX_TEXT_CHARS,
    TEXT_RULE,
    UNKNOWN_POSITIONAL,
    WEIGHT_TOLERANCE,
    TraceError,
)
from analysis.imported.huggingface import from_huggingface
from analysis.imported.trace import read_trace
from analysis.imported.trace_json import JSON_PARSED_PER_BYTE
from analysis.imported.trace_npz import MAX_META_BYTES
from analysis.imported.transformer_lens import from_transformer_lens

__all__ = [
    "JSON_PARSED_PER_BYTE",
    "KINDS",
    "MAX_FILE_BYTES",
    "MAX_META_BYTES",
    "MAX_TEXT_CHARS",
    "TEXT_RULE",
    "UNKNOWN_POSITIONAL",
    "WEIGHT_TOLERANCE",
    "TraceError",
    "from_arrays",
    "from_huggingface",
    "from_transformer_lens",
    "read_trace",
]

"""Every head at once, as a table: the Head statistics page's (`head_stats`, `detect_heads`), Head ablation's
ranking (`rank_heads`), a corpus of texts (`corpus`), and two models of one layout compared (`compare_models`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis import seq2seq_tools
from analysis.ablation import head_importance, rank_by_attribution, ranking_setup
from analysis.analyze import Request, analyze_many
from analysis.analyze import analyze as _analyze
from analysis.corpus.run import Settings, run_corpus
from analysis.corpus.store import Corpus, open_corpus
from analysis.detectors import detect
from analysis.head_diff import LayoutError, head_differences
from analysis.head_diff import grids as head_grids
from analysis.induction import measure
from analysis.record import Analysis
from analysis.seq2seq import is_seq2seq
from atlas.api.arguments import checkpoint_of, library_on_cpu, on_device
from atlas.api.loading import load
from inference.checkpoint import Checkpoint
from inference.files import user_path
from inference.text import InputError
from viz.attribution import heads_heatmap
from viz.stats import for_display, head_table, with_probe_scores
from viz.tables import heads_frame, ranking_frame


def head_stats(
    analysis: Analysis,
    model: Checkpoint | object | None = None,
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """The Head statistics page's table: one row per head of every sub-layer, layers and heads counted from 1, with
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
    model = checkpoint_of(model, tokenizer, "head_stats", device)
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
        library_on_cpu(device)
        analysis = seq2seq_tools.analysis(model, tokenizer, text)
        table = ranking_frame(analysis, seq2seq_tools.rank_heads(model, tokenizer, text, mode))
        return table.sort_values("KL (nats)", ascending=False, kind="stable").reset_index(drop=True)
    model = checkpoint_of(model, tokenizer, "rank_heads", device)
    analysis = _analyze(model, text)
    if approximate:
        table = rank_by_attribution(model, ranking_setup(model, text), mode)
        return ranking_frame(analysis, table, "log p drop (approx.)")
    return ranking_frame(analysis, head_importance(model, text, mode))


def detect_heads(
    model: Checkpoint | Analysis | Sequence[Analysis] | object,
    texts: str | Sequence[str] | None = None,
    pattern: str | np.ndarray | Callable[[list[str]], object] = "previous token",
    *,
    tokenizer: object | None = None,
    device: str = "cpu",
) -> pd.DataFrame:
    """Head statistics' "Detect a pattern": the share of each self-attention head's attention that falls where
    `pattern` points (1: all of it), over `texts` — one string, or a list (a file's lines) — analysed by `model`,
    or over Analyses given as `model` (from `analyze`, `from_huggingface`, `read_trace`; `texts` None). `pattern`:
    "previous token", "first token", "current token", "same token", "induction", a (T, T) array of 0 and 1 that
    fits every text (TransformerLens's `detect_head`), or a function of a text's pieces (the start token first)
    that returns its (T, T) array, as `corpus` takes a custom pattern. One row per head (layer and head from 1),
    highest first.
    `model`: a loaded checkpoint, or a `transformers` GPT-2, Llama, Qwen2 or GPT-NeoX with its `tokenizer` (or a
    TransformerLens bridge of one), mapped as the circuit functions map it, run on `device`."""
    if not isinstance(model, Analysis) and not (isinstance(model, (list, tuple)) and model):
        if texts is None:
            raise ValueError("detect_heads needs texts to run the model on: a string or a list of them")
        model = checkpoint_of(model, tokenizer, "detect_heads", device)
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
    ray: str | None = None,
    workers: int | None = None,
    patterns: Mapping[str, str | Callable[[list[str]], object]] | None = None,
) -> Corpus:
    """Every self-attention head over a corpus, as `python -m atlas corpus` makes it (analysis.corpus.run;
    docs/corpus.md): `texts` a .txt (a text a line), .jsonl (a "text" field a line), .parquet (a "text" column) or a
    folder of them, streamed through `model` (loaded, or a name or path for `load`) `batch` texts at a time and
    reduced per head into the folder `out`, in shards of `shard` texts; a folder of the same run continues where it
    stopped. `ray`: the shards reduced on Ray Data's workers, one model each ("" for a Ray started
    here, else a cluster's address; needs the `cluster` extra), `workers` of them, with the same files as the run
    here. `patterns`: custom patterns scored beside the built-in ones, name → function of a text's pieces that
    returns its (T, T) array, or name → "MODULE:FUNCTION" / "PATH.py:FUNCTION" (the one Ray's workers can load);
    each name is a column of `.heads` (docs/corpus.md). Returns `open_corpus(out)`. CorpusError (a ValueError) for
    input it cannot read, a model it cannot run, an `out` that holds something else, a pattern that does not load
    or draws a wrong array, or a Ray that is not installed or does not answer."""
    ckpt = load(model) if isinstance(model, (str, Path)) else checkpoint_of(model, None, "corpus", device)
    settings = Settings(batch, shard, top_k, sample)
    run_corpus(
        on_device(ckpt, device),
        user_path(texts),
        user_path(out),
        settings,
        progress=progress,
        ray=ray,
        workers=workers,
        patterns=patterns,
    )
    return open_corpus(out)


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
    models = [checkpoint_of(m, tokenizer, "compare_models", device) for m in (first, second)]
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
    pieces = {a: ours.sublayer(a, ours.layers(a)[0]).query_pieces for a in ours.attentions}
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

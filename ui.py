"""Streamlit glue shared by app.py and the pages: the cached model and analysis, the sidebar, pickers, URL state.

Computation lives in viz/ and model/; this module only calls it, caches it and lays out widgets.
"""

from __future__ import annotations

import functools
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec

import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

from inference import catalog
from inference.ablation import Effect, RankingSetup, ablation_effect, most_important_first, rank_block, ranking_setup
from inference.analysis import Analysis, Block
from inference.analyze import positional_table as model_positional_table
from inference.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from inference.decoding import Sampling
from inference.export import to_json, to_npz_bytes
from inference.snapshots import Snapshot, list_snapshots, load_snapshot
from inference.text import InputError
from inference.worker import ModelWorker
from viz.heads import average_heads, head_heatmap, heads_grid, swap_head
from viz.stats import head_table
from viz.style import cell_numbers_css, cell_numbers_width, chart_config, for_projector, frozen
from viz.tables import encoder_frame, generation_frame, top_k_frame

TOP_K = 5
AVERAGE = -1  # the "head" value meaning the average of all heads


def flag(value: str) -> bool:
    """A URL's on/off value: 1, true, yes or on (any case) is on."""
    return value.strip().lower() in ("1", "true", "yes", "on")


URL_KEYS: dict[str, Callable[[str], object]] = {"model": str, "text": str, "attention": str, "layer": int, "head": int}
URL_KEYS |= {"query": int, "position": int}  # the attention-math query token, the LM's next-token position
URL_KEYS |= {"compare": str}  # the second text of the Compare page
URL_KEYS |= {"gen_tokens": int, "gen_mode": str, "gen_temperature": float, "gen_top_k": int, "gen_seed": int}
URL_KEYS |= {"gen_step": int, "paper_query": int, "paper_threshold": float, "rollout_stack": str, "rollout_layer": int}
URL_KEYS |= {"ablate_mode": str, "step": int}  # the ablation's mode, the training-step slider's step
URL_KEYS |= {"lesson": str}  # the Lesson page's step (its slug)
URL_KEYS |= {"projector": flag}  # projector mode: large type, high contrast, collapsed sidebar
URL_LISTS: dict[str, str] = {"ablate_heads": "ablate"}  # list widgets: session key → URL key, comma-joined
PERSISTENT = ("model", "text", "attention", "layer", "head", "query", "position", "second_text", "stats_pick")
PERSISTENT += ("pe_positions", "pe_dims", "pe_metric", "compare")
PERSISTENT += ("gen_tokens", "gen_mode", "gen_temperature", "gen_top_k", "gen_seed", "gen_layer", "gen_head")
PERSISTENT += ("ablate_heads", "ablate_mode", "projector")
PERSISTENT += ("paper_query", "paper_threshold", "rollout_stack", "rollout_residual", "rollout_layer", "rollout_heads")
MAX_URL_TEXT = 1000
log = logging.getLogger("attention_atlas")
P = ParamSpec("P")


@dataclass(frozen=True)
class Context:
    """The chosen, loaded checkpoint and the text to analyse."""

    entry: catalog.Entry
    ckpt: Checkpoint
    stamp: float
    text: str

    @property
    def path(self) -> str:
        return str(self.entry.path)


@st.cache_resource(max_entries=4, show_spinner="Loading the model…")
def load_model(path: str, stamp: float) -> Checkpoint:
    """Load a checkpoint once per (path, modification time); raises CheckpointError."""
    return load_checkpoint(path)


@st.cache_resource(max_entries=4, show_spinner=False)
def model_worker(path: str, stamp: float) -> ModelWorker:
    """The one thread that runs this checkpoint's model for every session, batching requests made at once."""
    return ModelWorker(load_model(path, stamp))


def run_model(
    path: str, stamp: float, text: str, full: bool = False, continuation: int = 0, sampling: Sampling | None = None
) -> Analysis:
    """The model's Analysis of `text` (every head, the predictions); raises InputError.

    The page submits to the checkpoint's worker and waits: sessions typing at once share one batch. The worker
    keeps results (inference.worker): a rerun gets the same object back, not a copy. `full=True`: with the raw
    scores and V of every block (the attention-math page, the export); else the pages' lighter copy. A language
    model first writes `continuation` tokens (greedy, or `sampling`)."""
    worker = model_worker(path, stamp)
    asked = {"k": TOP_K, "full": full, "continuation": continuation, "sampling": sampling}
    kept = worker.cached(text, **asked)
    if kept is not None:
        return kept
    with st.spinner("Running the model…"):
        return worker.analyze(text, **asked)


# Figures are built once per (model, text, view) and shared by every session: a rerun or a head switch sends a
# built figure (Streamlit copies it to JSON) instead of building Plotly objects again (bench/pages.py).
@st.cache_resource(max_entries=64, show_spinner=False)
def _heatmap_template(path: str, stamp: float, text: str, attention: str, layer: int) -> dict:
    """A layer's first head, frozen: every head of the layer shares its axes and hover text (viz.heads.swap_head)."""
    block = run_model(path, stamp, text).block(attention, layer)
    return frozen(head_heatmap(block.weights[0], block.query_pieces, block.key_pieces))


def head_weights(block: Block, head: int) -> np.ndarray:
    """(Tq, Tk) weights of one head, or the mean of the block's heads for AVERAGE."""
    return average_heads(block.weights) if head == AVERAGE else block.weights[head]


def head_chart(path: str, stamp: float, text: str, attention: str, layer: int, head: int) -> dict:
    """The one-head heatmap (head AVERAGE: the mean of the layer's heads), frozen: `viz.style.thaw` it."""
    analysis = run_model(path, stamp, text)
    block = analysis.block(attention, layer)
    weights = head_weights(block, head)
    head_name = "average of heads" if head == AVERAGE else f"head {head + 1}"
    title = f"{analysis.attention_label(attention)}, layer {layer + 1}, {head_name}"
    return swap_head(_heatmap_template(path, stamp, text, attention, layer), weights, title)


@st.cache_resource(max_entries=64, show_spinner=False)
def grid_chart(path: str, stamp: float, text: str, attention: str) -> dict:
    """Every head of one attention type, no head outlined (viz.heads.select_head outlines one on a copy),
    frozen."""
    analysis = run_model(path, stamp, text)
    return frozen(heads_grid(analysis.stacked(attention), f"{analysis.attention_label(attention)}: every head"))


@st.cache_resource(max_entries=256, show_spinner=False)
def predictions_table(path: str, stamp: float, text: str, position: int | None) -> pa.Table:
    """The predictions beside the heatmap as an Arrow table (what st.dataframe sends): the language model's top-k
    after `position`, or an encoder-decoder's steps (position None)."""
    analysis = run_model(path, stamp, text)
    if analysis.kind == "encoder-only":
        frame = encoder_frame(analysis)
    else:
        frame = generation_frame(analysis) if position is None else top_k_frame(analysis, position)
    return pa.Table.from_pandas(frame, preserve_index=False)


@st.cache_resource(max_entries=4, show_spinner=False)
def snapshots(path: str, stamp: float) -> list[Snapshot]:
    """The checkpoint's training snapshots, earliest first ([] when it has none); raises CheckpointError."""
    return list_snapshots(path)


@st.cache_resource(max_entries=16, show_spinner="Loading the weights of that training step…")
def snapshot_worker(path: str, stamp: float, step: int) -> ModelWorker:
    """A worker for the checkpoint's model as it was at training step `step`, shared by every session; it keeps
    fewer results than the shipped model's worker (a snapshot is looked at, not explored)."""
    return ModelWorker(load_snapshot(load_model(path, stamp), step), pages_bytes=16 * 2**20, full_bytes=0)


def snapshot_analysis(path: str, stamp: float, step: int, text: str, target: str | None = None) -> Analysis:
    """The Analysis of `text` by the model as it was at training step `step`; raises InputError. `target`: an
    encoder-decoder's output given to its decoder (teacher forcing) instead of the output it writes itself, so
    that every step's decoder reads the same tokens."""
    worker = snapshot_worker(path, stamp, step)
    kept = worker.cached(text, target, k=TOP_K)
    if kept is not None:
        return kept
    with st.spinner(f"Running the model of step {step:,}…"):
        return worker.analyze(text, target, k=TOP_K)


@st.cache_resource(max_entries=64, show_spinner="Running the model without those heads…")
def ablation(path: str, stamp: float, text: str, heads: tuple[tuple[str, tuple[int, ...]], ...], mode: str) -> Effect:
    """Predictions with `heads` ((block name, heads) pairs) switched off, beside the intact model's; the
    worker runs it."""
    return model_worker(path, stamp).call(ablation_effect, text, dict(heads), mode)


@st.cache_resource(max_entries=16, show_spinner=False)
def _ranking_setup(path: str, stamp: float, text: str) -> RankingSetup:
    return model_worker(path, stamp).call(ranking_setup, text)


@st.cache_resource(max_entries=2048, show_spinner=False)
def _block_ranking(path: str, stamp: float, text: str, mode: str, block: str) -> list[tuple[str, int, float]]:
    return model_worker(path, stamp).call(rank_block, _ranking_setup(path, stamp, text), block, mode)


def head_ranking(
    path: str, stamp: float, text: str, mode: str, progress: Callable[[int, int, str], None] | None = None
) -> list[tuple[str, int, float]]:
    """Every head switched off alone, the most important first (inference.ablation.head_importance), one block
    per job of the model's worker: other sessions' requests run between blocks (SmolLM2's 30 layers × 9 heads are
    270 passes), and `progress(done, blocks, next block)` is called before each block. Cached per block."""
    setup = _ranking_setup(path, stamp, text)
    table = []
    for done, (block, _) in enumerate(setup.blocks):
        if progress is not None:
            progress(done, len(setup.blocks), block)
        table += _block_ranking(path, stamp, text, mode, block)
    return most_important_first(table)


@st.cache_data(max_entries=16, show_spinner=False)
def head_statistics(path: str, stamp: float, text: str) -> pd.DataFrame:
    return head_table(run_model(path, stamp, text))


@st.cache_data(max_entries=4, show_spinner=False)
def positional_table(path: str, stamp: float) -> np.ndarray:
    return model_positional_table(load_model(path, stamp))


def export_bytes(path: str, stamp: float, text: str, fmt: str) -> bytes:
    """The whole Analysis as format-1 JSON or NPZ (inference.export); run when a download button is clicked."""
    analysis = run_model(path, stamp, text, full=True)
    return to_json(analysis).encode("utf-8") if fmt == "json" else to_npz_bytes(analysis)


_heap_frozen = False


def freeze_heap_once() -> None:
    """On the process's first rerun, move every object alive (torch, pandas, plotly, Streamlit: the imports) out
    of the garbage collector's reach, so that a full collection walks only what reruns create. A module global:
    modules outlive reruns."""
    global _heap_frozen
    if not _heap_frozen:
        gc.freeze()
        _heap_frozen = True


def safe(func: Callable[P, None]) -> Callable[P, None]:
    """Decorate a page body or fragment: any error becomes a short st.error instead of a traceback.

    Streamlit's own control flow (st.rerun, st.switch_page, st.stop) derives from BaseException and passes.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            func(*args, **kwargs)
        except (InputError, CheckpointError) as exc:
            st.error(str(exc))
        except Exception as exc:  # the page must never show a traceback; the log keeps it
            log.exception("page failed")
            st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}")

    return wrapper


def guarded(body: Callable[[], None]) -> None:
    """Run a page body under `safe`."""
    safe(body)()


def keep_state() -> None:
    """Re-assign persistent widget values so Streamlit keeps them while another page is shown."""
    for key in PERSISTENT:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def restore_from_url() -> None:
    """On a session's first run, take model, text, attention, layer and head from the URL."""
    if st.session_state.get("_url_restored"):
        return
    st.session_state["_url_restored"] = True
    for key, cast in URL_KEYS.items():
        if key in st.query_params and key not in st.session_state:
            try:
                st.session_state[key] = cast(st.query_params[key])
            except ValueError:
                continue
            if key in ("query", "position", "gen_step"):  # follow_text keeps it for the URL's text
                st.session_state[f"_{key}_from_url"] = True
    for key, url_key in URL_LISTS.items():
        if st.query_params.get(url_key) and key not in st.session_state:
            st.session_state[key] = st.query_params[url_key].split(",")


# Projector mode: Streamlit sizes its text in rem, so a larger root font scales the whole page; captions and
# widget labels, grey by default, become black; the charts get larger type (viz.style.for_projector).
PROJECTOR_CSS = """<style>
html { font-size: 22px; }
[data-testid="stAppViewContainer"] { background: #fff; color: #000; }
[data-testid="stCaptionContainer"], [data-testid="stWidgetLabel"] p, .stMarkdown p { color: #000 !important; }
[data-testid="stCaptionContainer"] p { font-size: 0.95rem; }
[data-testid="stMainBlockContainer"] { padding-left: 2rem; padding-right: 2rem; max-width: 100%; }
</style>"""


def projector() -> bool:
    """Whether projector mode is on (the sidebar's toggle, or `projector=1` in the URL)."""
    return bool(st.session_state.get("projector"))


def show_chart(fig, key: str, file_name: str, where=None, **kwargs):
    """st.plotly_chart of `fig` (a Figure), in large type in projector mode, its heatmap cell numbers hidden
    by CSS wherever the chart is too narrow for them (viz.style.cell_numbers_css); returns what
    st.plotly_chart returns (the selection, with on_select). `where`: a column or tab (default: the page)."""
    where = where if where is not None else st
    if projector():
        fig = for_projector(fig)
    width = cell_numbers_width(fig)
    if width:
        where.html(f"<style>{cell_numbers_css(key, width)}</style>")
    return where.plotly_chart(fig, key=key, config=chart_config(file_name), **kwargs)


def sync_url() -> None:
    """Write the current view into the URL so that a copied link restores it."""
    values = {k: str(v) for k in URL_KEYS if (v := st.session_state.get(k)) is not None and v is not False}
    values |= {url: ",".join(map(str, st.session_state[k])) for k, url in URL_LISTS.items() if st.session_state.get(k)}
    if len(values.get("text", "")) > MAX_URL_TEXT:
        values.pop("text")
    if st.query_params.to_dict() != values:
        st.query_params.from_dict(values)


def switch_model(name: str) -> None:
    """Choose checkpoint `name` as picking it in the sidebar does (a page's "switch to …" button's on_click)."""
    st.session_state["model"] = name
    _on_model_change()


def _on_model_change() -> None:
    """A preset of the previous model's kind gives way to the first preset of the new one; the attention type
    goes back to the new model's default (cross-attention for an encoder-decoder)."""
    st.session_state.pop("attention", None)
    all_presets = {p for family in catalog.PRESETS.values() for p in family}
    if st.session_state.get("text") in all_presets:
        st.session_state.pop("text")
    st.session_state.pop("preset", None)


def _on_preset() -> None:
    if st.session_state.get("preset"):
        st.session_state["text"] = st.session_state["preset"]


def sidebar() -> None:
    """Draw the sidebar (from app.py, so its widgets keep their state on every page) and remember the result
    for `context()`: the loaded model and text, or the message saying why there is none."""
    st.session_state["_context"] = (None, "The model could not be chosen (see the message above).")
    st.session_state["_context"] = _sidebar()


def context() -> Context | None:
    """The model and text chosen in the sidebar; None after showing why there are none."""
    ctx, error = st.session_state.get("_context", (None, "The sidebar has not run yet."))
    if ctx is None:
        st.error(error)
    return ctx


@st.cache_resource(max_entries=4, show_spinner=False)
def checkpoint_entries(root: str, stamp: tuple) -> list[catalog.Entry]:
    """The checkpoints under `root`, read again only when a folder's stamp changes (catalog.folder_stamp)."""
    return catalog.list_checkpoints(Path(root))


def _sidebar() -> tuple[Context | None, str]:
    root = catalog.checkpoints_dir()
    entries = checkpoint_entries(str(root), catalog.folder_stamp(root))
    if not entries:
        return None, (
            f"No checkpoints found in `{root}`. Put a checkpoint directory there (model.safetensors, "
            f"config.json, tokenizer.model, card.json) or point {catalog.ENV_VAR} at a folder that has some."
        )
    by_name = {e.name: e for e in entries}
    if st.session_state.get("model") not in by_name:
        st.session_state["model"] = next((e.name for e in entries if e.ok), entries[0].name)
    side = st.sidebar
    side.toggle(
        "Projector mode",
        key="projector",
        help="Large type and high contrast for a classroom projector; numbers in cells only where they fit.",
    )
    name = side.selectbox(
        "Model",
        list(by_name),
        key="model",
        on_change=_on_model_change,
        format_func=lambda n: n if by_name[n].ok else f"{n} (cannot be read)",
    )
    entry = by_name[name]
    if not entry.ok:
        return None, f"The checkpoint `{entry.name}` cannot be loaded: {entry.error}"
    stamp = catalog.stamp(entry.path)
    try:
        ckpt = load_model(str(entry.path), stamp)
    except CheckpointError as exc:
        return None, f"The checkpoint `{entry.name}` cannot be loaded: {exc}"
    task, metrics = catalog.card_summary(entry.card)
    side.caption(f"{entry.kind} · {ckpt.config.positional} positions · max {ckpt.config.max_len} tokens")
    side.text(task)
    if metrics:
        side.dataframe(pd.DataFrame(metrics, columns=["metric", "value"]), hide_index=True, key="card_metrics")
    presets = catalog.presets(entry.name, entry.kind, entry.card)
    if "text" not in st.session_state:
        st.session_state["text"] = presets[0]
    side.selectbox("Preset sentence", presets, index=None, key="preset", on_change=_on_preset, placeholder="Pick one…")
    text = side.text_area("Text", key="text", height=110, help="Ctrl+Enter applies the text.")
    return Context(entry, ckpt, stamp, text), ""


def analysis_of(ctx: Context, full: bool = False) -> Analysis | None:
    """The cached Analysis of the current text, with its notes shown; None after an error message."""
    try:
        analysis = run_model(ctx.path, ctx.stamp, ctx.text, full)
    except InputError as exc:
        st.error(str(exc))
        return None
    for note in analysis.notes:
        (st.warning if "cut" in note else st.info)(note)
    return analysis


def context_and_analysis(full: bool = False) -> tuple[Context, Analysis] | None:
    """The chosen model and text and their cached Analysis; None after a message saying why there is none.
    `full`: with the raw scores and V of every block (only the attention-math page needs them)."""
    ctx = context()
    analysis = analysis_of(ctx, full) if ctx is not None else None
    return None if analysis is None else (ctx, analysis)


def follow_text(key: str, options: list[int], analysis: Analysis) -> None:
    """A token-position widget (`query`, `position`) belongs to the text it was chosen on: when the model or the
    text changes, it goes back to the last token, never keeping an index that now names another token. A
    position restored from the URL belongs to the URL's text."""
    owner = (analysis.checkpoint, analysis.text)
    if st.session_state.get(f"_{key}_text") != owner or st.session_state.get(key) not in options:
        restored = st.session_state.pop(f"_{key}_from_url", False)
        if not (restored and st.session_state.get(key) in options):
            st.session_state[key] = options[-1]
        st.session_state[f"_{key}_text"] = owner


def keep_within(key: str, low: float, high: float, default: float) -> None:
    """A number widget's value (from the URL or an earlier model) kept inside the widget's range."""
    value = st.session_state.get(key, default)
    st.session_state[key] = type(default)(min(max(value, low), high)) if isinstance(value, int | float) else default


def keep_valid(key: str, options: list, default) -> None:
    """A choice widget's value (from the URL or an earlier model) kept among its options."""
    _valid(key, options, default)


def _valid(key: str, options: list, default) -> None:
    if st.session_state.get(key) not in options:
        st.session_state[key] = default


def head_picker(analysis: Analysis, with_average: bool, all_heads: str = "average") -> tuple[str, int, int]:
    """Attention type, layer and head widgets (keys "attention", "layer", "head"), validated against the analysis.
    `with_average`: the head list ends with AVERAGE, labelled `all_heads` (the Paper view overlays them instead)."""
    attentions = analysis.attentions
    _valid("attention", attentions, "decoder.cross_attn" if "decoder.cross_attn" in attentions else attentions[0])
    cols = st.columns([3, 1, 1])
    attention = cols[0].radio(
        "Attention", attentions, key="attention", format_func=analysis.attention_label, horizontal=True
    )
    layers = analysis.layers(attention)
    _valid("layer", layers, layers[0])
    layer = cols[1].selectbox("Layer", layers, key="layer", format_func=lambda i: f"layer {i + 1}")
    heads = list(range(analysis.block(attention, layer).n_heads)) + ([AVERAGE] if with_average else [])
    _valid("head", heads, 0)

    def head_label(h: int) -> str:
        if h == AVERAGE:
            return all_heads
        if analysis.kv_heads is None:
            return f"head {h + 1}"
        return f"head {h + 1} · key/value head {analysis.kv_head(h) + 1}"  # grouped-query: keys shared

    head = cols[2].selectbox("Head", heads, key="head", format_func=head_label)
    return attention, layer, head

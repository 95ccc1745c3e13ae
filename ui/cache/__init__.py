"""The cached model calls, shared by every browser session: a checkpoint loaded once, one model worker per
checkpoint, the Analysis of a text, training snapshots, ablations and the head ranking. Everything but the loaded
models and their workers (at most four, charged to it) is kept in the server's one byte budget (ui.kept).

A page reads from a `Source` (a loaded checkpoint and a text, or an opened trace file in their place) and draws a
`Shown` (the source with its Analysis). A call about a text takes the source and is cached by its key (path,
modification time, text; ui.kept reads it): hashing the loaded model or an Analysis on every rerun would cost more
than the call.

A module a topic: `sources` (Source, Shown, opened traces), `models` (the loaded checkpoints, their workers, the
folder's listing), `analyses` (a text's Analysis and what the pages ask of it), `interventions` (ablation, the
head ranking, patching, agreement), `attribution` and `probes` (what a checkpoint is measured on once). This
face hands their names on, so that a page imports `from ui import cache` and calls `cache.analysed(...)`.
"""

from ui.cache.analyses import (
    DRAWN,
    analysed,
    analysis,
    certainty,
    export_bytes,
    forced,
    forked,
    head_detail,
    held,
    redrawn,
    snapshot_analysis,
)
from ui.cache.attribution import logit_attribution, logit_lens, score_split, token_attribution
from ui.cache.interventions import (
    ablation,
    activation_patching,
    agreement,
    attribution_patching,
    head_ranking,
    head_ranking_approximate,
)
from ui.cache.models import (
    MAX_TOKENS,
    STAMP_FRESH_S,
    TOP_K,
    checkpoint_entries,
    checkpoints,
    folder_stamp,
    freeze_heap_once,
    heavy_chunk,
    load_model,
    model_worker,
    page_running,
    positional_table,
    session_id,
    snapshot_worker,
    snapshots,
)
from ui.cache.probes import (
    attention_cost,
    cache_timing,
    circuit,
    composition,
    copying,
    induction_report,
    snapshot_head,
    stream,
)
from ui.cache.sources import READING, TRACES, Shown, Source, TraceGoneError, open_trace
from ui.streamlit_private import MAX_UPLOAD_MB

"""The pages' figures and tables built from an analysis, cached and shared by every session.

Each takes the page's `Shown` (ui.cache) and reads its Analysis: none looks the analysis up again. A figure is
built once per (model, text, view), kept in the server's byte budget (ui.kept) and frozen: a rerun or a head
switch sends a built figure as it is (ui.widgets.show_chart takes the frozen dict: nothing is copied or encoded
again) instead of building Plotly objects again (bench/pages.py); `viz.style.thaw` one before changing it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.forced import ForcedRow
from analysis.record import Sublayer
from inference.memory import lasting
from ui.cache import Shown, composition
from ui.kept import kept
from viz.circuits import composition_heatmap
from viz.forced import frozen_strips
from viz.heads import AVERAGE as AVERAGE  # re-exported: the pages choose heads through this module
from viz.heads import grid_view, head_heatmap, head_title, swap_head
from viz.heads import head_name as head_name  # re-exported, as AVERAGE
from viz.heads import head_weights as sublayer_head_weights
from viz.stats import head_table
from viz.style import Reflowed, frozen, shared_template
from viz.tables import encoder_frame, generation_frame, top_k_frame

# Every frozen chart on the default template holds the same template dict: the byte budget counts it in none.
if (_TEMPLATE := shared_template()) is not None:
    lasting(_TEMPLATE)


def head_weights(sublayer: Sublayer, head: int | str) -> np.ndarray:
    """(Tq, Tk) weights of one head, or the mean of the sub-layer's heads for AVERAGE."""
    return sublayer_head_weights(sublayer.weights, head)


def as_drawn(sublayer: Sublayer, norms: bool) -> Sublayer:
    """The sub-layer as the page draws it: its weights, or with `norms` each key's share of what the row moves
    (Sublayer.value_weighted)."""
    return sublayer.value_weighted() if norms else sublayer


@kept()
def _heatmap_template(shown: Shown, attention: str, layer: int) -> dict:
    """A layer's first head, frozen: every head of the layer shares its axes and hover text (viz.heads.swap_head)."""
    sublayer = shown.analysis.sublayer(attention, layer)
    return frozen(head_heatmap(sublayer.weights[0], sublayer.query_pieces, sublayer.key_pieces))


def head_chart(shown: Shown, attention: str, layer: int, head: int | str, norms: bool = False) -> dict:
    """viz.heads.head_view of one head (AVERAGE: the mean of the layer's heads), frozen: the layer's template with
    this head's weights (with `norms`, the value-weighted shares) and title swapped in, which draws the same figure
    without building it again."""
    analysis = shown.analysis
    weights = head_weights(as_drawn(analysis.sublayer(attention, layer), norms), head)
    title = head_title(analysis.attention_label(attention), layer, head, norms)
    return swap_head(_heatmap_template(shown, attention, layer), weights, title)


@kept()
def grid_chart(shown: Shown, attention: str, norms: bool = False) -> dict:
    """Every head of one attention type (with `norms`, the value-weighted shares), no head outlined
    (viz.heads.select_head outlines one on a copy), frozen."""
    analysis = shown.analysis.value_weighted() if norms else shown.analysis
    return frozen(grid_view(analysis.stacked(attention), analysis.attention_label(attention), norms))


@kept()
def certainty_chart(rows: tuple[ForcedRow, ...], title: str) -> Reflowed:
    """viz.forced.frozen_strips of `rows` (how sure the model was of each token): a screen's and a phone's,
    frozen."""
    return frozen_strips(rows, title)


@kept()
def predictions_table(shown: Shown, position: int | None) -> pa.Table:
    """The predictions beside the heatmap as an Arrow table (what st.dataframe sends): the language model's top-k
    after `position`, or an encoder-decoder's steps (position None)."""
    analysis = shown.analysis
    if analysis.blank:  # a centre-word model: its one guess, for the blank
        frame = top_k_frame(analysis, 0)
    elif not analysis.has_decoder:  # an encoder alone: what each position's output scores highest
        frame = encoder_frame(analysis)
    else:
        frame = generation_frame(analysis) if position is None else top_k_frame(analysis, position)
    return pa.Table.from_pandas(frame, preserve_index=False)


@kept()
def head_statistics(shown: Shown) -> pd.DataFrame:
    """One row per head: entropy, mean distance and the weight on notable keys (viz.stats.head_table)."""
    return head_table(shown.analysis)


@kept()
def composition_chart(path: str, stamp: float, mode: str) -> dict:
    """viz.circuits.composition_heatmap of one mode of the checkpoint's composition scores, frozen."""
    return frozen(composition_heatmap(composition(path, stamp).scores[mode], mode))

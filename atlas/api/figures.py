"""The app's views of one Analysis as Plotly figures (`head`, `heads`, `paper`, `rollout`, `mask`, `value_weighted`),
any figure as a file (`save_figure`), and figures in a notebook without a network (`offline`).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import NotebookRenderer

from analysis.record import Analysis
from analysis.rollout import analysis_rollout
from atlas.api.arguments import chosen_attention, head_indices, opening_attention, sublayer_of, zero_based
from inference.files import check_target, user_path, write_file
from viz.heads import AVERAGE, grid_view, head_view
from viz.masks import mask_view
from viz.paper import MIN_THRESHOLD, THRESHOLD, opening_threshold, paper_view
from viz.rollout import rollout_label, rollout_view
from viz.style import standalone_html

# --- the app's views -----------------------------------------------------------------------------------------------


def head(
    analysis: Analysis, layer: int, head: int | str, attention: str | None = None, norms: bool = False
) -> go.Figure:
    """The Explore page's heatmap of one head: queries as rows, keys as columns, the weights on a fixed 0–1 scale.

    `layer` and `head` count from 1 (`head="average"`: the mean of the layer's heads); `attention` is
    "encoder.self_attn", "decoder.self_attn" or "decoder.cross_attn" (None: the cross-attention if the model has
    one, else its first, as the page opens); `norms=True`: each key's share of what the row moves, the page's
    "weight × value norm" switch (see `value_weighted`)."""
    attention = chosen_attention(analysis, attention, opening_attention(analysis))
    sublayer, index = sublayer_of(analysis, attention, layer)
    where = f"layer {index + 1} of {analysis.attention_label(attention)}"
    h = AVERAGE if head == AVERAGE else zero_based(head, sublayer.n_heads, "head", where)
    weights = (sublayer.value_weighted() if norms else sublayer).weights
    label = analysis.attention_label(attention)
    return head_view(weights, sublayer.query_pieces, sublayer.key_pieces, label, index, h, norms)


def heads(analysis: Analysis, attention: str | None = None, norms: bool = False) -> go.Figure:
    """The Explore page's grid of every head of one attention: a row per layer (layer 1 on top), a column per head,
    each head a thumbnail of its weights. `attention` and `norms` as in `head`."""
    attention = chosen_attention(analysis, attention, opening_attention(analysis))
    shown = analysis.value_weighted() if norms else analysis
    return grid_view(shown.stacked(attention), analysis.attention_label(attention), norms)


def paper(
    analysis: Analysis,
    layer: int,
    head: int | None = None,
    attention: str | None = None,
    query: int | None = None,
    threshold: float | None = None,
) -> go.Figure:
    """The Paper view (the picture of Figures 3–5 of "Attention Is All You Need"): a line from each query token on
    the left to each key token on the right for every weight ≥ `threshold`, its opacity the weight, one colour per
    head. `layer`, `head` and `query` (a token position) count from 1; `head=None`: every head of the layer;
    `query=None`: every query token's lines. `threshold` None: where the page's slider opens, 0.1, or the largest
    weight drawn where that is smaller (not below 0.05). `attention` as in `head`."""
    attention = chosen_attention(analysis, attention, opening_attention(analysis))
    sublayer, index = sublayer_of(analysis, attention, layer)
    where = f"layer {index + 1} of {analysis.attention_label(attention)}"
    chosen = None if head is None else head_indices(sublayer, [head], where)
    position = None if query is None else zero_based(query, len(sublayer.query_pieces), "query position", "the text")
    weights = sublayer.weights if chosen is None else sublayer.weights[chosen]
    if threshold is None:
        threshold = opening_threshold(weights, position, THRESHOLD, MIN_THRESHOLD)
    one = None if chosen is None else chosen[0]
    return paper_view(sublayer, analysis.attention_label(attention), index, one, position, threshold)


def rollout(
    analysis: Analysis,
    layer: int | None = None,
    attention: str | None = None,
    residual: bool = True,
    heads: Sequence[int] | None = None,
) -> go.Figure:
    """The Attention rollout page (Abnar & Zuidema 2020): each layer's head-averaged attention, with the residual as
    0.5·A + 0.5·I (`residual=False`: the raw product), multiplied through layers 1 to `layer`; row i is what
    position i draws from each input token. `layer` counts from 1 (None: the last); `heads` the heads averaged,
    from 1 (None: all). `attention` as in `head`, but None opens on the model's first attention, as the page does;
    "decoder.cross_attn" follows an encoder-decoder's output positions back to the source tokens."""
    attention = chosen_attention(analysis, attention)
    first = analysis.sublayer(attention, analysis.layers(attention)[0])
    where = analysis.attention_label(attention)
    picked = None
    if heads is not None:
        if not len(heads):
            raise ValueError(f"no head to average: give heads 1 to {first.n_heads}, or None for all")
        picked = head_indices(first, heads, where)
        picked = None if len(set(picked)) == first.n_heads else picked
    result = analysis_rollout(analysis, attention, residual, picked)
    index = result.n_layers - 1 if layer is None else zero_based(layer, result.n_layers, "layer", where)
    label = rollout_label(analysis, attention)
    return rollout_view(result.maps, result.query_pieces, result.key_pieces, label, index, result.heads, residual)


def mask(analysis: Analysis, attention: str | None = None) -> go.Figure:
    """The Masks page's mask of the analysed input: which key each query may attend to (the padding and no-peek
    rules applied; every layer of an attention has the same). `attention` as in `head`, but None opens on the
    model's first attention, as the page's first tab."""
    attention = chosen_attention(analysis, attention)
    sublayer = analysis.sublayer(attention, analysis.layers(attention)[0])
    return mask_view(sublayer.mask, sublayer.query_pieces, sublayer.key_pieces, analysis.attention_label(attention))


def value_weighted(analysis: Analysis) -> Analysis:
    """`analysis` with every head's weights replaced by each key's share of what the query's row moves,
    ‖α_ij · v_j W_O^h‖ / Σ_j ‖α_ij · v_j W_O^h‖ (Kobayashi et al. 2020), the app's "weight × value norm": every
    view draws it as it draws weights (`atlas.head(atlas.value_weighted(analysis), 2, 3)`); `analyze` of a
    `transformers` encoder-decoder has them too. ValueError for attention taken from outside (a trace file, a
    model's outputs given to `from_huggingface`, a TransformerLens cache), which comes without values: the
    message names the models that have them."""
    if not isinstance(analysis, Analysis):
        raise TypeError(f"value_weighted takes an Analysis (atlas.analyze), not {type(analysis).__name__}")
    return analysis.value_weighted()


# --- figures as files ----------------------------------------------------------------------------------------------

FIGURE_SUFFIXES = (".html", ".svg", ".png", ".pdf")


PNG_SCALE = 2  # pixels per layout pixel: sharp on a high-density screen or a slide; the app's toolbar's too


KALEIDO = "kaleido==1.5.0"  # requirements-dev.txt; it draws with the system's Chrome or Chromium


KALEIDO_PIPE_LOGGER = "choreographer.channels.pipe"  # kaleido's browser channel


class _IgnoredByKaleido(logging.Filter):
    """Drops the record kaleido's channel writes, with its traceback, for a message from the browser it could not
    decode and goes on without ("JSONError decoding message. Ignoring"): the figure is written all the same, and a
    traceback in a notebook's output says otherwise. Every other record of that logger passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("JSONError decoding message")


def quiet_kaleido() -> None:
    """Put `_IgnoredByKaleido` on kaleido's channel logger, once."""
    logger = logging.getLogger(KALEIDO_PIPE_LOGGER)
    if not any(isinstance(f, _IgnoredByKaleido) for f in logger.filters):
        logger.addFilter(_IgnoredByKaleido())


def save_figure(
    fig: go.Figure, path: str | Path, scale: float | None = None, width: int | None = None, height: int | None = None
) -> Path:
    """Write a figure of this API (or any Plotly figure) to `path`, the format chosen by its suffix:

    - `.html`: a page that opens anywhere offline, plotly.js (4.8 MB) inside it, no CDN; still interactive;
    - `.svg`, `.pdf`: vector, drawn by Plotly's own renderer (kaleido driving a headless Chromium), for papers;
    - `.png`: `scale` pixels per layout pixel (default PNG_SCALE), so `width`×`height` (default: the figure's
      layout size, else Plotly's 700×500) comes out `scale` times as many pixels each way.

    Returns the path written. ValueError for another suffix, a `scale` for anything but a PNG, and, as `save`
    says, for a path that is not a regular file's or a write that fails; RuntimeError naming what to install when
    kaleido or a Chromium is missing."""
    if not isinstance(fig, go.Figure):
        raise TypeError(f"save_figure writes a plotly Figure (atlas.head and the rest), not {type(fig).__name__}")
    if not isinstance(path, (str, Path)):
        raise TypeError(f"save_figure writes to a path (a str or Path), not {type(path).__name__}")
    path = user_path(path)
    suffix = path.suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise ValueError(f"{path}: save_figure writes {', '.join(FIGURE_SUFFIXES)}, not {suffix or 'a bare name'}")
    check_target(path)  # before drawing, which takes kaleido seconds
    if scale is not None and suffix != ".png":
        raise ValueError(f"scale is a PNG's pixels per layout pixel; a {suffix} file has no pixels to scale")
    if suffix == ".html":
        # The app's own offline page (Explore's "All heads as one HTML file"), drawn in chromium with the network
        # blocked by tests/test_browser_downloads.py: the library inside, no CDN.
        return write_file(path, standalone_html(fig).encode("utf-8"))
    if importlib.util.find_spec("kaleido") is None:
        raise RuntimeError(f"{path}: {suffix} files are drawn by kaleido, not installed here: pip install {KALEIDO}")
    factor = (scale or PNG_SCALE) if suffix == ".png" else 1
    quiet_kaleido()
    try:
        data = pio.to_image(fig, format=suffix[1:], scale=factor, width=width, height=height)
    except RuntimeError as exc:  # plotly's words for kaleido finding no browser name a download; a system one does
        if "Chrome" not in str(exc):
            raise
        raise RuntimeError(
            f"{path}: kaleido found no Chrome or Chromium to draw with: install one (apt install chromium) or set "
            "BROWSER_PATH to its executable"
        ) from exc
    return write_file(path, data)


# --- figures in a notebook without a network -----------------------------------------------------------------------


class EmbeddedNotebookRenderer(NotebookRenderer):
    """Plotly's "notebook" renderer (`connected=False`: the first figure shown puts plotly.js itself into the
    notebook, once) whose figures' HTML loads no MathJax from a CDN, as the stock one's does ("cdn")."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
        html = pio.to_html(
            fig_dict,
            config=self.config,
            include_plotlyjs=False,  # activate() embedded the library
            include_mathjax=False,
            full_html=False,
            default_width="100%",
            default_height=525,
            validate=False,
        )
        return {"text/html": html}


EMBEDDED = "atlas_embedded"  # EmbeddedNotebookRenderer's name in plotly.io.renderers


OFFLINE = f"plotly_mimetype+{EMBEDDED}"


def offline() -> None:
    """Show figures in notebooks with no network: plotly.io.renderers.default becomes `OFFLINE`, both of
    - "plotly_mimetype": the figure's JSON, which VS Code, JupyterLab and Notebook 7 prefer and draw with a
      plotly.js of their own (Jupyter's is the extension the plotly package installs);
    - EmbeddedNotebookRenderer: HTML for the classic Notebook, nbviewer and HTML exports, with plotly.js (4.8 MB)
      embedded in the notebook by the first figure shown.
    Nothing is fetched from a CDN. Call it once, in a notebook, before the first figure: a second call changes
    nothing (the library is embedded once per kernel). It is not done on import: it sets Plotly's default for the
    whole process, where a plain script wants Plotly's own (a browser tab)."""
    if pio.renderers.default != OFFLINE:
        pio.renderers[EMBEDDED] = EmbeddedNotebookRenderer()
        pio.renderers.default = OFFLINE

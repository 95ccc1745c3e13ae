"""The pickers several pages share (attention, layer and head; a token position), projector mode, and drawing a
chart."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import plotly.graph_objects as go
import pyarrow as pa
import streamlit as st

from analysis.imported import TraceError
from analysis.record import Analysis
from model.names import attention_type, parse_attention_type, sublayer_layer, sublayer_name
from ui import cache, errors, state
from ui.cache import MAX_UPLOAD_MB, Source
from ui.charts import AVERAGE
from ui.markdown import literal
from ui.streamlit_private import UPLOADS_IN_ALL, DeletedFile, DeltaGenerator, PlotlyState, forget_upload
from viz.labels import indexed_labels
from viz.style import (
    Reflowed,
    cell_numbers_css,
    cell_numbers_width,
    chart_config,
    fit_cell_numbers,
    for_projector,
    thaw,
)
from viz.ticks import thinning_css

# One key per choice, the same on every page that offers it. Indices are 0-based in the session and 1-based in the
# URL, as the labels read (L=3&H=5 is "layer 3, head 5").
ATTENTION = state.url_key("attention")
LAYER = state.url_index("layer", "L")
HEAD = state.url_index("head", "H", words=(("all", AVERAGE),))  # a head, or AVERAGE
QUERY = state.url_index("query", "q")  # the attention-math page's query token
POSITION = state.url_index("position", "pos")  # the token whose next one an LM predicts
AVERAGE_ASIDE = "_head_average_aside"  # session key: the average was chosen, a page without it shows head 1
HEAD_PICKED = "_head_picked"  # session key: the person chose a layer or head (a picker, a tile, a button)
PROJECTOR = state.url_key("projector", state.flag)  # large type, high contrast, collapsed sidebar (its toggle)
# Session key: why the page's figures are held back now (a class's open question, ui/class_live.py), or absent.
HELD_BACK = "_figures_held_back"
# Session key: a class's follower sees the figure first, the page's pickers folded (`controls`).
FOLDED = "_controls_folded"
CHARTS_DRAWN = "_charts_drawn"  # session key: the charts this page's run drew, by key (a class's teacher's: pushed)
Chart = go.Figure | dict[str, Any]  # a Figure, or a `frozen` one (viz.style) as the chart caches keep them


def head_from_url(text: str) -> str:
    """A head as a URL names it, 1-based as labelled (`decoder.self_attn-L1-H2`), → the `sublayer name:head` option
    the ablation page's multiselect holds (`decoder.layers.0.self_attn:1`); ValueError for anything else."""
    attention, layer, head = text.rsplit("-", 2)
    if layer[:1] != "L" or head[:1] != "H":
        raise ValueError(f"not a head as a URL names it: {text!r}")
    stack, type_ = parse_attention_type(attention)  # the ValueError for an attention that is not one
    name = sublayer_name(stack, state.FromOne()(layer[1:]), type_)
    return f"{name}:{state.FromOne()(head[1:])}"


def head_to_url(option: str) -> str:
    """A `sublayer name:head` option → the head as a URL names it (see head_from_url)."""
    name, head = option.rsplit(":", 1)
    return f"{attention_type(name)}-L{sublayer_layer(name) + 1}-H{int(head) + 1}"


# Projector mode: Streamlit sizes its text in rem, so a larger root font scales the whole page; captions and
# widget labels, grey by default, become black; the charts get larger type (viz.style.for_projector). The gap between
# elements is halved, and a heading's negative bottom margin (Streamlit's -1rem, which the whole gap made up for) with
# it: else the element below covers the heading's last 0.5rem.
PROJECTOR_CSS = """<style>
html { font-size: 22px; }
[data-testid="stAppViewContainer"] { background: #fff; color: #000; }
[data-testid="stCaptionContainer"], [data-testid="stWidgetLabel"] p, .stMarkdown p { color: #000 !important; }
[data-testid="stCaptionContainer"] p { font-size: 0.95rem; }
[data-testid="stMainBlockContainer"] { padding: 3.9rem 2rem 2rem; max-width: 100%; }
[data-testid="stMain"] h1 { font-size: 1.6rem; padding: 0.2rem 0; }
.st-key-lesson_figure { margin-top: 0.4rem; } /* a step's heading's last line clear of the figure lifted under it */
[data-testid="stMain"] h2 { font-size: 1.3rem; padding: 0.2rem 0; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.5rem; }
[data-testid="stMain"] [data-testid="stHeading"] [data-testid="stMarkdownContainer"] { margin-bottom: -0.5rem; }
</style>"""
# Every mode: below 1100 px wide the main area's side padding (5rem beside an open sidebar) gives way to the charts,
# so that Explore's heatmap keeps 420 px at 1024 × 768; a table made with `wrap=False` keeps each cell on one line
# (ids and pieces read whole) and scrolls sideways inside its column when it is wider. Plotly's toolbar shows only
# while a pointer is on its chart (`config`), and not at all on a device without hover (a phone), where Plotly would
# show it always, over the chart's title; a table's toolbar, shown always there, gets room of its own above it. The
# main area starts just under the menu bar (Streamlit leaves 6rem): the first figure keeps the first view at
# 1024 × 768.
LAYOUT_CSS = """<style>
[data-testid="stMainBlockContainer"] { padding-top: 4rem; }
@media (max-width: 1100px) {
  [data-testid="stMainBlockContainer"] { padding-left: 1.5rem; padding-right: 1.5rem; }
}
.atlas-scroll { overflow-x: auto; }
@media (hover: none) { .js-plotly-plot .modebar-container { display: none; } }
/* a device without hover (a phone) shows a table's toolbar (search, download, full screen) always, 44 px above the
   table, where the gap between elements leaves less: the table steps down so that its toolbar covers nothing */
@media (hover: none) {
  [data-testid="stElementContainer"]:has([data-testid="stElementToolbar"]) { margin-top: calc(44px - 0.5rem); }
}
/* a collapsed sidebar lies off the screen (a phone's, a projector's): its menu and pickers out of the Tab order and
   out of what a screen reader reads, until it is opened */
[data-testid="stSidebar"][data-collapsed="true"] { visibility: hidden; }
/* a page link's label wraps where it is wider than its place (a phone), never cut at the screen's edge */
[data-testid="stPageLink-NavLink"] span, [data-testid="stPageLink-NavLink"] p { white-space: normal; }
/* a phone's first view is the Lesson step's figure and sentence: the step's own heading says which step it is */
@media (max-width: 640px) { .st-key-lesson_progress { display: none; } }
/* a phone's headings in the type a phone's own pages use: a 2.75rem title and a three-line heading would take a
   third of its first view */
@media (max-width: 640px) {
  [data-testid="stMain"] h1 { font-size: 1.75rem; padding: 0.25rem 0; }
  [data-testid="stMain"] h2 { font-size: 1.3rem; padding: 0.25rem 0; }
  /* a formula in smaller type, scrolling sideways rather than cut off where it is still wider than the phone */
  [data-testid="stMain"] .katex-display { font-size: 0.8em; overflow-x: auto; overflow-y: hidden; }
}
/* a formula of two lines (`gathered`) reaches 2 px below its box, which Streamlit's overflow-y: hidden cuts */
[data-testid="stMain"] .katex-display { padding: 0.15em 0; }
.atlas-table.nowrap th, .atlas-table.nowrap td { white-space: nowrap; overflow-wrap: normal; }
</style>"""


def head_picker(analysis: Analysis, with_average: bool, all_heads: str = "average") -> tuple[str, int, int]:
    """Attention type, layer and head widgets, kept valid for the analysis (the attention type starts on
    cross-attention, else the first type). `with_average`: the head list ends with AVERAGE, labelled `all_heads`
    (the Paper view overlays them instead)."""
    attentions = analysis.attentions
    default = "decoder.cross_attn" if "decoder.cross_attn" in attentions else attentions[0]
    state.keep_valid(ATTENTION, attentions, default)
    # Room for "layer 12" and "head 16" whole in large type beside an open sidebar (projector mode at 1024 px)
    cols = st.columns([3, 2, 2])
    # A widget's format_func stays in the session's widget state: labels, never a method of the analysis,
    # which would pin that analysis in every session past the byte budget (tests/test_cache_owned.py).
    attention_labels = {a: analysis.attention_label(a) for a in attentions}
    attention = cols[0].radio("Attention", attentions, key=ATTENTION, format_func=attention_labels.get, horizontal=True)
    layer, head = layer_and_head(analysis, attention, cols[1:], with_average, all_heads)
    return attention, layer, head


def layer_and_head(
    analysis: Analysis,
    attention: str,
    cols: Sequence[DeltaGenerator],
    with_average: bool = False,
    all_heads: str = "average",
) -> tuple[int, int]:
    """Layer and head pickers in `cols` (two columns), the choice every page shares (LAYER, HEAD); a page that
    fixes the attention type (Generate) calls it alone. Without the average, one set aside comes back on the next
    page that has it."""
    layers = analysis.layers(attention)
    state.keep_valid(LAYER, layers, layers[0])
    layer = cols[0].selectbox("Layer", layers, key=LAYER, format_func=lambda i: f"layer {i + 1}", on_change=head_chosen)
    heads = list(range(analysis.sublayer(attention, layer).n_heads)) + ([AVERAGE] if with_average else [])
    _keep_average(with_average)
    state.keep_valid(HEAD, heads, 0)

    def head_label(h: int) -> str:
        if h == AVERAGE:
            return all_heads
        if analysis.kv_heads == analysis.n_heads:
            return f"head {h + 1}"
        return f"head {h + 1} · key/value head {analysis.kv_head(h) + 1}"  # grouped-query: keys shared

    # A widget's format_func stays in the session's widget state: labels, never a method of the analysis,
    # which would pin that analysis in every session past the byte budget (tests/test_cache_owned.py).
    head_labels = {h: head_label(h) for h in heads}
    head = cols[1].selectbox("Head", heads, key=HEAD, format_func=head_labels.get, on_change=head_chosen)
    return layer, head


def _keep_average(with_average: bool) -> None:
    """A page without the average (Attention math) shows head 1 in its place; the next page that has it shows the
    average again, unless a head was chosen in between (`head_chosen`)."""
    if not with_average and st.session_state.get(HEAD) == AVERAGE:
        st.session_state[AVERAGE_ASIDE] = True
    elif with_average and st.session_state.pop(AVERAGE_ASIDE, False):
        st.session_state[HEAD] = AVERAGE


@errors.safe  # a callback: runs outside the page's guard
def head_chosen() -> None:
    """The person chose a layer or head (in a picker, or by a button that opens one): it replaces an average set
    aside, and a page's own opening head (open_on_head) no longer overrides it."""
    st.session_state.pop(AVERAGE_ASIDE, None)
    st.session_state[HEAD_PICKED] = True


def open_on_head(sublayer: str, head: int) -> bool:
    """Before the pickers are drawn, open on head `head` of sub-layer `sublayer` (a page's teaching default: the head a
    training run recorded forming), unless the person chose a layer or head this session or the URL named one.
    Whether it did."""
    if st.session_state.get(HEAD_PICKED) or {LAYER, HEAD} & st.session_state.get(state.FROM_URL, set()):
        return False
    st.session_state[ATTENTION] = attention_type(sublayer)
    st.session_state[LAYER], st.session_state[HEAD] = sublayer_layer(sublayer), head
    return True


WEIGHTING = state.url_key("weighting")  # WEIGHTINGS: what every attention view draws, on every page
WEIGHTINGS = {"weights": "attention weights", "norms": "weight × value norm"}
# one line under each choice, read without hovering (a phone, a projector): what the picture then shows
WEIGHTING_CAPTIONS = (
    "how much each token looks at each other token",
    "how much of each token's information really arrives",
)
WEIGHTING_HELP = (
    "Attention weights: how much each query attends to each key. Weight × value norm: how much of what each key "
    "writes reaches the query — the weight times the length of the key's value vector through the head's output "
    "projection, ‖α·v·W_O‖ (Kobayashi et al. 2020), as a share of the row. A large weight on a key that writes "
    "almost nothing fades."
)


def weighting_picker(analysis: Analysis, where: Any = None) -> bool:
    """The switch between the weights and the value-weighted shares (analysis.record.Sublayer.value_weighted);
    whether to draw the shares. Attention read from a file has no values: no switch, the weights."""
    if not analysis.has_value_norms:
        return False
    where = where if where is not None else st
    state.keep_valid(WEIGHTING, list(WEIGHTINGS), "weights")
    choice = where.radio(
        "Show",
        list(WEIGHTINGS),
        key=WEIGHTING,
        format_func=WEIGHTINGS.get,
        horizontal=True,
        help=WEIGHTING_HELP,
        captions=WEIGHTING_CAPTIONS,
    )
    return choice == "norms"


def token_picker(label: str, key: str, labels: list[str], analysis: Analysis, start: int = -1) -> int:
    """A token-position selectbox (`QUERY`, `POSITION`) over `labels`, starting on `start` (default: the last
    token). The position belongs to the model and text it was chosen on: another text starts again on `start`."""
    options = list(range(len(labels)))
    state.keep_valid(key, options, options[start], owner=(analysis.checkpoint, analysis.text))
    return st.selectbox(label, options, key=key, format_func=lambda i: labels[i])


POINT = state.url_index("point", "point")  # Explore's token pointed at: an index into `pointable` (None: none)


def pointable(analysis: Analysis) -> list[tuple[str, int, str]]:
    """The tokens a page can point at, as (stack, position from 0, label): the encoder's text, then the decoder's;
    a model with one text labels its tokens `3:▁cat`, a translator `encoder 3:▁cat` and `decoder 2:▁Die`."""
    texts = []
    if analysis.has_encoder:
        texts.append(("encoder", analysis.source_pieces or ()))
    if analysis.has_decoder:
        texts.append(("decoder", analysis.target_pieces))
    return [
        (stack, i, label if len(texts) == 1 else f"{stack} {label}")
        for stack, pieces in texts
        for i, label in enumerate(indexed_labels(pieces))
    ]


def token_pointer(analysis: Analysis, where: Any = None) -> tuple[str, int] | None:
    """The "Point at a token" select (kept in the URL as `point`, counted from 1 over `pointable`): the token whose
    row and column every attention figure of the page outlines, as (stack, position); None: no token. The choice
    belongs to the model and text it was made on."""
    where = where if where is not None else st
    tokens = pointable(analysis)
    options = [None, *range(len(tokens))]
    state.keep_valid(POINT, options, None, owner=(analysis.checkpoint, analysis.text))
    labels = {i: tokens[i][2] for i in options[1:]} | {None: "none"}
    chosen = where.selectbox(
        "Point at a token",
        options,
        key=POINT,
        format_func=labels.get,
        placeholder="none",  # Streamlit shows a None value as the placeholder ("Choose an option" by default)
        help="Outline the token's row (where it attends, as query) and its column (what attends to it, as key) "
        "in every attention figure of the page.",
    )
    return None if chosen is None else tokens[chosen][:2]


def trace_uploader(label: str, name: str, opened: Callable[[Source], None]) -> str | None:
    """A box for one .json/.npz trace file that hands the file over as soon as it is chosen: read once
    (cache.open_trace), given to `opened`, and the box replaced by an empty one (a new key), so the session holds
    the file's bytes only while they are read (Streamlit forgets an upload whose box is gone). Returns why the last
    file chosen could not be opened, or None."""
    count, failed = f"_{name}_count", f"_{name}_failed"
    key = f"{name}_{st.session_state.get(count, 0)}"

    @errors.safe  # a callback: runs outside the page's guard
    def chosen() -> None:
        upload = st.session_state.get(key)
        st.session_state[count] = st.session_state.get(count, 0) + 1
        st.session_state.pop(failed, None)
        if upload is None:
            return
        try:
            opened(read_upload(upload))
        except TraceError as exc:
            st.session_state[failed] = errors.shown(str(exc))
        except Exception as exc:  # any other fault in a file is a line on the page, the traceback in the log
            errors.log.exception("opening a trace file failed")
            name = getattr(upload, "name", "the file")
            st.session_state[failed] = errors.shown(f"{name}: cannot be opened ({type(exc).__name__}: {exc})")

    st.file_uploader(label, type=["json", "npz"], key=key, max_upload_size=MAX_UPLOAD_MB, on_change=chosen)
    return st.session_state.get(failed)


LET_GO = (
    "The file was let go before it could be read: the server holds at most {in_all} MB of uploads at a time "
    "(the class's newer files took its room). Choose it again in a moment."
)


def read_upload(upload: object) -> Source:
    """A chosen trace file read once (cache.open_trace) and forgotten by Streamlit's store; TraceError when it
    cannot be opened, or when the store let it go before it was read (ui.streamlit_private's bound: Streamlit then
    gives a DeletedFile, holding no bytes and no name)."""
    if isinstance(upload, DeletedFile):
        raise TraceError(LET_GO.format(in_all=UPLOADS_IN_ALL // 2**20))
    data = upload.getvalue()
    forget_upload(upload.file_id)
    return cache.open_trace(data, upload.name)


def projector() -> bool:
    """Whether projector mode is on (the sidebar's toggle, or `projector=1` in the URL)."""
    return bool(st.session_state.get(PROJECTOR))


class _Frozen(go.Figure):
    """A `frozen` figure (viz.style.frozen: the JSON plotly.js receives, its arrays already base64) as st.plotly_chart
    draws it without copying it. Given a Figure, st.plotly_chart asks it for `to_dict()` (plotly.tools.
    return_figure_from_figure_or_data: a deep copy of every list, then a walk encoding arrays) and writes that as
    JSON; a chart page drawn for a class of followers did this for each of them (a third of a follower's
    chart time). Here `to_dict` is the frozen JSON with its traces copied one level (plotly.io.to_json pops each
    trace's "uid"): nothing else of a Figure is built or asked for. tests/test_widgets.py checks that
    st.plotly_chart's spec is the same as for the thawed Figure."""

    def __init__(self, spec: dict[str, Any]) -> None:  # no Figure is built: that is the cost saved
        object.__setattr__(self, "_frozen", spec)

    def to_dict(self) -> dict[str, Any]:
        spec = self._frozen
        return {**spec, "data": [dict(trace) for trace in spec.get("data", ())]}

    def __repr__(self) -> str:
        return f"_Frozen({len(self._frozen.get('data', ()))} traces)"


def show_chart(
    fig: Chart | Reflowed, key: str, file_name: str, where: DeltaGenerator | None = None, **kwargs: Any
) -> DeltaGenerator | PlotlyState | None:
    """st.plotly_chart of `fig` (a Figure, or a `frozen` one as the chart caches keep them), in large type in
    projector mode, its heatmap cell numbers in a type that fits their rows, or none (viz.style.fit_cell_numbers),
    and hidden by CSS wherever the chart is too narrow for them (viz.style.cell_numbers_css), and its x tick labels
    thinned where they would touch (viz.ticks.thinning_css); returns what st.plotly_chart returns (the selection,
    with on_select). `where`: a column or tab (default: the page). A frozen figure is drawn as it is, uncopied,
    unless projector mode restyles a thawed copy of it. A `Reflowed` chart: both its layouts, one shown
    (`_show_reflowed`)."""
    where = where if where is not None else st
    if held_back(where):
        return None
    wide = fig.wide if isinstance(fig, Reflowed) else fig
    if (drawn_charts := st.session_state.get(CHARTS_DRAWN)) is not None:
        drawn_charts[key] = wide  # what the teacher's page publishes to its followers (ui/class_pushed.py)
    if isinstance(fig, Reflowed):
        return _show_reflowed(fig, key, file_name, where, **kwargs)
    return _draw(_restyled(fig), key, file_name, where, **kwargs)


def _restyled(fig: go.Figure | dict[str, Any]) -> go.Figure | dict[str, Any]:
    """`fig` in large type in projector mode, its cell numbers in a type as tall as its rows allow, or none."""
    if projector():
        fig = for_projector(thaw(fig) if isinstance(fig, dict) else fig)
    return fit_cell_numbers(fig)


def _draw(fig: go.Figure | dict[str, Any], key: str, file_name: str, where: Any, **kwargs):
    width = cell_numbers_width(fig)
    css = (cell_numbers_css(key, width) if width else "") + thinning_css(key, fig)
    if css:
        where.html(f"<style>{css}</style>")
    drawn = _Frozen(fig) if isinstance(fig, dict) else fig
    return where.plotly_chart(drawn, key=key, config=config(file_name), **kwargs)


def _show_reflowed(fig: Reflowed, key: str, file_name: str, where: Any, **kwargs):
    """Both layouts of `fig` in one box, by a container query on the box's width: the wide one (key `key`) where its
    cell text fits it, else the narrow one (key `{key}_narrow`), so that a phone reads every cell's text. Returns
    what the wide one's st.plotly_chart returns."""
    wide, narrow = _restyled(fig.wide), _restyled(fig.narrow)
    fits = cell_numbers_width(wide)
    box = where.container(key=f"{key}_reflowed")
    scope = f".st-key-{key}_reflowed"
    css = f"{scope}{{container-type:inline-size}}"
    css += f"@container (max-width:{fits - 1}px){{{scope} .st-key-{key}{{display:none}}}}"
    css += f"@container (min-width:{fits}px){{{scope} .st-key-{key}_narrow{{display:none}}}}"
    box.html(f"<style>{css}</style>")
    shown = _draw(wide, key, file_name, box, **kwargs)
    _draw(narrow, f"{key}_narrow", file_name, box)
    return shown


def config(file_name: str) -> dict[str, Any]:
    """The `config=` every chart gets (viz.style.chart_config), its toolbar shown only while a pointer is on the
    chart: the toolbar lies over the right end of the title. Plotly shows it always on a device without hover (a
    phone); LAYOUT_CSS hides it there."""
    return chart_config(file_name) | {"displayModeBar": "hover"}


TABLE_CSS = (
    "<style>.atlas-table{border-collapse:collapse;width:100%;font-size:0.875rem}"
    ".atlas-table th,.atlas-table td{border:1px solid #d5d5d8;padding:0.2rem 0.4rem;text-align:left;"
    "overflow-wrap:break-word}.atlas-table td{overflow-wrap:anywhere}"  # a value's long path or name may break
    ".atlas-table td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".atlas-table .bar{background:linear-gradient(90deg,#f4a6a6 var(--p),transparent var(--p))}</style>"
)


def small_table(frame: object, where: object = None, row_header: str | None = None, wrap: bool = True) -> None:
    """A few rows (a top-k, a card's metrics: a DataFrame, an Arrow table or (columns, rows), see `table_rows`) as a
    plain HTML table: cells wrap instead of being cut ("probabilit…" at 1024 px), a screen reader reads a table,
    and there is no scrolling box or Tab stop.
    A `probability` column is printed to 3 decimals over a bar of its value; `row_header`: the column whose
    cells head their rows; `wrap=False`: every cell on one line, the table scrolling sideways when wider than its
    place (LAYOUT_CSS). Larger tables stay st.dataframe (scrolling, sorting)."""
    if held_back(where or st):
        return
    columns, records = table_rows(frame)
    head = "".join(f'<th scope="col">{html.escape(str(c))}</th>' for c in columns)
    rows = []
    for values in records:
        cells = []
        for column, value in zip(columns, values, strict=True):
            if column == "probability":
                cells.append(f'<td class="num bar" style="--p:{100 * float(value):.1f}%">{float(value):.3f}</td>')
            elif column == row_header:
                cells.append(f'<th scope="row">{html.escape(str(value))}</th>')
            else:
                number = isinstance(value, int | float) and not isinstance(value, bool)
                cells.append(f"<td{' class=num' if number else ''}>{html.escape(str(value))}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    kind = "atlas-table" if wrap else "atlas-table nowrap"
    table = f'<table class="{kind}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    # focusable, so that a keyboard scrolls it too when it is wider than its place (axe: scrollable-region-focusable)
    scroll = '<div class="atlas-scroll" tabindex="0" role="region" aria-label="The table, scrolling sideways">'
    table = table if wrap else f"{scroll}{table}</div>"
    (where or st).html(TABLE_CSS + table)


def table_rows(frame: object) -> tuple[list[str], Iterable[tuple]]:
    """The column names and the rows of a pandas DataFrame, a pyarrow Table (what the chart caches keep) or a
    (columns, rows) pair, without building a DataFrame for a table that is not one: a typed page draws several."""
    if isinstance(frame, tuple):
        columns, rows = frame
        return list(columns), rows
    if isinstance(frame, pa.Table):
        return list(frame.column_names), zip(*(column.to_pylist() for column in frame.columns), strict=True)
    return list(frame.columns), frame.itertuples(index=False, name=None)  # plain tuples: no namedtuple class a call


def held_back(where: Any) -> bool:
    """Whether the figures are held back now (HELD_BACK: a class predicts before it sees): then one line in the
    figure's place says why, and the figure or table is not drawn. Every chart (show_chart) and table (small_table,
    data_table) of every page passes here, so a page inherits the rule."""
    why = st.session_state.get(HELD_BACK)
    if not why:
        return False
    where.caption(literal(why))
    return True


def data_table(frame: object, where: Any = None, **kwargs: Any) -> Any:
    """st.dataframe of `frame` (a table that scrolls and sorts) in `where` (default: the page), and what it returns
    (the selection, with on_select); nothing while the figures are held back (`held_back`)."""
    where = where if where is not None else st
    return None if held_back(where) else where.dataframe(frame, **kwargs)


def following() -> bool:
    """Whether this page is a class's follower's, on the teacher's view (FOLDED): its pickers fold away."""
    return bool(st.session_state.get(FOLDED))


def folded_controls(label: str = "Controls: attention, layer, head, …") -> Any:
    """Where a page draws its pickers: an expander, folded, for a class's follower (FOLDED: the figure the teacher
    talks about comes first on a phone), else the page itself."""
    if following():
        return st.expander(label, expanded=False)
    return st.container()

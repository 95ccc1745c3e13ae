"""The sidebar, drawn by app.py on every page: the projector toggle, the model and the text, or an opened trace file
in their place; and what a page reads of it: the chosen source, and its Analysis looked up once."""

from __future__ import annotations

import streamlit as st

from analysis.record import Analysis
from inference import catalog
from inference.checkpoint import Checkpoint, CheckpointError
from inference.text import InputError
from ui import cache, errors, reference, state
from ui.cache import Shown, Source, TraceGoneError
from ui.markdown import literal
from ui.widgets import ATTENTION, PROJECTOR, small_table

MODEL = state.url_key("model")
TEXT = state.url_text("text")  # compressed when long; Explore says when even that is too long for a link
PRESET = "preset"  # the preset picker: it only fills the text, so nothing keeps it
OPENED = "_text_opened"  # session key: the text the app put in the box itself (a page's opening), not the person
CHOSEN = "_context"  # session key: what the sidebar chose, (a cache.Source, "") or (None, why there is none)
TRACE = "_trace"  # session key: the trace file opened on the page "Open a trace file" (a cache.Source)
DRAW_TRACE = state.session_key("draw_trace")  # on: the pages that need only attention draw the trace, not a model
ATTENTION_PAGES = "Explore, Paper view, Attention rollout, Masks, Head statistics and Compare two inputs"


@errors.safe  # a callback: runs outside the page's guard
def switch_model(name: str) -> None:
    """Choose checkpoint `name` as picking it in the sidebar does (a page's "switch to …" button's on_click); an
    open trace file stays open, not drawn."""
    st.session_state[MODEL] = name
    st.session_state[DRAW_TRACE] = False
    _on_model_change()


def open_trace(trace: Source) -> None:
    """Make `trace` the session's trace file, drawn from now on (the sidebar's switch turns it off); like a newly
    picked model, it opens on its own default attention type."""
    st.session_state[TRACE] = trace
    st.session_state[DRAW_TRACE] = True
    st.session_state.pop(ATTENTION, None)


@errors.safe  # a callback: runs outside the page's guard
def close_trace() -> None:
    """Forget the session's trace file: the pages draw the model again (the switch goes with the trace; a page
    may call this after the switch is drawn, when the switch's own key may no longer change)."""
    st.session_state.pop(TRACE, None)


@errors.safe  # a callback: runs outside the page's guard
def draw_model() -> None:
    """Keep the trace file open but draw the model (a model page's button)."""
    st.session_state[DRAW_TRACE] = False


def trace_summary(name: str, analysis: Analysis) -> list[tuple[str, str]]:
    """What a trace file holds, as rows of (what, value): its file, where it came from, kind, tokens, heads."""
    first = next(iter(analysis.sublayers.values()))
    return [
        ("file", name),
        ("from", analysis.checkpoint),
        ("kind", analysis.kind),
        ("tokens", str(len(first.query_pieces))),
        ("layers × heads", f"{len(analysis.layers(first.attention))} × {analysis.n_heads}"),
    ]


@errors.safe  # a callback: runs outside the page's guard
def _on_model_change() -> None:
    """A preset of the previous model's kind gives way to the first preset of the new one; the attention type
    goes back to the new model's default (cross-attention for an encoder-decoder); a reference translation or
    continuation, written for the previous model, goes."""
    st.session_state.pop(ATTENTION, None)
    st.session_state.pop(reference.REFERENCE, None)
    all_presets = {p for family in catalog.PRESETS.values() for p in family}
    if st.session_state.get(TEXT) in all_presets or st.session_state.get(TEXT) == st.session_state.get(OPENED):
        st.session_state.pop(TEXT)
    st.session_state.pop(PRESET, None)


@errors.safe  # a callback: runs outside the page's guard
def _on_preset() -> None:
    if st.session_state.get(PRESET):
        st.session_state[TEXT] = st.session_state[PRESET]


def sidebar(page: str = "") -> None:
    """Draw the sidebar and keep what it chose for the page (`context`, `chosen`): the opened trace file while it
    is drawn, else the loaded model and the text from its box, or the message saying why there is none. `page`:
    the shown page's address, whose measured opening text (catalog.opening_text) fills the box until the person
    writes or picks a text, or a link names one."""
    st.session_state[CHOSEN] = (None, "The model could not be chosen (see the message above).")
    trace = st.session_state.get(TRACE)
    if trace is not None and _trace_drawn(trace):
        st.session_state[CHOSEN] = (trace, "")
        return
    picked = _model_picker()
    if isinstance(picked, str):
        st.session_state[CHOSEN] = (None, picked)
        return
    entry, ckpt, stamp = picked
    presets = catalog.presets(entry.name, entry.kind, entry.card)
    opening = catalog.opening_text(entry.card, page) or presets[0]
    if TEXT not in st.session_state or st.session_state[TEXT] == st.session_state.get(OPENED):
        st.session_state[TEXT] = st.session_state[OPENED] = opening
    side = st.sidebar
    side.selectbox("Preset sentence", presets, index=None, key=PRESET, on_change=_on_preset, placeholder="Pick one…")
    text = side.text_area("Text", key=TEXT, height=110, help="Ctrl+Enter applies the text.")
    why = state.refused(TEXT)
    if why and text == opening:  # said while the box holds the sentence shown in its place
        shown = "the model's first preset sentence" if opening == presets[0] else "the text this page opens on"
        side.warning(f"The link's text was not opened ({literal(why)}); this is {shown}.")
    st.session_state[CHOSEN] = (Source.checkpoint(entry, ckpt, stamp, text), "")
    _card(entry, ckpt)


def _trace_drawn(trace: Source) -> bool:
    """The switch between the opened trace file and a model; when the trace is drawn, what it holds and a button
    that closes it. False when the model is drawn (or the server let the trace go: said, and closed)."""
    side = st.sidebar
    st.session_state.setdefault(DRAW_TRACE, True)
    side.toggle(
        "Draw the trace file",
        key=DRAW_TRACE,
        help=f"On: {ATTENTION_PAGES} draw the attention in {literal(trace.name)}. Off: a model's, on a text of yours.",
    )
    if not st.session_state[DRAW_TRACE]:
        return False
    try:
        analysis = cache.analysed(trace).analysis
    except TraceGoneError as exc:
        close_trace()
        side.error(errors.shown(str(exc)))
        return False
    small_table((["trace", "value"], trace_summary(trace.name, analysis)), side, "trace")
    side.button("Close the trace file", key="close_trace", on_click=close_trace)
    return True


def projector_toggle() -> None:
    """The projector toggle, last in the sidebar. The page links are the menu at the top of the page (app.py),
    after the sidebar in the page's order: the text box stays the fifth Tab stop of every page (after "skip to main
    content", the model, the preset and the text's help; tests/test_browser_axe.py)."""
    st.sidebar.toggle(
        "Projector mode",
        key=PROJECTOR,
        help="Large type and high contrast for a classroom projector; numbers in cells only where they fit.",
    )


# The Lesson draws its own sentence (or the sidebar's, as the student chooses) and names it: a summary of the
# sidebar's text above it would name a text the step does not draw.
OWN_TEXT_PAGES = {"lesson"}
SUMMARY_CHARS = 70  # the text shown in the projector's one-line summary; the rest is in the sidebar's box


def projector_summary() -> None:
    """On a projector, where the sidebar is folded away: the model (or trace file) and the text in one line above
    the page, folded over the model's card, so the class sees what is drawn without the card pushing the figure
    below the first view."""
    source = st.session_state.get(CHOSEN, (None,))[0]
    if source is None:
        return
    text = " ".join(source.text.split())
    text = text if len(text) <= SUMMARY_CHARS else f"{text[:SUMMARY_CHARS]}…"
    what = source.name if source.has_model else f"trace file {source.name}"
    with st.expander(literal(f"{what} · {text}")):
        if source.has_model:
            task, _ = catalog.card_summary(source.entry.card)
            st.text(task)
            if line := catalog.headline(source.entry.card):
                st.caption(line)
        st.caption("The model and the text are chosen in the sidebar (» at the top left opens it).")


def _model_picker() -> tuple[catalog.Entry, Checkpoint, float] | str:
    """The model picker and the model's card: the loaded model and its stamp, or the message saying why there is
    none."""
    root = catalog.checkpoints_dir()
    entries = cache.checkpoints(root)
    if not entries:
        return errors.shown(
            f"No checkpoints found in “{root.name}” (the folder {catalog.ENV_VAR} names, or checkpoints/ beside the "
            "app). Put a checkpoint directory there (model.safetensors, config.json, tokenizer.model, card.json) "
            f"or point {catalog.ENV_VAR} at a folder that has some."
        )
    by_name = {e.name: e for e in entries}
    usable = [e.name for e in entries if e.ok]
    default = catalog.default_model()
    first = default if default in usable else (usable or [entries[0].name])[0]
    side = st.sidebar
    asked = st.session_state.get(MODEL)
    if asked is not None and asked not in by_name and MODEL in st.session_state.get(state.FROM_URL, set()):
        # A link from another server, or to a model since removed: said once, never a silent switch.
        st.session_state[state.FROM_URL].discard(MODEL)
        name = str(asked) if len(str(asked)) <= 80 else f"{str(asked)[:80]}…"
        side.warning(
            errors.shown(f"The link names the model “{name}”, which this server does not have: showing “{first}”.")
        )
    state.keep_valid(MODEL, list(by_name), first)
    name = side.selectbox(
        "Model",
        list(by_name),
        key=MODEL,
        on_change=_on_model_change,
        format_func=lambda n: n if by_name[n].ok else f"{n} (cannot be read)",
    )
    entry = by_name[name]
    if not entry.ok:
        return errors.shown(f"The checkpoint “{entry.name}” cannot be loaded: {entry.error}")
    stamp = catalog.stamp(entry.path)
    try:
        ckpt = cache.load_model(str(entry.path), stamp)
    except CheckpointError as exc:
        return errors.shown(f"The checkpoint “{entry.name}” cannot be loaded: {exc}")
    return entry, ckpt, stamp


def _card(entry: catalog.Entry, ckpt: Checkpoint) -> None:
    """What the model does and how good it is, in plain words below the text box; its architecture and every figure
    of its card one click away, in "Model details"."""
    side = st.sidebar
    task, metrics = catalog.card_summary(entry.card)
    side.text(task)
    if line := catalog.headline(entry.card):
        side.caption(line)
    with side.expander("Model details"):
        st.caption(f"{literal(entry.kind)} · {ckpt.config.positional} positions · max {ckpt.config.max_len} tokens")
        if metrics:
            # An HTML table, not a data grid: its values wrap instead of being cut, a screen reader reads it as a
            # table, and it adds no Tab stops before the text box.
            # The card's names with spaces (top1_accuracy reads "top1 accuracy"): a long one wraps at its words
            # instead of widening the table past the sidebar.
            rows = [(name.replace("_", " "), value) for name, value in metrics]
            small_table((["metric", "value"], rows), row_header="metric")


def _needs_model(trace: Source) -> None:
    st.info(
        f"This page runs the model itself; the trace file {literal(trace.name)} holds attention, not weights. "
        f"{ATTENTION_PAGES} draw the trace."
    )
    st.button("Draw a model instead", key="draw_model", on_click=draw_model)


def context() -> Source | None:
    """The model and text chosen in the sidebar; None after showing why there are none (a page that runs the
    model, while a trace file is drawn: says so)."""
    source, error = st.session_state.get(CHOSEN, (None, "The sidebar has not run yet."))
    if source is not None and not source.has_model:
        _needs_model(source)
        return None
    if source is None:
        st.error(error)  # made by errors.shown where it was found
    return source


def chosen(full: bool = False, source: Source | None = None, trace: bool = False) -> Shown | None:
    """The sidebar's model and text (or `source`) with their Analysis, its notes shown; None after a message saying
    why there is none. A page calls it once per rerun and hands the result down. `full`: with the raw scores and V
    of every sub-layer (only the attention-math page needs them). `trace`: the page needs only attention, so it
    draws the sidebar's trace file when one is drawn; without it, such a page says it needs the model."""
    picked = st.session_state.get(CHOSEN, (None,))[0]
    if source is None and trace and picked is not None and not picked.has_model:
        try:
            return cache.analysed(picked)
        except TraceGoneError as exc:
            close_trace()
            st.error(errors.shown(str(exc)))
            return None
    source = source if source is not None else context()
    if source is None:
        return None
    try:
        found = cache.analysed(source, full)
    except InputError as exc:
        st.error(errors.shown(str(exc)))
        return None
    for note in found.analysis.notes:
        (st.warning if "cut" in note else st.info)(literal(note))  # a note names words of the text
    return found

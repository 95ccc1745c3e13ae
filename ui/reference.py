"""Explore's and Generate's shared section on how sure the model was: its tokens shaded by their probability, and a
box for a reference translation (a language model's: a continuation) read by forced decoding, token by token."""

from __future__ import annotations

import streamlit as st

from analysis.forced import Forced, ForcedRow
from inference import catalog
from inference.text import InputError
from ui import cache, charts, errors, state
from ui.cache import Source
from ui.markdown import literal
from ui.widgets import data_table, show_chart
from viz.forced import forced_frame, percent
from viz.labels import display_piece, safe_filename

REFERENCE = state.url_text("reference")  # kept in the URL as the main text is, and bounded the same way
EXPECTED = "Expected output"  # the box's label for an encoder-decoder that does not translate (reverse)
PROB = st.column_config.ProgressColumn("probability", min_value=0.0, max_value=1.0, format="%.3f")


def label(translates: bool, source: Source | None = None) -> str:
    """The box's label: a translator's reference translation, a language model's continuation of the text, another
    encoder-decoder's (`source`'s: reverse) expected output."""
    if not translates:
        return "Continuation"
    if source is None or catalog.preset_family(source.entry.name, source.entry.kind, source.entry.card) == "translate":
        return "Reference translation"
    return EXPECTED


def asked(source: Source, translates: bool) -> tuple[str | None, Forced | None, str | None]:
    """The reference in the box (None when it is empty), its rows read by the model, and the message saying why
    none could be read (a bad reference): what the page draws before the box itself is drawn (`reference_box`)."""
    reference = st.session_state.get(REFERENCE) or None
    if reference is None or not source.has_model:
        return None, None, None
    try:
        return reference, cache.forced(source, reference), None
    except InputError as exc:
        return reference, None, str(exc)


def own(source: Source, target_ids: tuple[int, ...], start: int) -> tuple[ForcedRow, ...]:
    """How sure the model was of each token of an analysis's decoder input from `start` (none when there is none):
    the rows its traced pass gave (Analysis.certainty) where these are its ids, else a pass of their own."""
    if not 1 <= start < len(target_ids):
        return ()
    analysis = getattr(source, "analysis", None)  # a Shown's: the page's analysis
    if analysis is not None and analysis.certainty and tuple(analysis.target_ids) == tuple(target_ids):
        return analysis.certainty[start - 1 :]
    return cache.certainty(source, tuple(target_ids), start)


def certainty(source: Source, rows: tuple[ForcedRow, ...], what: str, key: str) -> None:
    """`rows`' tokens shaded by the probability the model gave each, the percentage written in every cell, and the
    one it was least sure of said in words."""
    if not rows:
        return
    title = f"How sure the model was of {what}"
    show_chart(charts.certainty_chart(rows, title), key, safe_filename("certainty", source.name))
    least = min(rows, key=lambda r: r.probability)
    said = f"Least sure: “{display_piece(least.piece)}” ({percent(least.probability)}, rank {least.rank})" + (
        "."
        if least.rank == 1
        else f"; its own choice there: “{display_piece(least.top_piece)}” ({percent(least.top_probability)})."
    )
    st.caption(literal(said + " Light cells: sure; dark: unsure. Hover a token for its rank."))


def placeholder(source: Source, translates: bool) -> str:
    """The box's example: German for a translator, the text backwards for the reversing model, words that go on
    for a language model; nothing for another task, whose output the page cannot guess."""
    if not translates:
        return "on the mat."
    family = catalog.preset_family(source.entry.name, source.entry.kind, source.entry.card)
    return {"translate": "Die Katze saß auf der Matte.", "reverse": source.text[::-1]}.get(family, "")


def reference_box(source: Source, translates: bool, found: Forced | None, why: str | None) -> None:
    """The box, then the rows of what it holds: each token's probability and rank beside the model's own choice,
    or the message saying why the reference could not be read."""
    what = label(translates, source)
    st.text_input(
        what,
        key=REFERENCE,
        placeholder=placeholder(source, translates),
        help=(
            "Type the output you expected: it is fed to the decoder token by token (teacher forcing), and "
            "each token shows the probability the model gave it there."
            if translates
            else "Type words to follow the text: each token shows the probability the model gave it there."
        ),
    )
    if why is not None:
        st.error(errors.shown(why))
        return
    if found is None:
        article = "an" if what[0] in "AEIOU" else "a"
        st.caption(literal(f"Type {article} {what.lower()} to see what the model thought of each of its words."))
        return
    for note in found.notes:
        st.warning(literal(note))
    data_table(forced_frame(found.rows), hide_index=True, column_config={"probability": PROB}, key="forced_rows")
    st.caption(
        literal(
            f"Each token of the {what.lower()}, fed to the decoder in turn: the probability the model gave it there, "
            "its rank among every token of the vocabulary (1: the model's own first choice), and the token the "
            "model would have written instead, with its probability."
        )
    )

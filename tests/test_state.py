"""URL parameters count from 1, as the labels do (ui.state.url_index), and only the names declared are read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import ED, LM, ok

from ui import state
from ui.charts import AVERAGE
from ui.widgets import head_from_url, head_to_url


def index_script() -> None:
    """A page with one index kept in the URL as `test_n`, -1 written "all"."""
    import streamlit as st

    from ui import state

    key = state.url_index("test_only_index", "test_n", words=(("all", -1),))
    state.restore_from_url()
    st.text(repr(st.session_state.get(key)))
    state.sync_url()


def opened(**query: str) -> AppTest:
    at = AppTest.from_function(index_script, default_timeout=30)
    at.query_params.update(query)
    return ok(at.run())


def value(at: AppTest) -> object:
    return ast.literal_eval(at.text[0].value)  # the repr the script wrote


def test_a_number_in_the_url_is_the_one_a_person_reads() -> None:
    at = opened(test_n="3")
    assert value(at) == 2 and at.query_params["test_n"] == "3"


def test_a_special_value_reads_as_its_word() -> None:
    at = opened(test_n="all")
    assert value(at) == -1 and at.query_params["test_n"] == "all"


@pytest.mark.parametrize("text", ["0", "-1", "two", ""])
def test_a_number_that_does_not_count_from_one_is_skipped(text: str) -> None:
    assert value(opened(test_n=text)) is None


def test_counting_from_one_reads_back_what_it_writes() -> None:
    parse, write = state.FromOne((("all", -1),)), state.ToOne((("all", -1),))
    assert [parse(write(i)) for i in (-1, 0, 1, 7)] == [-1, 0, 1, 7]
    assert write(0) == "1" and parse("ALL") == -1


def test_a_head_in_a_link_is_named_as_labelled() -> None:
    assert head_to_url("decoder.layers.0.self_attn:1") == "decoder.self_attn-L1-H2"
    assert head_from_url("encoder.self_attn-L2-H3") == "encoder.layers.1.self_attn:2"
    for bad in ("decoder.self_attn-L0-H1", "decoder.self_attn-1-2", "decoder.attn-L1-H1", "L1-H1"):
        with pytest.raises(ValueError):
            head_from_url(bad)


def test_a_link_to_the_average_of_heads_opens_it(app) -> None:
    at = ok(app(model=LM, text="the cat sat on the mat", L="2", H="all"))
    assert at.selectbox(key="head").value == AVERAGE and at.query_params["H"] == "all"


# The project's first parameter names, 0-based, renamed before any release: no link made with them is in the wild.
FIRST_NAMES = {
    "layer": "1",
    "head": "-1",
    "query": "2",
    "position": "2",
    "paper_query": "2",
    "ablate": "decoder.layers.1.self_attn:3",
    "rollout_layer": "0",
    "rollout_attention": "decoder.cross_attn",
}


def test_the_first_zero_based_names_are_not_read(app) -> None:
    """A link with the project's first names opens every page as the link without them does; they stay in it, as
    any parameter no page declares does."""
    plain = ok(app(model=ED, text="Where is the station?"))
    old = ok(app(model=ED, text="Where is the station?", **FIRST_NAMES))
    for path in ("views/explore.py", "views/paper.py", "views/ablation.py", "views/rollout.py"):
        plain, old = (ok(at.switch_page(path).run()) for at in (plain, old))
        unread = {name: text for name, text in old.query_params.items() if name in FIRST_NAMES}
        assert unread == FIRST_NAMES, path
        assert {name: text for name, text in old.query_params.items() if name not in FIRST_NAMES} == plain.query_params


def test_head_statistics_offers_the_head_chosen_on_another_page(app) -> None:
    at = ok(app(model=LM, text="the cat sat on the mat", L="2", H="3"))
    at.switch_page("views/head_stats.py").run()
    pick = ok(at).selectbox(key="stats_pick")
    assert pick.format_func(pick.value).endswith("layer 2, head 3")


def test_the_average_of_heads_comes_back_after_a_page_without_it(app) -> None:
    at = ok(app(model=LM, text="the cat sat on the mat"))
    at.selectbox(key="head").select(AVERAGE).run()
    at.switch_page("views/attention_math.py").run()
    assert ok(at).selectbox(key="head").value == 0  # one head: the math of an average is not drawn
    at.switch_page("views/explore.py").run()
    assert ok(at).selectbox(key="head").value == AVERAGE and at.query_params["H"] == "all"
    at.switch_page("views/attention_math.py").run()
    ok(at).selectbox(key="head").select(2).run()  # a head chosen meanwhile replaces the average
    at.switch_page("views/explore.py").run()
    assert ok(at).selectbox(key="head").value == 2 and at.query_params["H"] == "3"


def test_every_page_fragment_keeps_what_other_pages_chose() -> None:
    """A fragment reruns alone, and Streamlit then drops every kept widget value the page does not draw (Explore's
    position, after a rerun of Attention math's fragment): each fragment is a state.fragment, which keeps them."""
    bare = []
    for path in [*Path("views").rglob("*.py"), *Path("ui").rglob("*.py"), Path("app.py")]:
        if path != Path("ui/state.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                named = isinstance(node, ast.Attribute) and node.attr == "fragment"
                if named and getattr(node.value, "id", "") == "st":
                    bare.append(f"{path}:{node.lineno}")
    assert not bare, f"st.fragment instead of state.fragment at {bare}"

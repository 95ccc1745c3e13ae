"""The app's pages on an opened trace file (AppTest): the pages that need only attention draw the file's attention,
the same values as the analysis it was exported from; Compare puts two trace files side by side; the pages that run
the model say so; a trace the server let go, or one too large to keep, is a message, never a traceback."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from page_text import shown_text
from plotly_data import decode_typed_array
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from streamlit.testing.v1 import AppTest

from analysis.analyze import analyze
from analysis.export import to_json, to_npz_bytes
from analysis.imported import from_arrays
from analysis.rollout import analysis_rollout
from inference.checkpoint import load_checkpoint
from ui import cache, streamlit_private, widgets
from ui.markdown import literal
from viz.stats import head_table

pytestmark = [
    pytest.mark.slow,  # every page on trace files in AppTest (18 s): CI runs them
    pytest.mark.usefixtures("fresh_models"),  # the budget a trace may take (conftest.py)
]

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TEXT = "Where is it?"
ATTENTION_PAGES = ["explore", "paper", "rollout", "masks", "head_stats", "compare"]
MODEL_PAGES = ["generate", "attention_math", "positional", "ablation", "training", "lesson"]


def chart(at: AppTest, key: str) -> dict:
    return json.loads(next(el for el in at.get("plotly_chart") if el.key == key).proto.spec)


def z(spec: dict) -> np.ndarray:
    heat = next(t for t in spec["data"] if t["type"] == "heatmap")
    return decode_typed_array(heat["z"]) if isinstance(heat["z"], dict) else np.asarray(heat["z"], dtype=float)


def problems(at: AppTest) -> list[str]:
    return [e.value for e in [*at.exception, *at.error]]


@pytest.fixture
def exported(good_dir: Path):
    """lm-tiny's analysis of TEXT and its JSON trace."""
    analysis = analyze(load_checkpoint(good_dir / "lm-tiny"), TEXT)
    return analysis, to_json(analysis).encode()


@pytest.fixture
def opened(good_dir: Path, monkeypatch: pytest.MonkeyPatch, exported) -> AppTest:
    """The app with lm-tiny's trace of TEXT opened on the page "Open a trace file"."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/trace.py").run()
    at.get("file_uploader")[0].upload("tiny.json", exported[1]).run()
    assert not problems(at), problems(at)
    return at


def test_the_sidebar_draws_the_opened_trace_instead_of_a_model(opened: AppTest) -> None:
    assert opened.toggle(key="draw_trace").value is True
    assert not [s for s in opened.sidebar.get("selectbox") if s.key == "model"]  # no model picker while drawn
    assert "tiny.json" in " ".join(h.proto.body for h in opened.sidebar.get("html"))
    assert "Compare with a second trace" in [link.proto.label for link in opened.get("page_link")]


def test_explore_draws_the_traces_heads_and_predictions(opened: AppTest, exported) -> None:
    analysis = exported[0]
    opened.switch_page("views/explore.py").run()
    assert not problems(opened), problems(opened)
    assert np.allclose(z(chart(opened, "head_chart")), analysis.sublayer("decoder.self_attn", 0).weights[0], atol=1e-6)
    opened.selectbox(key="layer").set_value(1).run()
    opened.selectbox(key="head").set_value(2).run()
    assert np.allclose(z(chart(opened, "head_chart")), analysis.sublayer("decoder.self_attn", 1).weights[2], atol=1e-6)
    # The trace's own predictions: the model's top guess after the last token, as exported.
    assert "not the trace file" in " ".join(c.value for c in opened.caption)  # a link would open the model
    tables = " ".join(h.proto.body for h in opened.get("html"))
    assert all(f">{p.prob:.3f}<" in tables for p in analysis.predictions[-1])


def test_paper_rollout_masks_and_head_statistics_draw_the_trace(opened: AppTest, exported) -> None:
    analysis = exported[0]
    opened.switch_page("views/paper.py").run()
    assert not problems(opened), problems(opened)
    assert chart(opened, "paper_chart")["data"]
    opened.switch_page("views/rollout.py").run()
    assert not problems(opened), problems(opened)
    rollout = analysis_rollout(analysis, "decoder.self_attn", True, None)
    assert np.allclose(z(chart(opened, "rollout_chart")), rollout.maps[-1], atol=1e-5)
    opened.switch_page("views/masks.py").run()
    assert not problems(opened), problems(opened)
    mask = z(chart(opened, "mask_decoder_self_attn"))
    assert np.array_equal(mask.astype(bool), analysis.sublayer("decoder.self_attn", 0).mask)
    assert "needs the model's tokenizer" in " ".join(c.value for c in opened.caption)
    opened.switch_page("views/head_stats.py").run()
    assert not problems(opened), problems(opened)
    shown = opened.dataframe[0].value
    expected = head_table(analysis)
    assert np.allclose(shown["entropy_bits"].to_numpy(), expected["entropy_bits"].to_numpy(), atol=1e-9)
    assert "induction" not in shown.columns  # the probe runs the model: a trace has none


@pytest.mark.parametrize("page", MODEL_PAGES)
def test_a_page_that_runs_the_model_says_so_and_offers_the_model(opened: AppTest, page: str) -> None:
    opened.switch_page(f"views/{page}.py").run()
    assert not problems(opened), problems(opened)
    said = shown_text(" ".join(i.value for i in opened.info))
    assert "runs the model itself" in said and "tiny.json" in said
    opened.button(key="draw_model").click().run()
    assert not opened.exception, [e.value for e in opened.exception]
    assert opened.toggle(key="draw_trace").value is False
    assert "runs the model itself" not in " ".join(i.value for i in opened.info)
    assert [s for s in opened.sidebar.get("selectbox") if s.key == "model"]  # the model picker is back


def test_closing_the_trace_gives_the_pages_back_to_the_model(opened: AppTest) -> None:
    opened.switch_page("views/explore.py").run()
    opened.sidebar.button(key="close_trace").click().run()
    assert not problems(opened), problems(opened)
    assert [s for s in opened.sidebar.get("selectbox") if s.key == "model"]
    assert not [t for t in opened.get("toggle") if t.key == "draw_trace"]
    opened.switch_page("views/trace.py").run()
    assert "No trace opened yet" in " ".join(i.value for i in opened.info)


def test_compare_puts_a_second_trace_beside_the_first(opened: AppTest, good_dir: Path, exported) -> None:
    first = exported[0]
    second = analyze(load_checkpoint(good_dir / "lm-tiny"), "Where is he?")
    opened.switch_page("views/compare.py").run()
    assert not problems(opened), problems(opened)
    assert "Choose a second trace file" in " ".join(i.value for i in opened.info)
    opened.get("file_uploader")[0].upload("second.npz", to_npz_bytes(second)).run()
    assert not problems(opened), problems(opened)
    a, b = (x.sublayer("decoder.self_attn", 0).weights[0] for x in (first, second))
    assert np.allclose(z(chart(opened, "compare_first")), a, atol=1e-6)
    assert np.allclose(z(chart(opened, "compare_second")), b, atol=1e-6)
    n = min(len(a), len(b))
    assert np.allclose(z(chart(opened, "compare_difference")), b[:n, :n] - a[:n, :n], atol=1e-5)


def test_compare_says_when_the_second_trace_has_no_such_head(opened: AppTest, exported) -> None:
    first = exported[0]
    n, heads = len(first.target_pieces), first.n_heads
    causal = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # every query spread evenly over what it sees
    one_layer = from_arrays([np.stack([causal] * heads)], first.target_pieces, name="one layer")
    opened.switch_page("views/compare.py").run()
    opened.get("file_uploader")[0].upload("one-layer.json", to_json(one_layer).encode()).run()
    assert not problems(opened), problems(opened)  # layer 1 is in both
    opened.selectbox(key="layer").set_value(1).run()
    assert not opened.exception, [e.value for e in opened.exception]
    assert len(opened.error) == 1 and "has no layer 2" in opened.error[0].value, problems(opened)
    opened.get("file_uploader")[0].upload("bad.json", b'{"format": 1}').run()
    assert len(opened.error) == 1 and "second file cannot be opened" in opened.error[0].value, problems(opened)


def test_a_trace_the_server_let_go_is_a_message(opened: AppTest) -> None:
    cache.TRACES.clear()
    opened.switch_page("views/explore.py").run()
    assert not opened.exception, [e.value for e in opened.exception]
    said = " ".join(e.value for e in opened.sidebar.error)
    assert "no longer held by the server" in said and "Open it again" in said
    assert [s for s in opened.sidebar.get("selectbox") if s.key == "model"]  # the model is drawn instead


def test_a_trace_too_large_to_keep_is_refused_with_its_size(
    good_dir: Path, monkeypatch: pytest.MonkeyPatch, exported
) -> None:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    monkeypatch.setattr(cache.TRACES, "max_bytes", 1000)
    cache.TRACES.clear()  # the same file opened by an earlier test of this process is kept, and served as kept
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/trace.py").run()
    at.get("file_uploader")[0].upload("big.json", exported[1]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1 and "more than this server keeps for a trace" in at.error[0].value
    assert not [t for t in at.get("toggle") if t.key == "draw_trace"]


def test_the_upload_cap_is_the_servers() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == cache.MAX_UPLOAD_MB


def test_an_opened_file_leaves_the_box_and_streamlits_store(opened: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session keeps a trace's name and hash, not its bytes: the box is replaced by an empty one, and the file
    leaves Streamlit's upload store, which otherwise keeps every upload until the session ends."""
    box = opened.get("file_uploader")[0]
    assert box.key != "trace_upload_0" and not box.value  # a new, empty box
    store = MemoryUploadedFileManager("/upload")
    store.add_file("session", UploadedFileRec("file", "big.json", "application/json", b"x" * 1000))
    monkeypatch.setattr(
        streamlit_private,
        "get_script_run_ctx",
        lambda suppress_warning=False: SimpleNamespace(uploaded_file_mgr=store, session_id="session"),
    )
    streamlit_private.forget_upload("file")
    assert store.get_files("session", ["file"]) == [] and store._total_bytes == 0


def even(n_queries: int, n_keys: int, heads: int, causal: bool) -> np.ndarray:
    """Every query's weight spread evenly over the keys it may see: a valid head, `heads` times."""
    allowed = np.tril(np.ones((n_queries, n_keys))) if causal else np.ones((n_queries, n_keys))
    return np.stack([allowed / allowed.sum(axis=1, keepdims=True)] * heads)


def traces(good_dir: Path) -> dict[str, bytes]:
    """One trace of each kind the pages meet: the app's exports of a language model and a translator, and
    attention from elsewhere (no predictions, no scores) of each kind."""
    words, source = ["the", "cat", "sat"], ["die", "Katze", "saß", "."]
    out = {
        "lm.json": to_json(analyze(load_checkpoint(good_dir / "lm-tiny"), TEXT)).encode(),
        "translator.npz": to_npz_bytes(analyze(load_checkpoint(good_dir / "translate-tiny"), TEXT)),
        "decoder.json": to_json(from_arrays([even(3, 3, 2, True)] * 2, words)).encode(),
        "encoder.json": to_json(from_arrays([even(3, 3, 2, False)] * 2, words, kind="encoder-only")).encode(),
    }
    seq2seq = from_arrays(
        [even(3, 3, 2, True)],
        words,
        kind="encoder-decoder",
        source_tokens=source,
        encoder=[even(4, 4, 2, False)],
        cross=[even(3, 4, 2, False)],
    )
    out["seq2seq.npz"] = to_npz_bytes(seq2seq)
    return out


@pytest.mark.parametrize("name", ["lm.json", "translator.npz", "decoder.json", "encoder.json", "seq2seq.npz"])
def test_every_attention_page_draws_every_kind_of_trace(good_dir: Path, monkeypatch, name: str) -> None:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/trace.py").run()
    at.get("file_uploader")[0].upload(name, traces(good_dir)[name]).run()
    assert not problems(at), problems(at)
    for page in ATTENTION_PAGES:
        at.switch_page(f"views/{page}.py").run()
        assert not problems(at), (page, problems(at))
        if page != "head_stats":
            assert at.get("plotly_chart") or page == "compare", page
    at.switch_page("views/explore.py").run()
    if name.endswith(("decoder.json", "encoder.json", "seq2seq.npz")):  # attention from elsewhere: no predictions
        assert "holds attention only, no predictions" in " ".join(c.value for c in at.caption)


IMAGE = "![e](http://example.invalid/e.png)"  # a token that, read as Markdown, makes every viewer's browser fetch


def test_tokens_and_names_from_a_trace_file_reach_the_page_as_text_not_markdown(
    good_dir, monkeypatch, exported
) -> None:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))
    last = exported[0].target_pieces[-1]  # the token Explore's caption names: its guesses come after it
    text = exported[1].decode()
    for form in {json.dumps(last), json.dumps(last, ensure_ascii=False)}:
        text = text.replace(form, json.dumps(IMAGE))
    trace = text.encode()
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/trace.py").run()
    at.get("file_uploader")[0].upload("[named](http://example.invalid/).json", trace).run()
    at.switch_page("views/explore.py").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert literal(IMAGE) in captions and IMAGE not in captions, captions
    at.switch_page("views/generate.py").run()
    said = " ".join(i.value for i in at.info)
    assert literal("[named](http://example.invalid/).json") in said and "[named](" not in said
    broken = json.loads(trace)
    first = broken["attention"][0]
    first["weights"][0][-1][0] += 0.5  # the row of IMAGE no longer sums to 1: the message quotes the token
    at.switch_page("views/trace.py").run()
    at.get("file_uploader")[0].upload("broken.json", json.dumps(broken).encode()).run()
    message = " ".join(e.value for e in at.error)
    assert "!\\[e\\](http" in message and IMAGE not in message, message


def test_a_fault_in_the_upload_callback_is_a_line_on_the_page_without_server_paths(good_dir, monkeypatch) -> None:
    """The callback runs before the page and outside its guard: any exception, not only TraceError, is caught."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def broken(data: bytes, name: str):
        raise ZeroDivisionError(f"division by zero in {ROOT / 'analysis' / 'imported.py'}")

    monkeypatch.setattr(cache, "open_trace", broken)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/trace.py").run()
    at.get("file_uploader")[0].upload("t.json", b"{}").run()
    assert not at.exception, [e.value for e in at.exception]
    message = shown_text(" ".join(e.value for e in at.error))
    assert "t.json: cannot be opened (ZeroDivisionError: division by zero in analysis/imported.py)" in message
    assert str(ROOT) not in message


def test_a_file_the_upload_store_let_go_before_it_was_read_is_a_message() -> None:
    """Ten students sending 48 MB traces at once pass the server's upload bound (ui.streamlit_private): the oldest file
    is let go, and its box hands over a DeletedFile (no bytes, no name). bench/bombs.py met it as an AttributeError."""
    from streamlit.runtime.uploaded_file_manager import DeletedFile

    from analysis.imported import TraceError

    with pytest.raises(TraceError, match=r"let go before it could be read: the server holds at most 300 MB"):
        widgets.read_upload(DeletedFile("file"))

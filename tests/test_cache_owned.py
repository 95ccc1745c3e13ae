"""Caches own what they hold: a cleared or evicted model worker stops its thread, and a client's clear_cache
message empties nobody else's caches."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import streamlit as st
from streamlit.runtime.app_session import AppSession

from analysis.worker import ModelWorker
from inference import catalog
from ui import cache, streamlit_private


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("model-worker-")]


def _alive(worker: ModelWorker) -> bool:
    """Whether the worker's own thread still runs: what a cleared or evicted worker must end (nothing in the app
    asks, so the test reads the thread itself)."""
    return worker._thread.is_alive()


def _wait_for(predicate, seconds: float = 10.0) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_cleared_worker_stops_and_clearing_again_and_again_leaves_no_threads(tiny_checkpoints) -> None:
    path = tiny_checkpoints["decoder-only"]
    st.cache_resource.clear()
    before = set(_workers())  # other tests' workers, made without the cache, live on in this process
    for _ in range(5):
        worker = cache.model_worker(str(path), catalog.stamp(path))
        worker.analyze("The cat sat on the mat.")
        assert _alive(worker)
        st.cache_resource.clear()
        assert _wait_for(lambda w=worker: not _alive(w)), "the cleared worker's thread ended"
    assert _wait_for(lambda: set(_workers()) <= before), [t.name for t in set(_workers()) - before]


def test_a_clients_clear_cache_message_clears_only_its_own_session_state(tiny_checkpoints) -> None:
    path = tiny_checkpoints["decoder-only"]
    worker = cache.model_worker(str(path), catalog.stamp(path))
    streamlit_private.refuse_cache_clears()
    cleared = []
    session = SimpleNamespace(_session_state=SimpleNamespace(clear=lambda: cleared.append(True)))
    AppSession._handle_clear_cache_request(session)
    assert cleared == [True]
    assert cache.model_worker(str(path), catalog.stamp(path)) is worker and _alive(worker)
    st.cache_resource.clear()


def test_a_snapshot_worker_pushed_out_of_its_byte_store_is_stopped() -> None:
    """Training steps' models count by their measured bytes; the one used least recently goes, and stops."""
    root = catalog.checkpoints_dir()
    entry = next(e for e in catalog.list_checkpoints(root) if e.name == "induction")
    path, stamp = str(entry.path), catalog.stamp(entry.path)
    steps = [s.step for s in cache.snapshots(path, stamp)][:3]
    store = cache.snapshot_worker.store
    store.clear()
    first = cache.snapshot_worker(path, stamp, steps[0])
    one = store.bytes
    assert one >= 4 * sum(p.numel() for p in first.ckpt.model.parameters())  # float32 weights, measured
    old_max = store.max_bytes
    store.max_bytes = 2 * one  # room for two
    try:
        second = cache.snapshot_worker(path, stamp, steps[1])
        third = cache.snapshot_worker(path, stamp, steps[2])
        assert _wait_for(lambda: not _alive(first)), "the least recently used step's worker stopped"
        assert _alive(second) and _alive(third) and len(store) == 2
    finally:
        store.max_bytes = old_max
        store.clear()
    assert _wait_for(lambda: not _alive(second) and not _alive(third))


def test_a_fragment_holds_its_analysis_weakly(monkeypatch) -> None:
    """A fragment's arguments stay in the session: they must not keep an analysis the budget has let go."""
    import gc

    class Analysis:  # stands in for analysis.record.Analysis (any object a weak reference can point to)
        pass

    analysis = Analysis()
    given = cache.held(cache.Source("model", "text", ckpt="ckpt", stamp=1.0).with_analysis(analysis))
    assert not hasattr(given, "analysis"), "a fragment's argument holds the source alone"
    same = cache.redrawn(given).analysis is analysis  # alive: no second lookup
    assert same
    looked_up = []
    monkeypatch.setattr(cache.analyses, "analysed", lambda s: looked_up.append(s) or "looked up again")
    del analysis
    gc.collect()
    again = cache.redrawn(given)
    assert again == "looked up again" and looked_up == [given]


def test_a_sessions_widgets_keep_no_analysis_alive(monkeypatch) -> None:
    """Streamlit keeps each widget's format_func in the session: a method or closure of the analysis there pins
    it in every session, past the byte budget. Once the caches let the analyses go, none is left alive."""
    import gc
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from analysis.record import Analysis

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(root / "checkpoints"))
    monkeypatch.setenv("ATLAS_PRETRAINED", "0")
    at = AppTest.from_file(str(root / "app.py"), default_timeout=120)
    at.query_params.update({"model": "translate-en-de", "text": "The cat sat on the mat."})
    at.run()
    for page in ("views/ablation.py", "views/rollout.py", "views/paper.py", "views/attention_math.py"):
        at.switch_page(page).run()
        assert not at.exception, page
    entry = next(e for e in catalog.list_checkpoints(root / "checkpoints") if e.name == "translate-en-de")
    worker = cache.model_worker(str(entry.path), catalog.stamp(entry.path))

    def alive() -> list[str]:  # this test's analyses (another module's fixtures may hold analyses of their own)
        mine = (a for a in gc.get_objects() if isinstance(a, Analysis) and a.checkpoint == "translate-en-de")
        return [a.text for a in mine if a.text == "The cat sat on the mat."]

    assert alive(), "the check below would pass vacuously"
    worker.pages.clear()
    worker.full.clear()
    gc.collect()
    assert alive() == []

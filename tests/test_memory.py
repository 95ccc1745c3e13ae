"""The server's one byte budget (inference.memory): sizes measured, not estimated; the least recently used entry of
any store goes first; models are charged; a value computed once however many threads ask."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from analysis.analyze import analyze
from inference.checkpoint import load_checkpoint
from inference.memory import Budget, ByteCache, lasting, measured_bytes
from training.tiny import make_tiny_checkpoint

MB = 2**20


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return load_checkpoint(make_tiny_checkpoint(Path(tmp_path_factory.mktemp("tiny")) / "lm", "decoder-only"))


def test_an_analysis_measures_what_building_it_allocated(ckpt) -> None:
    analyze(ckpt, "Warm the tokenizer and the model up.")
    text = "The measured size of an analysis is what it holds, its arrays and its Python objects. " * 3
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    analysis = analyze(ckpt, text, max_tokens=16)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert 0.8 * held <= measured_bytes(analysis) <= 1.25 * held, (measured_bytes(analysis), held)


def test_a_shared_buffer_counts_once_and_views_do_not_double_it() -> None:
    a = np.zeros(MB, dtype=np.uint8)
    assert MB <= measured_bytes([a, a, a[10:], a.reshape(1024, 1024)]) < MB + 4096


def test_a_lasting_object_counts_in_no_entry_and_only_it() -> None:
    """What `lasting` marks (a template every frozen chart shares) counts nothing, nor what it holds; the entry's
    own data beside it still counts whole, an array shared with it included once."""
    shared = np.zeros(MB, dtype=np.uint8)
    template = {"layout": {"colorway": ["#000001"] * 100}, "buffer": shared}
    entry = {"data": [{"z": np.ones(MB // 2, dtype=np.uint8)}], "layout": {"template": template}}
    before = measured_bytes(entry)
    assert before > MB + MB // 2
    lasting(template)
    after = measured_bytes(entry)
    assert MB // 2 <= after < MB // 2 + 4096, after
    assert measured_bytes({"own": shared}) >= MB  # the array itself is not lasting: held elsewhere it counts


def test_the_charts_shared_template_is_lasting() -> None:
    """ui.charts marks the frozen default template: a frozen chart's size is its own data, not the template's."""
    import plotly.graph_objects as go

    import ui.charts  # noqa: F401  (marks the template)
    from viz.style import frozen, shared_template

    spec = frozen(go.Figure(go.Bar(y=[1, 2])))
    assert spec["layout"]["template"] is shared_template()
    assert measured_bytes(spec) < 4096 < measured_bytes({**spec, "layout": {"template": dict(shared_template())}})


def full_budget_of_two_stores() -> tuple[Budget, ByteCache, ByteCache]:
    """A 3.5 MB budget shared by two stores, holding 1 MB entries a (first), b (second), c (first), oldest first."""
    budget = Budget(3 * MB + MB // 2)
    size = lambda v: v.nbytes
    first, second = ByteCache(10 * MB, budget, size), ByteCache(10 * MB, budget, size)
    first.put("a", np.zeros(MB, np.uint8))
    second.put("b", np.zeros(MB, np.uint8))
    first.put("c", np.zeros(MB, np.uint8))
    return budget, first, second


def test_the_least_recently_used_entry_of_any_store_goes_first() -> None:
    budget, first, second = full_budget_of_two_stores()
    assert first.get("a") is not None  # "a" is now the most recent; "b" in the other store the oldest
    second.put("d", np.zeros(MB, np.uint8))
    assert second.get("b") is None and first.get("a") is not None and first.get("c") is not None
    assert budget.total <= budget.max_bytes


def test_a_value_larger_than_the_room_the_models_leave_is_not_kept() -> None:
    budget = Budget(4 * MB)
    cache = ByteCache(10 * MB, budget, lambda v: v.nbytes)

    class Model:
        pass

    model = Model()
    budget.charge(model, 3 * MB)
    cache.put("big", np.zeros(2 * MB, np.uint8))
    assert cache.get("big") is None and budget.total == 3 * MB
    del model
    gc.collect()
    assert budget.charged == 0  # the model freed, its bytes are free again
    cache.put("big", np.zeros(2 * MB, np.uint8))
    assert cache.get("big") is not None


def test_an_entry_larger_than_the_room_evicts_nothing_from_any_store() -> None:
    """Room is what the models leave (3 MB of 4 here): a 3.5 MB entry fits its own store's 10 MB but never the
    budget, so it is not kept, and the entries of both stores stay, none released."""
    budget = Budget(4 * MB)
    gone: list = []
    first = ByteCache(10 * MB, budget, lambda v: v.nbytes, on_evict=gone.append)
    second = ByteCache(10 * MB, budget, lambda v: v.nbytes, on_evict=gone.append)

    class Model:
        pass

    model = Model()
    budget.charge(model, MB)
    first.put("a", np.zeros(MB, np.uint8))
    second.put("b", np.zeros(MB, np.uint8))
    first.put("big", np.zeros(7 * MB // 2, np.uint8))
    assert first.get("big") is None and first.get("a") is not None and second.get("b") is not None
    assert gone == [] and budget.total == 3 * MB
    del model


def test_charging_a_model_evicts_entries_to_make_room() -> None:
    budget = Budget(4 * MB)
    gone: list = []
    cache = ByteCache(10 * MB, budget, lambda v: v.nbytes, on_evict=gone.append)
    for key in "abc":
        cache.put(key, np.zeros(MB, np.uint8))

    class Model:
        pass

    model = Model()
    budget.charge(model, 2 * MB)
    assert len(gone) == 1 and cache.get("a") is None and budget.total <= budget.max_bytes
    del model


def test_a_missing_value_is_computed_once_for_every_thread_asking() -> None:
    cache = ByteCache(MB, Budget(MB))
    calls: list[int] = []

    def compute() -> str:
        calls.append(1)
        time.sleep(0.2)
        return "value"

    out: list[str] = []
    threads = [threading.Thread(target=lambda: out.append(cache.get_or_compute("k", compute))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert out == ["value"] * 6 and calls == [1]


def test_a_failed_computation_raises_for_every_waiter_and_is_not_kept() -> None:
    cache = ByteCache(MB, Budget(MB))
    with pytest.raises(ValueError):
        cache.get_or_compute("k", lambda: (_ for _ in ()).throw(ValueError("no")))
    assert cache.get("k") is None and cache.get_or_compute("k", lambda: "later") == "later"


def test_one_large_entry_evicts_as_many_older_ones_as_it_needs_across_the_stores() -> None:
    """Budget.settle evicts until the total fits, not one entry per put: a 2.5 MB entry into a full 3.5 MB budget
    of 1 MB entries in two stores lets the two oldest go, and only those."""
    budget, first, second = full_budget_of_two_stores()
    second.put("big", np.zeros(5 * MB // 2, np.uint8))
    assert first.get("a") is None and second.get("b") is None and first.get("c") is not None
    assert second.get("big") is not None and budget.total == 7 * MB // 2 == budget.max_bytes

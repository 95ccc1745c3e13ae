"""Batched model work: many texts in one padded batch give exactly what each text gives alone."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.analyze import Request, analyze, analyze_many, generate_text, translate_many
from analysis.record import Analysis
from analysis.worker import ModelWorker
from inference.checkpoint import load_checkpoint
from inference.decoding import Sampling, generate, greedy_many
from inference.memory import measured_bytes
from inference.text import InputError
from training.tiny import make_tiny_checkpoint

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["The cat sat on the mat.", "Hi", "Where is the station? I would like to go home now.", "abc", "Der Hund."]


@pytest.fixture(scope="module", params=["encoder-decoder", "decoder-only"])
def ckpt(request, tmp_path_factory):
    path = make_tiny_checkpoint(tmp_path_factory.mktemp("worker") / request.param, request.param, seed=3)
    return load_checkpoint(path)


def assert_same_predictions(batched, alone, tol: float = 1e-4) -> None:
    """The same top-k at every position, up to float noise: probabilities equal within `tol`, and the same
    tokens, except that tokens whose probabilities are within `tol` of each other may trade places (or places
    at the list's end, with the next token outside it)."""
    assert len(batched) == len(alone)
    for b, a in zip(batched, alone, strict=True):
        np.testing.assert_allclose([t.prob for t in b], [t.prob for t in a], atol=tol)
        prob_a = {t.id: t.prob for t in a}
        last = a[-1].prob if a else 0.0
        for t in b:
            assert t.id in prob_a or abs(t.prob - last) <= tol, (t, a)
            assert t.id not in prob_a or abs(prob_a[t.id] - t.prob) <= tol, (t, a)


def assert_same(batched: Analysis, alone: Analysis) -> None:
    assert (batched.source_pieces, batched.target_pieces) == (alone.source_pieces, alone.target_pieces)
    assert (batched.output_text, batched.notes, batched.text) == (alone.output_text, alone.notes, alone.text)
    assert_same_predictions(batched.predictions, alone.predictions)
    assert list(batched.sublayers) == list(alone.sublayers)
    for name, sublayer in batched.sublayers.items():
        other = alone.sublayers[name]
        assert sublayer.weights.shape == other.weights.shape and np.array_equal(sublayer.mask, other.mask), name
        np.testing.assert_allclose(sublayer.weights, other.weights, atol=1e-5, err_msg=name)
        if sublayer.scores is None:  # the pages' copy (Analysis.for_pages): no raw scores, no V
            assert sublayer.values is None and not sublayer.weights.flags.writeable, name
        else:
            np.testing.assert_allclose(sublayer.scores, other.scores, atol=1e-4, err_msg=name)
    for name, rows in batched.positional_encoding.items():
        np.testing.assert_array_equal(rows, alone.positional_encoding[name])


def test_a_padded_batch_of_texts_equals_each_text_alone(ckpt) -> None:
    requests = [Request(t, max_tokens=12) for t in TEXTS] + [Request("   "), Request("Katze", target="Die Katze.")]
    results = analyze_many(ckpt, requests)
    assert isinstance(results[-2], InputError)  # the empty text fails in its place; the others go on
    for request, result in zip(requests, results):
        if request.text.strip():
            assert_same(result, analyze(ckpt, request.text, request.target, max_tokens=request.max_tokens))


def test_batched_greedy_decoding_equals_one_source_at_a_time() -> None:
    """The trained reversal model stops at eos at different steps in different rows."""
    ckpt = load_checkpoint(ROOT / "checkpoints" / "reverse")
    sources = [ckpt.tokenizer.encode(t) + [ckpt.config.eos_id] for t in ("abc", "hello", "ponmlkjihgfedcba", "a")]
    batched = greedy_many(ckpt.model, sources, max_tokens=30)
    alone = [generate(ckpt.model, [ckpt.config.bos_id], torch.tensor([s]), max_tokens=30) for s in sources]
    assert [(g.ids, g.finished) for g in batched] == [(g.ids, g.finished) for g in alone]
    assert len({len(g.ids) for g in batched}) > 1 and all(g.finished for g in batched)


def test_the_worker_batches_concurrent_sessions_and_answers_each_its_own(ckpt) -> None:
    worker = ModelWorker(ckpt, window=0.2)
    results: dict[int, Analysis | Exception] = {}

    def session(i: int) -> None:
        try:
            text = TEXTS[i % len(TEXTS)] if i != 3 else ""
            results[i] = worker.analyze(text, max_tokens=12, full=i % 2 == 0)
        except InputError as exc:
            results[i] = exc

    threads = [threading.Thread(target=session, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert isinstance(results[3], InputError)
    for i in set(range(8)) - {3}:
        assert_same(results[i], analyze(ckpt, TEXTS[i % len(TEXTS)], max_tokens=12))
    assert max(worker.batches) > 1  # they were run together, not one after another


def test_the_worker_keeps_results_and_runs_a_text_asked_at_once_only_once(ckpt) -> None:
    worker = ModelWorker(ckpt, window=0.2)
    out: list[Analysis] = []
    threads = [threading.Thread(target=lambda: out.append(worker.analyze("The same text."))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert worker.batches == [1]  # four sessions, one request run
    assert len(out) == 4 and all(a is out[0] for a in out)  # the pages' copy, shared: not a copy per session
    assert worker.analyze("The same text.") is out[0] and worker.batches == [1]  # later: from the cache
    assert len(worker.full) == 0  # nobody asked for the full copy (scores and V of every sub-layer): not kept
    full = worker.analyze("The same text.", full=True)
    assert full.full and not out[0].full and worker.batches == [1, 1]
    assert worker.analyze("The same text.", full=True) is full and worker.batches == [1, 1]  # asked for: kept
    assert_same(out[0], full)
    assert worker.cached("Another text.") is None  # asking what is kept runs nothing


def test_the_worker_cache_stays_within_its_byte_budget(ckpt) -> None:
    sizes = [measured_bytes(analyze(ckpt, text, max_tokens=12).for_pages()) for text in TEXTS]
    worker = ModelWorker(ckpt, pages_bytes=sizes[-1] + sizes[-2], full_bytes=0)  # room for the last two
    for text in TEXTS:
        worker.analyze(text, max_tokens=12)
    assert worker.pages.bytes <= worker.pages.max_bytes and len(worker.full) == 0
    assert worker.cached(TEXTS[-1], max_tokens=12) is not None  # the most recent stays
    assert worker.cached(TEXTS[0], max_tokens=12) is None  # the oldest went first


def test_the_encoder_runs_once_per_batch_of_requests(ckpt) -> None:
    """Decoding its own output and the traced pass share one encoder run: not one for each."""
    if not ckpt.config.has_cross_attention:
        pytest.skip("a language model has no encoder")
    calls: list[tuple] = []
    hook = ckpt.model.encoder.register_forward_hook(lambda module, args, out: calls.append(args[0].shape))
    try:
        requests = [Request(t, max_tokens=12) for t in TEXTS[:3]] + [Request("Katze", target="Die Katze.")]
        results = analyze_many(ckpt, requests)
    finally:
        hook.remove()
    assert len(calls) == 1 and calls[0][0] == 4  # one batch of four sources
    for request, result in zip(requests, results):
        assert_same(result, analyze(ckpt, request.text, request.target, max_tokens=12))


def test_translate_many_gives_what_generate_gives_one_text_at_a_time() -> None:
    """The evaluation's batched greedy outputs (training.evaluate) are the single-text ones."""
    ckpt = load_checkpoint(ROOT / "checkpoints" / "reverse")
    texts = ["abc", "hello", "ponmlkjihgfedcba", "a", "attention"]
    assert translate_many(ckpt, texts, 30, batch=2) == [generate_text(ckpt, t, 30) for t in texts]


def test_a_language_model_continuation_is_generated_then_analysed_with_its_text() -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "lm-english")
    text = "The cat sat on the"
    alone = analyze(ckpt, text)
    written = analyze(ckpt, text, continuation=6)
    prompt = list(alone.target_ids)
    expected = generate(ckpt.model, prompt, None, 6)
    assert written.target_ids == tuple(prompt + expected.ids) and written.generated == len(expected.ids)
    assert written.continuation == ckpt.tokenizer.decode(expected.ids)
    assert len(written.predictions) == len(written.target_ids)
    np.testing.assert_allclose(  # the prompt's own rows are unchanged by what follows (no-peek mask)
        written.sublayers["decoder.layers.0.self_attn"].weights[:, : len(prompt), : len(prompt)],
        alone.sublayers["decoder.layers.0.self_attn"].weights,
        atol=1e-5,
    )
    sampled = [analyze(ckpt, text, continuation=6, sampling=Sampling(1.2, 40, seed)) for seed in (1, 1, 2)]
    assert sampled[0].target_ids == sampled[1].target_ids  # seeded
    worker = ModelWorker(ckpt)
    assert worker.analyze(text, continuation=6, sampling=Sampling(1.2, 40, 1)).target_ids == sampled[0].target_ids
    with pytest.raises(InputError, match="continuation"):
        analyze(ckpt, text, continuation=10_000)


def _sessions(worker: ModelWorker, texts: list[str]) -> dict[int, Analysis | Exception]:
    results: dict[int, Analysis | Exception] = {}

    def session(i: int) -> None:
        try:
            results[i] = worker.analyze(texts[i], max_tokens=8)
        except Exception as exc:  # the test looks at which session got which error
            results[i] = exc

    threads = [threading.Thread(target=session, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_a_failing_request_fails_alone_and_its_neighbours_get_their_answers(ckpt, monkeypatch) -> None:
    import analysis.worker as worker_module

    real = worker_module.analyze_many

    def faulty(model, requests):
        if any(r.text == "poison" for r in requests):
            raise RuntimeError("injected fault")
        return real(model, requests)

    monkeypatch.setattr(worker_module, "analyze_many", faulty)
    worker = ModelWorker(ckpt, window=0.3)
    texts = [TEXTS[0], TEXTS[2], "poison", TEXTS[4], TEXTS[1]]
    results = _sessions(worker, texts)
    assert max(worker.batches) > 1, "the sessions were batched together before the fault"
    assert isinstance(results[2], RuntimeError) and "injected" in str(results[2])
    for i in (0, 1, 3, 4):
        assert isinstance(results[i], Analysis), results[i]
        assert_same(results[i], analyze(ckpt, texts[i], max_tokens=8).for_pages())


def test_a_long_text_goes_in_a_batch_of_its_own(ckpt) -> None:
    worker = ModelWorker(ckpt, window=0.3, max_tokens=200)
    long_text = "The cat sat on the mat and looked at the birds. " * 12  # about 150 tokens by the estimate
    texts = [TEXTS[0], long_text, TEXTS[1], TEXTS[4], TEXTS[3]]
    results = _sessions(worker, texts)
    assert all(isinstance(r, Analysis) for r in results.values())
    assert max(worker.batches) > 1 and 1 in worker.batches
    assert ModelWorker.padded_tokens(Request(long_text)) * 2 > 200  # so it could share with nothing


def test_a_batch_holds_no_more_trace_than_its_bound(ckpt) -> None:
    """Texts sent at once, each alone within the trace bound but no two together, run one per batch."""
    one = ModelWorker(ckpt).trace_bytes(ModelWorker.padded_tokens(Request(TEXTS[2])), 1)
    worker = ModelWorker(ckpt, window=0.3, max_trace_bytes=one * 3 // 2)
    same_length = [TEXTS[2][:-1] + end for end in ".!?;"]
    results = _sessions(worker, same_length)
    assert all(isinstance(r, Analysis) for r in results.values())
    assert worker.batches and max(worker.batches) == 1 and len(worker.batches) == len(results)
    roomy = ModelWorker(ckpt, window=0.3)  # the default bound: the same texts share a batch
    _sessions(roomy, [text + " " for text in same_length])
    assert max(roomy.batches) > 1
    if ckpt.config.has_cross_attention:  # traced one at a time, the texts were still decoded in one batch
        assert max(worker.decodings) > 1, worker.decodings
        for i, text in enumerate(same_length):
            assert_same(results[i], analyze(ckpt, text, max_tokens=8).for_pages())


def test_a_stopped_worker_ends_its_thread_and_drops_what_it_kept(ckpt) -> None:
    worker = ModelWorker(ckpt)
    worker.analyze(TEXTS[0])
    assert len(worker.pages) == 1
    worker.stop()
    worker._thread.join(timeout=10)
    assert not worker._thread.is_alive() and len(worker.pages) == 0 and len(worker.full) == 0


def test_a_translators_output_is_decoded_once_for_every_page(ckpt, monkeypatch) -> None:
    """The output an analysis decoded is kept (ModelWorker.output): the ablation and one head's detail read it, and
    the analysis itself, once the caches let it go, is traced again without decoding."""
    if not ckpt.config.has_cross_attention:
        pytest.skip("a language model decodes nothing for its analysis")
    import analysis.worker as worker_module

    worker = ModelWorker(ckpt)
    first = worker.analyze(TEXTS[0], max_tokens=12)
    assert worker.decodings == [1]
    fresh = worker.output(TEXTS[1], max_tokens=12)  # not analysed: decoded alone, nothing traced
    assert fresh == analyze(ckpt, TEXTS[1], max_tokens=12).target_ids and worker.batches == [1]

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again")

    monkeypatch.setattr(worker_module, "decode_outputs", no_decoding)
    assert worker.output(TEXTS[0], max_tokens=12) == first.target_ids
    worker.pages.clear()
    again = worker.analyze(TEXTS[0], max_tokens=12)  # let go by the cache: traced again from the kept output
    assert again is not first and worker.decodings == [1]
    assert_same(again, first)
    monkeypatch.undo()
    with pytest.raises(InputError):
        worker.output("   ")


def test_a_long_pass_gets_more_of_torchs_threads_and_a_short_one_one(ckpt, monkeypatch) -> None:
    import analysis.worker as worker_module

    asked: list[int] = []
    monkeypatch.setattr(worker_module, "LONG_THREADS", 2)
    monkeypatch.setattr(worker_module.torch, "set_num_threads", asked.append)
    worker = ModelWorker(ckpt)
    worker.analyze(TEXTS[0], max_tokens=8)
    assert asked[-1] == 1  # a class's sentence
    worker.analyze("The cat sat on the mat and looked at the birds. " * 30, max_tokens=8)
    assert asked[-1] == 2  # hundreds of tokens: its products are worth sharing
    assert worker.call(lambda ckpt: 7, tokens=worker_module.LONG_TOKENS) == 7 and asked[-1] == 2
    assert worker.call(lambda ckpt: 7) == 7 and asked[-1] == 1

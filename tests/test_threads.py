"""One model object serves many threads: 8 threads × 20 distinct inputs give exactly the sequential results and
leave the model — parameters, buffers and every submodule's attributes — as it was."""

from __future__ import annotations

import copy
import threading

import pytest
import torch
from torch import nn

from inference.decoding import generate

pytestmark = pytest.mark.slow  # threads racing on real models (6 s): CI runs them

N_THREADS, N_INPUTS = 8, 20
INTERNALS = ("_parameters", "_buffers", "_modules")


def snapshot(model: nn.Module) -> tuple[dict, dict]:
    """Cloned state (parameters and every buffer, persistent or not) and a deep copy of each submodule's other
    attributes (tensors excluded: they are in the state)."""
    tensors = {f"param:{k}": v.detach().clone() for k, v in model.named_parameters(remove_duplicate=False)}
    tensors |= {f"buffer:{k}": v.clone() for k, v in model.named_buffers(remove_duplicate=False)}
    tensors |= {f"state:{k}": v.clone() for k, v in model.state_dict(keep_vars=False).items()}
    attributes = {}
    for name, module in model.named_modules(remove_duplicate=False):
        plain = {k: v for k, v in vars(module).items() if k not in INTERNALS and not isinstance(v, torch.Tensor)}
        attributes[name] = (copy.deepcopy(plain), sorted(vars(module)), sorted(module._modules))
    return tensors, attributes


def assert_unchanged(model: nn.Module, before: tuple[dict, dict]) -> None:
    tensors, attributes = snapshot(model)
    assert tensors.keys() == before[0].keys()
    for key, value in tensors.items():
        assert torch.equal(value, before[0][key]), key
    assert attributes.keys() == before[1].keys()
    for name, value in attributes.items():
        assert value == before[1][name], name


def inputs_for(model, seed: int = 0) -> list[tuple[torch.Tensor | None, torch.Tensor]]:
    """20 distinct (source, target) pairs of different lengths, some batched with padding."""
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    cases = []
    for i in range(N_INPUTS):
        batch = 1 + i % 3
        src = torch.randint(4, vocab, (batch, 3 + i % 7), generator=gen)
        tgt = torch.randint(4, vocab, (batch, 2 + (i * 3) % 9), generator=gen)
        if batch > 1:
            src[-1, 2:] = 0
            tgt[-1, 1:] = 0
        cases.append((src if model.config.has_cross_attention else None, tgt))
    return cases


def forward(model, case):
    src, tgt = case
    with torch.no_grad():
        logits, trace = model(src, tgt) if src is not None else model(tgt)
    return logits, {name: (rec.scores, rec.weights) for name, rec in trace.attention.items()}


def decode(model, case, beam: int):
    src, tgt = case
    prefix = [model.config.bos_id, *tgt[0, :3].tolist()] if src is None else [model.config.bos_id]
    result = generate(model, prefix, None if src is None else src[:1], max_tokens=5, beam=beam)
    return result.ids, result.finished


def run_in_threads(work, n_cases: int) -> list[list]:
    """Each thread runs every case, starting at a different one, all threads released together."""
    results: list[list] = [[None] * n_cases for _ in range(N_THREADS)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(N_THREADS)

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for j in range(n_cases):
                i = (t * 3 + j) % n_cases
                results[t][i] = work(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(N_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    return results


def assert_same(a, b) -> None:
    """Exact equality of nested tuples/lists/dicts of tensors and plain values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_eight_threads_sharing_one_model_get_exactly_the_sequential_results(kind, make_model) -> None:
    model = make_model(kind, seed=11, positional="learned" if kind == "decoder-only" else "sinusoidal")
    cases = inputs_for(model)
    assert len({str(case) for case in cases}) == N_INPUTS  # distinct inputs
    before = snapshot(model)
    sequential = [forward(model, case) for case in cases]
    results = run_in_threads(lambda i: forward(model, cases[i]), N_INPUTS)
    for per_thread in results:
        for i, result in enumerate(per_thread):
            assert_same(result, sequential[i])
    assert_unchanged(model, before)
    assert not model.training


def test_threads_decoding_with_caches_and_beams_get_exactly_the_sequential_results(make_model) -> None:
    model = make_model("encoder-decoder", seed=12)
    cases = inputs_for(model, seed=1)[:10]
    work = [(case, 1 + i % 2) for i, case in enumerate(cases)]  # greedy and beam=2 mixed
    before = snapshot(model)
    sequential = [decode(model, case, beam) for case, beam in work]
    results = run_in_threads(lambda i: decode(model, *work[i]), len(work))
    for per_thread in results:
        for i, result in enumerate(per_thread):
            assert_same(result, sequential[i])
    assert_unchanged(model, before)


def test_threads_on_a_loaded_checkpoint_leave_it_unchanged(tiny_checkpoints) -> None:
    from analysis.analyze import analyze
    from inference.checkpoint import load_checkpoint

    ckpt = load_checkpoint(tiny_checkpoints["decoder-only"])
    texts = [f"The cat number {i} sat on the mat." for i in range(N_INPUTS)]
    before = snapshot(ckpt.model)
    sequential = [analyze(ckpt, text).predictions for text in texts]
    results = run_in_threads(lambda i: analyze(ckpt, texts[i]).predictions, N_INPUTS)
    assert all(per_thread == sequential for per_thread in results)
    assert_unchanged(ckpt.model, before)


def test_the_snapshot_notices_a_changed_attribute_or_parameter(make_model) -> None:
    """The comparison used above can fail: any attribute or weight change is caught."""
    model = make_model("decoder-only", seed=13)
    before = snapshot(model)
    model.decoder.layers[0].self_attn.n_heads = 8
    with pytest.raises(AssertionError):
        assert_unchanged(model, before)
    model.decoder.layers[0].self_attn.n_heads = 4
    assert_unchanged(model, before)
    with torch.no_grad():
        model.decoder.layers[1].feed_forward.w_1.bias[0] += 1e-3
    with pytest.raises(AssertionError):
        assert_unchanged(model, before)

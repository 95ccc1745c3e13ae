"""Head ablation is an argument of the forward pass: its logits equal a reference that cuts the head's output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.attention import Ablation


def inputs(model, gen):
    cfg = model.config
    target = torch.randint(4, cfg.vocab_size, (1, 7), generator=gen)
    target[0, 0] = cfg.bos_id
    source = torch.randint(4, cfg.vocab_size, (1, 6), generator=gen) if cfg.has_cross_attention else None
    return source, target


def logits_of(model, source, target, **kw):
    with torch.no_grad():
        out = model(source, target, **kw) if source is not None else model(target, **kw)
    return out[0]


def sublayer_module(model, name: str):
    stack, _, layer, kind = name.split(".")
    return getattr(getattr(model, stack).layers[int(layer)], kind)


def reference(model, source, target, name: str, head: int, mode: str):
    """The same pass with a pre-hook on the sub-layer's W^O cutting head `head`'s slice of its input by hand."""
    attn = sublayer_module(model, name)
    d = attn.d_head

    def cut(module, args):
        (x,) = args
        x = x.clone()
        part = x[..., head * d : (head + 1) * d]
        x[..., head * d : (head + 1) * d] = 0.0 if mode == "zero" else part.mean(dim=1, keepdim=True)
        return (x,)

    hook = attn.w_o.register_forward_pre_hook(cut)
    try:
        return logits_of(model, source, target)
    finally:
        hook.remove()


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("record", [True, False])
def test_ablating_a_head_equals_cutting_its_output_by_hand(model, gen, mode: str, record: bool) -> None:
    source, target = inputs(model, gen)
    plain = logits_of(model, source, target)
    names = ["decoder.layers.0.self_attn"] + (
        ["encoder.layers.1.self_attn", "decoder.layers.1.cross_attn"] if source is not None else []
    )
    for name in names:
        for head in (0, sublayer_module(model, name).n_heads - 1):
            ablated = logits_of(model, source, target, record=record, ablate={name: Ablation((head,), mode)})
            expected = reference(model, source, target, name, head, mode)
            torch.testing.assert_close(ablated, expected, atol=1e-5, rtol=1e-5)
            assert (ablated - plain).abs().max() > 1e-4, f"{name} head {head}: ablation changed nothing"


def test_the_trace_keeps_the_weights_the_head_computed_and_nothing_is_left_on_the_model(lm, gen) -> None:
    _, target = inputs(lm, gen)
    with torch.no_grad():
        _, plain = lm(target)
        _, cut = lm(target, ablate={"decoder.layers.0.self_attn": Ablation((0, 1))})
        _, again = lm(target)
    torch.testing.assert_close(
        cut.attention["decoder.layers.0.self_attn"].weights, plain.attention["decoder.layers.0.self_attn"].weights
    )
    torch.testing.assert_close(
        again.attention["decoder.layers.1.self_attn"].weights, plain.attention["decoder.layers.1.self_attn"].weights
    )
    with pytest.raises(ValueError, match="mode"):
        Ablation((0,), "half")
    with pytest.raises(ValueError, match="outside"):
        lm(target, ablate={"decoder.layers.0.self_attn": Ablation((99,))})


def test_effect_and_importance_on_the_shipped_models() -> None:
    import threading
    from pathlib import Path

    from analysis.ablation import ablation_effect, head_importance
    from analysis.analyze import analyze, generate_text
    from analysis.worker import ModelWorker
    from inference.checkpoint import load_checkpoint

    root = Path(__file__).resolve().parent.parent / "checkpoints"
    lm = load_checkpoint(root / "lm-english")
    text = "The cat sat on the"
    nothing = ablation_effect(lm, text, {})
    assert nothing.kl == pytest.approx(0.0, abs=1e-6) and nothing.before_top == nothing.after_top
    assert [p.id for p in nothing.before_top] == [p.id for p in analyze(lm, text).predictions[-1]]
    table = head_importance(lm, text)
    n_heads = lm.config.n_heads * lm.config.n_decoder_layers
    assert len(table) == n_heads and [r[2] for r in table] == sorted((r[2] for r in table), reverse=True)
    name, head, kl = table[0]
    assert ablation_effect(lm, text, {name: (head,)}).kl == pytest.approx(kl, rel=1e-5) and kl > 0
    ed = load_checkpoint(root / "reverse")
    every_cross_head = {f"decoder.layers.{i}.cross_attn": (0, 1, 2, 3) for i in range(2)}
    effect = ablation_effect(ed, "abcdef", every_cross_head, mode="mean")
    # the intact output as the pages' analysis decoded it (ui.cache.ablation): the same effect, one decoding fewer
    given = ablation_effect(ed, "abcdef", every_cross_head, "mean", 5, analyze(ed, "abcdef").target_ids[1:])
    assert given == effect
    assert effect.before_output == generate_text(ed, "abcdef", 64) == "fedcba"
    assert len(effect.steps) == len("fedcba") + 1 and effect.kl > 0  # every output token and the end
    assert effect.after_output != effect.before_output  # no cross-attention left: the copy breaks
    worker = ModelWorker(ed)
    where = worker.call(lambda ckpt, x: (threading.current_thread().name, ckpt.name, x), 7)
    assert where == (f"model-worker-{ed.name}", ed.name, 7)
    with pytest.raises(ZeroDivisionError):
        worker.call(lambda ckpt: 1 / 0)
    assert worker.analyze("abc").output_text == "cba"  # it goes on after a failed job


def test_nothing_switched_off_runs_the_intact_model_once(monkeypatch) -> None:
    """The page opens with no head chosen: the effect is the intact model's, from one pass and no decoding."""
    from pathlib import Path

    import analysis.ablation as ablation_module
    from analysis.analyze import analyze
    from inference.checkpoint import load_checkpoint

    root = Path(__file__).resolve().parent.parent / "checkpoints"
    passes = []
    real = ablation_module._logits

    def counted(*args):
        passes.append(args[-1])
        return real(*args)

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded")

    for name, text in (("reverse", "abcdef"), ("lm-english", "The cat sat on the")):
        ckpt = load_checkpoint(root / name)
        output = analyze(ckpt, text).target_ids[1:] if ckpt.config.has_cross_attention else None
        passes.clear()
        with monkeypatch.context() as patched:
            patched.setattr(ablation_module, "_logits", counted)
            patched.setattr(ablation_module, "generate", no_decoding)
            effect = ablation_module.ablation_effect(ckpt, text, {}, "zero", 5, output)
        assert passes == [{}], name  # one intact pass
        assert effect.kl == 0.0 and effect.before_top == effect.after_top
        assert effect.before_output == effect.after_output and all(b == a for _, b, a in effect.steps)


def test_a_mean_ablation_averages_over_the_real_queries_only() -> None:
    """Padding queries (query_valid False) hold whatever the batch gave them: the mean a head is replaced by is
    taken over the real queries, so a padded row is ablated as the same row alone."""
    from model.attention import Ablation

    gen = torch.Generator().manual_seed(0)
    alone = torch.randn(1, 2, 3, 4, generator=gen)
    padded = torch.cat([alone, torch.full((1, 2, 2, 4), 1000.0)], dim=2)  # two padding queries, far from the rest
    valid = torch.tensor([[True, True, True, False, False]])
    cut = Ablation((1,), "mean")
    got = cut.apply(padded, valid)[:, :, :3]
    want = cut.apply(alone, torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(want[0, 1], alone[0, 1].mean(dim=0, keepdim=True).expand(3, 4))
    torch.testing.assert_close(want[0, 0], alone[0, 0])  # the other head untouched


@pytest.fixture(scope="module")
def three_kinds(tmp_path_factory) -> dict:
    """A tiny untrained checkpoint of each kind; the language model's heads grouped-query (2 key/value heads)."""
    from inference.checkpoint import load_checkpoint
    from model.config import Published
    from training.tiny import make_tiny_checkpoint

    root = tmp_path_factory.mktemp("ablation-kinds")
    made = {"encoder-decoder": make_tiny_checkpoint(root / "ed", "encoder-decoder", seed=3)}
    made["encoder-only"] = make_tiny_checkpoint(
        root / "bert", "encoder-only", seed=3, n_encoder_layers=2, n_decoder_layers=0
    )
    made["decoder-only"] = make_tiny_checkpoint(
        root / "lm", "decoder-only", seed=3, positional="rotary", norm="pre", published=Published(n_kv_heads=2)
    )
    return {kind: load_checkpoint(path) for kind, path in made.items()}


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_heads_switched_off_side_by_side_equal_one_pass_a_head(three_kinds, kind, mode, monkeypatch) -> None:
    from analysis import ablation

    ckpt = three_kinds[kind]
    setup = ablation.ranking_setup(ckpt, "the cat sat on the mat and the dog")
    every = [(name, head) for name, n in setup.sublayers for head in range(n)]
    one_at_a_time = ablation.rank_one_at_a_time(ckpt, setup, every, mode)
    passes = []
    counted = ablation.forward
    monkeypatch.setattr(ablation, "forward", lambda *a, **k: passes.append(a[1].shape[0]) or counted(*a, **k))
    for resume in (True, False):
        passes.clear()
        batched = ablation.rank_heads(ckpt, setup, every, mode, batch=5, resume=resume)  # 5 does not divide them
        assert [row[:2] for row in batched] == every
        np.testing.assert_allclose([r[2] for r in batched], [r[2] for r in one_at_a_time], rtol=0, atol=1e-5)
        assert max(r[2] for r in batched) > 1e-4  # the heads matter: equal KLs are not all zero
        if resume and ablation.resumes(ckpt):
            assert passes == [1]  # one intact pass; the rows then run from their heads' layers (the test below)
        else:
            rows = [5] * (len(every) // 5) + ([len(every) % 5] if len(every) % 5 else [])
            assert passes == ([1] if mode == "mean" else []) + rows  # the means' intact pass, then one a batch


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_row_joins_the_batch_at_its_heads_layer(three_kinds, mode, monkeypatch) -> None:
    from analysis import ablation

    ckpt = three_kinds["decoder-only"]
    setup = ablation.ranking_setup(ckpt, "the cat sat on the mat")
    (first, h), (second, _) = setup.sublayers
    shuffled = [(second, 1), (first, 0), (second, 0), (first, h - 1)]  # the answer keeps the order asked
    runs = []
    counted = ablation.decoder_layers
    monkeypatch.setattr(
        ablation,
        "decoder_layers",
        lambda m, ids, x, a, b, **k: runs.append((a, b, x.shape[0])) or counted(m, ids, x, a, b, **k),
    )
    batched = ablation.rank_heads(ckpt, setup, shuffled, mode, batch=4)
    assert runs == [(0, 1, 2), (1, 2, 4)]  # layer 1 runs the first layer's two rows only; layer 2 all four
    expected = ablation.rank_one_at_a_time(ckpt, setup, shuffled, mode)
    assert [r[:2] for r in batched] == shuffled
    np.testing.assert_allclose([r[2] for r in batched], [r[2] for r in expected], rtol=0, atol=1e-5)
    runs.clear()
    ablation.rank_heads(ckpt, setup, [(second, 0), (second, 1)], mode)
    assert runs == [(1, 2, 2)]  # the second layer's heads: the first layer is not run again


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_shipped_language_model_ranks_side_by_side_as_one_pass_a_head(mode) -> None:
    from analysis import ablation
    from inference import catalog
    from inference.checkpoint import load_checkpoint

    ckpt = load_checkpoint(catalog.find_checkpoint("lm-english"))
    setup = ablation.ranking_setup(ckpt, "The cat sat on the mat because it was")
    every = [(name, head) for name, n in setup.sublayers for head in range(n)]
    one_at_a_time = ablation.rank_one_at_a_time(ckpt, setup, every, mode)
    batched = ablation.rank_heads(ckpt, setup, every, mode, batch=20)
    np.testing.assert_allclose([r[2] for r in batched], [r[2] for r in one_at_a_time], rtol=0, atol=1e-5)
    assert max(r[2] for r in batched) > 1e-3


def test_ranking_one_sublayer_or_a_head_that_is_not_there(three_kinds) -> None:
    from analysis.ablation import rank_heads, rank_one_at_a_time, rank_sublayer, ranking_setup

    ckpt = three_kinds["decoder-only"]
    setup = ranking_setup(ckpt, "the cat sat")
    name, n_heads = setup.sublayers[1]
    chosen = rank_sublayer(ckpt, setup, name, "zero", heads=[3, 0])
    expected = rank_one_at_a_time(ckpt, setup, [(name, 3), (name, 0)])
    assert [r[:2] for r in chosen] == [(name, 3), (name, 0)]
    np.testing.assert_allclose([r[2] for r in chosen], [r[2] for r in expected], atol=1e-5)
    with pytest.raises(ValueError, match=f"no head {n_heads} in sub-layer"):
        rank_heads(ckpt, setup, [(name, n_heads)])
    assert rank_heads(ckpt, setup, [], "mean") == []


def test_a_batch_holds_as_many_heads_as_its_bytes_allow(three_kinds, monkeypatch) -> None:
    from analysis import ablation

    for kind in ("decoder-only", "encoder-decoder"):
        ckpt = three_kinds[kind]
        setup = ablation.ranking_setup(ckpt, "the cat sat")
        row = ablation.row_bytes(ckpt, setup)
        assert ablation.batch_rows(ckpt, setup) == ablation.MAX_BATCH
        for budget, rows in ((3 * row, 3), (3 * row - 1, 2), (row, 1), (1, 1)):
            monkeypatch.setattr(ablation, "BATCH_BYTES", budget)
            assert ablation.batch_rows(ckpt, setup) == rows
        monkeypatch.undo()


def test_a_resumed_row_holds_only_the_scored_logits(three_kinds) -> None:
    from analysis import ablation

    ckpt = three_kinds["decoder-only"]
    setup = ablation.ranking_setup(ckpt, "the cat sat")
    t, vocab = setup.target.shape[1], ckpt.config.vocab_size
    whole = ablation.row_bytes(
        ckpt, ablation.RankingSetup(None, setup.target, slice(None), setup.before, setup.sublayers)
    )
    assert whole - ablation.row_bytes(ckpt, setup) == 4 * (t - 1) * vocab  # the last position's logits only

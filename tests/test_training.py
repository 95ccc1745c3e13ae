"""The training pipeline end to end on tiny slices: prepare → train a few steps → load → evaluate."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from analysis.analyze import generate_text
from inference.catalog import PRESETS
from inference.checkpoint import CheckpointError, check_recorded, load_checkpoint, model_from_safetensors, read_metadata
from model.transformer import EncoderDecoder
from training.checkpoint import OPTIMIZER
from training.data.common import train_tokenizer
from training.evaluate import TRANSLATE_SAMPLES, evaluate, has_loop, loop_rate, score_translations, unprompted_loop_rate
from training.loop import train
from training.schedule import cooled_rate, learning_rate, snapshot_steps
from training.tasks import TASKS

pytestmark = pytest.mark.slow  # tiny trainings of every task (10 s): CI runs them

PAIRS = [
    ("Where is the station?", "Wo ist der Bahnhof?"),
    ("The cat sleeps.", "Die Katze schläft."),
    ("I like green tea.", "Ich mag grünen Tee."),
    ("We are going home now.", "Wir gehen jetzt nach Hause."),
    ("Is this seat free?", "Ist dieser Platz frei?"),
]
LINES = [
    "It is a truth universally acknowledged, that a single man must be in want of a wife.",
    "The jury said it did find that the election was conducted properly.",
    "She opened the door and looked out at the rain.",
    "the seat of his pants was worn through",
]
TINY_MODEL = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0)


def write_task(root: Path, task: str) -> Path:
    """A tiny data folder of the layout `python -m training.data prepare` writes."""
    folder = root / task
    folder.mkdir(parents=True)
    if task == "lm":
        for split in ("train", "valid", "test"):
            (folder / f"{split}.txt").write_text("\n".join(LINES * 3) + "\n", encoding="utf-8")
        corpus = [folder / "train.txt"]
    else:
        pairs = [(s, s[::-1]) for s in ("abc", "dcba", "bbad", "cab", "abcd")] if task == "reverse" else PAIRS
        for split in ("train", "valid", "test"):
            (folder / f"{split}.src").write_text("\n".join(s for s, _ in pairs * 4) + "\n", encoding="utf-8")
            (folder / f"{split}.tgt").write_text("\n".join(t for _, t in pairs * 4) + "\n", encoding="utf-8")
        corpus = [folder / "train.src", folder / "train.tgt"]
    model_type = "char" if task == "reverse" else "unigram"
    vocab = 8 if task == "reverse" else 330  # byte fallback needs 256 byte pieces + the characters
    train_tokenizer(
        corpus, folder / "tokenizer", vocab, model_type, byte_fallback=task != "reverse", hard_vocab_limit=False
    )
    (folder / "sources.json").write_text(json.dumps({"task": task, "sources": [{"license": "test"}]}), "utf-8")
    return folder


def tiny_spec(task: str):
    spec = TASKS[task]
    layers = {"n_encoder_layers": 1, "n_decoder_layers": 1} if task != "lm" else {"n_decoder_layers": 1}
    return replace(
        spec,
        model={**spec.model, **TINY_MODEL, **layers, "max_len": 64},
        max_steps=4,
        eval_every=2,
        batch_tokens=256,
        warmup=2,
        block_size=16 if task == "lm" else 0,
        cooldown_share=0.0,  # the paper's schedule: a run of 2 + 2 steps equals one of 4
        lr_factor=0.5,  # the tests' own rate: the tasks' are tuned to their full-size models
        snapshot_every=0,
    )


@pytest.mark.parametrize("task", ["reverse", "translate", "lm"])
def test_each_task_trains_saves_and_evaluates(tmp_path: Path, task: str) -> None:
    write_task(tmp_path / "data", task)
    out = train(tiny_spec(task), tmp_path / "data", tmp_path / "ckpt", seed=0, threads=1, command="test")
    ckpt = load_checkpoint(out)
    assert ckpt.card["training"]["history"], "validation ran"
    assert all(torch.isfinite(torch.tensor(h["valid_loss"])) for h in ckpt.card["training"]["history"])
    assert isinstance(ckpt.model, EncoderDecoder) == (task != "lm")
    metrics, samples = evaluate(ckpt, tmp_path / "data", limit=3)
    expected = {"reverse": "exact_match", "translate": "bleu", "lm": "perplexity"}[task]
    assert expected in metrics and samples


def test_training_is_deterministic_under_a_seed(tmp_path: Path) -> None:
    write_task(tmp_path / "data", "translate")
    a = train(tiny_spec("translate"), tmp_path / "data", tmp_path / "a", seed=3, threads=1, command="test")
    b = train(tiny_spec("translate"), tmp_path / "data", tmp_path / "b", seed=3, threads=1, command="test")
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_learning_rate_warms_up_then_decays_as_in_the_paper() -> None:
    d_model, warmup = 512, 4000
    rates = [learning_rate(s, d_model, warmup, 1.0) for s in (1, 2000, 4000, 8000, 16000)]
    assert rates[0] < rates[1] < rates[2] > rates[3] > rates[4]
    assert rates[2] == pytest.approx(d_model**-0.5 * warmup**-0.5)
    assert rates[3] == pytest.approx(d_model**-0.5 * 8000**-0.5)


def test_a_cooldown_takes_the_rate_in_a_line_from_the_papers_down_to_zero() -> None:
    d_model, warmup, last, cooldown = 256, 200, 7500, 3000
    paper = [learning_rate(s, d_model, warmup, 0.4) for s in (100, 4500)]
    assert [cooled_rate(s, last, cooldown, d_model, warmup, 0.4) for s in (100, 4500)] == paper, "before: the paper's"
    middle = cooled_rate(6000, last, cooldown, d_model, warmup, 0.4)
    assert middle == pytest.approx(paper[1] * 1501 / 3001)
    end = cooled_rate(last, last, cooldown, d_model, warmup, 0.4)
    assert 0 < end < paper[1] / 1000, "the last step moves, but hardly"
    rates = [cooled_rate(s, last, cooldown, d_model, warmup, 0.4) for s in range(4501, last + 1)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False)), "it falls at every step"
    assert cooled_rate(6000, last, 0, d_model, warmup, 0.4) == learning_rate(6000, d_model, warmup, 0.4)


def test_a_cooled_run_records_its_cooldown_and_moves_less_at_the_end(tmp_path: Path, capsys) -> None:
    """The card's hyperparameters say how many steps cooled down; with the rate near 0 the last step hardly moves
    the weights, which a run of the paper's rate does."""
    from training.train import main as train_main

    write_task(tmp_path / "data", "translate")
    spec = replace(tiny_spec("translate"), max_steps=4, eval_every=1)
    plain = train(spec, tmp_path / "data", tmp_path / "plain", seed=0, threads=1, command="t")
    cooled = train(replace(spec, cooldown=4), tmp_path / "data", tmp_path / "cool", seed=0, threads=1, command="t")
    assert load_checkpoint(cooled).card["hyperparameters"]["training"]["cooldown"] == 4
    assert load_checkpoint(plain).card["hyperparameters"]["training"]["cooldown"] == 0

    def last_move(run: Path) -> float:
        kept = sorted((run / "evals").glob("*.safetensors"))
        a, b = load_file(kept[-2]), load_file(kept[-1])
        return sum(float((b[k] - a[k]).abs().sum()) for k in a)

    assert last_move(cooled) < last_move(plain) / 3
    args = ["--task", "reverse", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "b"), "--max-steps", "2"]
    with pytest.raises(SystemExit) as stopped:
        train_main([*args, "--cooldown", "3"])
    assert stopped.value.code == 2 and "--cooldown 3 is longer than the run (2 steps)" in capsys.readouterr().err


def test_missing_data_names_the_prepare_command(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="python -m training.data prepare"):
        train(tiny_spec("lm"), tmp_path / "nothing", tmp_path / "ckpt", seed=0, threads=1, command="test")


def test_resume_continues_the_schedule_and_the_history(tmp_path: Path) -> None:
    write_task(tmp_path / "data", "reverse")
    first = train(tiny_spec("reverse"), tmp_path / "data", tmp_path / "a", seed=0, threads=1, command="first")
    spec = replace(tiny_spec("reverse"), max_steps=2)
    again = train(spec, tmp_path / "data", tmp_path / "b", seed=0, threads=1, command="second", resume=first)
    card = load_checkpoint(again).card
    assert card["training"]["steps_done"] == 6 and card["training"]["resumed_at"] == 4
    assert [h["step"] for h in card["training"]["history"]] == [2, 4, 6]
    assert card["command"] == "first && second"
    for recorded_before, expected in (({"seconds_total": 1000, "seconds": 400}, 1000), ({"seconds": 500}, 500)):
        first_card = json.loads((first / "card.json").read_text(encoding="utf-8"))
        first_card["training"] = {k: v for k, v in first_card["training"].items() if not k.startswith("seconds")}
        first_card["training"].update(recorded_before)  # a long first run; then one from before seconds_total
        (first / "card.json").write_text(json.dumps(first_card), encoding="utf-8")
        again = train(spec, tmp_path / "data", tmp_path / f"c{expected}", seed=0, threads=1, command="c", resume=first)
        done = load_checkpoint(again).card["training"]
        assert done["seconds_total"] == expected + done["seconds"], "the resumed runs' time carries over"


def test_resume_refuses_data_cut_by_another_tokenizer_and_allows_other_dropout(tmp_path: Path) -> None:
    """Token ids mean nothing under another tokenizer's pieces; dropout belongs to the run, so a finished model
    (dropout 0) may go on training with the task's."""
    write_task(tmp_path / "data", "reverse")
    first = train(tiny_spec("reverse"), tmp_path / "data", tmp_path / "a", seed=0, threads=1, command="first")
    spec = replace(tiny_spec("reverse"), max_steps=2)
    spec = replace(spec, model={**spec.model, "dropout": 0.25})
    again = train(spec, tmp_path / "data", tmp_path / "b", seed=0, threads=1, command="second", resume=first)
    assert load_checkpoint(again).config.dropout == 0.25
    write_task(tmp_path / "other", "translate")
    shutil.copy(tmp_path / "other" / "translate" / "tokenizer.model", tmp_path / "data" / "reverse" / "tokenizer.model")
    with pytest.raises(ValueError, match="another tokenizer.*--tokenizer"):
        train(spec, tmp_path / "data", tmp_path / "c", seed=0, threads=1, command="third", resume=first)


def test_a_resume_with_another_batch_size_draws_its_batches_afresh(tmp_path: Path, capsys) -> None:
    """Skipping the earlier steps' batches replays their draws only at the same batch size; at another it would cost
    a step's batching each for nothing (two minutes of a GPU session for a CPU run's 13,750 steps)."""
    write_task(tmp_path / "data", "translate")
    half = replace(tiny_spec("translate"), max_steps=2)
    first = train(half, tmp_path / "data", tmp_path / "a", seed=0, threads=1, command="a")
    capsys.readouterr()
    train(half, tmp_path / "data", tmp_path / "b", seed=0, threads=1, command="b", resume=first)
    assert "drawn afresh" not in capsys.readouterr().err
    wider = replace(half, batch_tokens=half.batch_tokens * 2)
    again = train(wider, tmp_path / "data", tmp_path / "c", seed=0, threads=1, command="c", resume=first)
    assert "batches drawn afresh" in capsys.readouterr().err
    assert load_checkpoint(again).card["training"]["steps_done"] == 4


@pytest.mark.parametrize("task", ["translate", "lm"])
def test_a_resumed_run_goes_on_as_if_never_stopped(tmp_path: Path, task: str) -> None:
    """Float32 weights, Adam's moments and the place in the data order come back: 2 + 2 steps equal 4 steps."""
    write_task(tmp_path / "data", task)
    whole = train(tiny_spec(task), tmp_path / "data", tmp_path / "whole", seed=0, threads=1, command="w")
    half = replace(tiny_spec(task), max_steps=2)
    first = train(half, tmp_path / "data", tmp_path / "a", seed=0, threads=1, command="a")
    again = train(half, tmp_path / "data", tmp_path / "b", seed=0, threads=1, command="b", resume=first)
    assert load_checkpoint(whole).card["training"]["best_step"] == 4, "the tiny run still learns at step 4"
    a, b = load_file(whole / OPTIMIZER), load_file(again / OPTIMIZER)
    assert a.keys() == b.keys() and any(k.startswith("adam.") for k in a)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6, msg=key)


def test_the_last_validations_average_into_a_checkpoint_as_in_the_paper(tmp_path: Path) -> None:
    """A run keeps its last KEEP_EVALS validations' weights; training.average takes their mean, measures it on the
    validation split and writes a checkpoint that loads, its card saying what was averaged."""
    from training.average import main as average_main
    from training.checkpoint import EVALS, KEEP_EVALS

    write_task(tmp_path / "data", "translate")
    spec = replace(tiny_spec("translate"), max_steps=14, eval_every=2)
    out = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="test")
    kept = sorted((out / EVALS).glob("*.safetensors"))
    assert [p.name for p in kept] == [f"step-{s:06d}.safetensors" for s in (6, 8, 10, 12, 14)] and KEEP_EVALS == 5
    dest = tmp_path / "avg"
    assert average_main([str(out), "--last", "3", "--out", str(dest), "--data", str(tmp_path / "data")]) == 0
    ckpt = load_checkpoint(dest)
    averaged = ckpt.card["training"]["averaged"]
    assert averaged["steps"] == [10, 12, 14] and torch.isfinite(torch.tensor(averaged["valid_loss"]))
    last = [load_file(p) for p in kept[-3:]]
    name = "decoder.layers.0.self_attn.w_q.weight"
    mean = sum(t[name] for t in last) / 3
    torch.testing.assert_close(ckpt.model.state_dict()[name], mean.half().float())
    assert average_main([str(out), "--last", "1", "--out", str(tmp_path / "x"), "--data", str(tmp_path / "data")]) == 2


def test_the_device_is_recorded_and_a_missing_gpu_is_one_line(tmp_path: Path, capsys) -> None:
    from training.train import main as train_main

    write_task(tmp_path / "data", "reverse")
    out = train(tiny_spec("reverse"), tmp_path / "data", tmp_path / "a", seed=0, threads=1, command="t", device="auto")
    expected = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    assert load_checkpoint(out).card["hyperparameters"]["training"]["device"] == expected
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: --device cuda would train")
    args = ["--task", "reverse", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "b"), "--max-steps", "1"]
    assert train_main([*args, "--device", "cuda"]) == 2
    assert "torch sees no GPU" in capsys.readouterr().err


def test_a_gpu_pass_computes_its_heads_step_by_step_and_a_cpu_pass_by_the_fused_kernel(
    tmp_path: Path, monkeypatch
) -> None:
    """cuDNN's fused kernel plans every batch shape; the translator's change every step (scripts/gpu_attention.py)."""
    import training.batches as train_module

    assert train_module.explicit_heads(torch.device("cuda"))
    assert not train_module.explicit_heads(torch.device("cpu"))
    asked = []
    real = train_module.forward
    monkeypatch.setattr(train_module, "explicit_heads", lambda device: (asked.append(device.type), True)[1])
    monkeypatch.setattr(train_module, "forward", lambda *a, **k: (asked.append(k["record"]), real(*a, **k))[1])
    write_task(tmp_path / "data", "reverse")
    train(replace(tiny_spec("reverse"), max_steps=1), tmp_path / "data", tmp_path / "a", seed=0, threads=1, command="t")
    assert asked[:2] == ["cpu", True], "each pass asks for the device it runs on and records when told to"


def test_a_run_keeps_float16_snapshots_that_load_like_the_weights(tmp_path: Path) -> None:
    write_task(tmp_path / "data", "translate")
    spec = replace(tiny_spec("translate"), max_steps=10, eval_every=5)
    out = train(spec, tmp_path / "data", tmp_path / "ckpt", seed=0, threads=1, command="test")
    index = json.loads((out / "snapshots" / "index.json").read_text(encoding="utf-8"))
    assert [e["step"] for e in index["snapshots"]] == snapshot_steps(0, 10) == [0, 1, 3, 10]
    ckpt = load_checkpoint(out)
    for entry in index["snapshots"]:
        path = out / "snapshots" / entry["file"]
        assert path.name == f"step-{entry['step']:06d}.safetensors"
        assert all(t.dtype == torch.float16 for t in load_file(path).values())
        assert torch.isfinite(torch.tensor(entry["valid_loss"]))
        check_recorded(path, ckpt.config)
        assert isinstance(model_from_safetensors(path, ckpt.config), EncoderDecoder)
    last = load_file(out / "snapshots" / index["snapshots"][-1]["file"])
    assert index["snapshots"][0]["valid_loss"] > index["snapshots"][-1]["valid_loss"], "the run learned"
    assert last.keys() == load_file(out / "model.safetensors").keys()


def test_snapshot_steps_follow_the_fractions_of_a_resumed_run() -> None:
    assert snapshot_steps(0, 3000) == [0, 30, 90, 300, 900, 3000]
    assert snapshot_steps(4000, 1000) == [4000, 4010, 4030, 4100, 4300, 5000]


def test_translate_evaluation_scores_both_test_sets_greedy_and_beam(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "data", "translate")
    for ext in ("src", "tgt"):
        (folder / f"test-ding.{ext}").write_text((folder / f"test.{ext}").read_text("utf-8"), "utf-8")
    ckpt = load_checkpoint(train(tiny_spec("translate"), tmp_path / "data", tmp_path / "c", 0, 1, "test"))
    metrics, samples = evaluate(ckpt, tmp_path / "data", limit=2)
    assert list(metrics["test_sets"]) == ["everyday", "ding"]
    for scores in metrics["test_sets"].values():
        assert scores["pairs"] == 2
        for decoding in ("greedy", "beam4"):
            assert {"bleu", "chrf", "loop_rate"} <= set(scores[decoding])
            assert 0 <= scores[decoding]["loop_rate"] <= 1
    assert metrics["bleu"] == metrics["test_sets"]["everyday"]["greedy"]["bleu"], "the headline: everyday, greedy"
    presets = [s["input"] for s in samples if s.get("preset")]
    assert presets == list(PRESETS["translate"]), "every preset's output is on the card, presets first"
    assert {s["input"] for s in samples} == set(presets) | {en for en, _ in TRANSLATE_SAMPLES}
    assert all(s["output"] == generate_text(ckpt, s["input"], 80, 1) for s in samples[:2])
    assert all("output_beam4" in s for s in samples)
    assert all(s["reference"] == dict(TRANSLATE_SAMPLES)[s["input"]] for s in samples if "reference" in s)
    assert sum("reference" in s for s in samples) == len(TRANSLATE_SAMPLES)


def test_a_word_three_times_in_a_row_counts_as_a_loop() -> None:
    assert has_loop("Das Wetter ist heute sehr sehr Sehr.")
    assert not has_loop("Das Wetter ist sehr, sehr schön.")
    assert loop_rate(["a b c", "der der der", "die die", ""]) == 0.25
    hyps, sources = (
        ["Oh nein, nein, nein.", "Er geht wieder wieder wieder.", "Ja."],
        ["Oh no, no, no.", "Again.", "Yes."],
    )
    assert unprompted_loop_rate(hyps, sources) == pytest.approx(1 / 3)  # the source's own repeats are translated
    scores = score_translations(hyps, ["Oh nein, nein, nein.", "Er geht wieder.", "Ja."], sources)
    assert (
        scores["loop_rate"] == pytest.approx(2 / 3, abs=1e-4) and [x["input"] for x in scores["loops"]] == sources[:2]
    )


def test_4_bit_weights_round_trip_within_half_a_step_of_their_groups_scale() -> None:
    from inference.snapshots import GROUP, dequantize, quantize

    torch.manual_seed(0)
    tensors = {"w": torch.randn(6, 4 * GROUP), "b": torch.randn(6), "odd": torch.randn(3, GROUP + 1)}
    packed = quantize(tensors)
    assert packed["w.int4"].dtype == torch.uint8 and packed["w.int4"].shape == (6, 2 * GROUP)
    assert packed["w.int4_scale"].shape == (6, 4) and packed["b"].dtype == packed["odd"].dtype == torch.float16
    back = dequantize(packed)
    assert back.keys() == tensors.keys()
    step = packed["w.int4_scale"].float().repeat_interleave(GROUP, dim=1)
    assert bool(((back["w"] - tensors["w"]).abs() <= step / 2 + 1e-3).all())
    exact = torch.arange(-7, 8).float().repeat(6, 3)[:, : 2 * GROUP] * 0.5  # numbers already on the grid
    assert torch.equal(dequantize(quantize({"e": exact}))["e"], exact)


def test_a_lineages_snapshots_ship_in_4_bits_with_the_loss_measured_on_them(tmp_path: Path, capsys) -> None:
    """training.snapshots copies chosen steps from the run folders into the checkpoint, 4-bit, the checkpoint's
    own weights as the last step; the page's loader reads them back; bad requests are one-line errors."""
    from inference.snapshots import list_snapshots, load_snapshot
    from training.snapshots import main as snapshots_main

    write_task(tmp_path / "data", "translate")
    spec = replace(tiny_spec("translate"), max_steps=10, eval_every=5)
    spec = replace(spec, model={**spec.model, "d_model": 32, "d_ff": 64})  # rows of 32: one group each
    run = train(spec, tmp_path / "data", tmp_path / "run", seed=0, threads=1, command="test")
    shipped = tmp_path / "shipped"
    shutil.copytree(run, shipped, ignore=shutil.ignore_patterns("snapshots", "evals", OPTIMIZER))
    args = [str(shipped), "--from", str(tmp_path / "nothing"), str(run), "--data", str(tmp_path / "data")]
    assert snapshots_main([*args, "--steps", "3", "0"]) == 0
    listed = list_snapshots(shipped)
    best = load_checkpoint(shipped).card["training"]["best_step"]  # the shipped weights: the best validation's
    assert [s.step for s in listed] == [0, 3, best] and best in (5, 10) and listed[-1].file is None
    index = json.loads((shipped / "snapshots" / "index.json").read_text(encoding="utf-8"))
    for entry in index["snapshots"][:2]:
        kept = run / "snapshots" / entry["file"]
        assert (shipped / "snapshots" / entry["file"]).stat().st_size < kept.stat().st_size / 2
        assert entry["valid_loss"] == pytest.approx(entry["valid_loss_float16"], abs=0.05)
    ckpt = load_checkpoint(shipped)
    assert load_snapshot(ckpt, best).model is ckpt.model
    early = load_snapshot(ckpt, 0).model.state_dict()
    kept = load_file(run / "snapshots" / "step-000000.safetensors")
    name = "encoder.layers.0.self_attn.w_q.weight"
    assert not torch.equal(early[name], kept[name].float()), "4 bits, not the float16 copy"
    torch.testing.assert_close(early[name], kept[name].float(), atol=0.05, rtol=0)
    # a later model of the same line ships the earlier one's 4-bit steps as they are, their run's loss beside them
    later = tmp_path / "later"
    shutil.copytree(shipped, later, ignore=shutil.ignore_patterns("snapshots"))
    assert snapshots_main([str(later), "--from", str(shipped), "--data", str(tmp_path / "data"), "--steps", "0"]) == 0
    again = json.loads((later / "snapshots" / "index.json").read_text(encoding="utf-8"))["snapshots"][0]
    assert (later / "snapshots" / again["file"]).read_bytes() == (shipped / "snapshots" / again["file"]).read_bytes()
    assert again["valid_loss_float16"] == index["snapshots"][0]["valid_loss_float16"]
    capsys.readouterr()
    assert snapshots_main([*args, "--steps", "2"]) == 2
    assert "no snapshot of step 2 in" in capsys.readouterr().err
    assert snapshots_main([*args, "--steps", str(best)]) == 2
    assert f"its own weights are step {best}; give --steps before it" in capsys.readouterr().err
    assert [s.step for s in list_snapshots(shipped)] == [0, 3, best], "a refused request leaves the last one"
    damaged = shipped / "snapshots" / "step-000003.safetensors"
    unscaled = {k: v for k, v in load_file(damaged).items() if not k.endswith(".int4_scale")}
    save_file(unscaled, damaged, metadata=read_metadata(damaged))  # the scales gone: it cannot be read
    with pytest.raises(CheckpointError, match="its 4-bit weights cannot be read"):
        load_snapshot(ckpt, 3)


def test_a_language_model_is_scored_on_its_validation_lines_to_choose_a_checkpoint(tmp_path: Path, capsys) -> None:
    """--split valid scores the valid split line by line, as the card's test figures are, without the test split."""
    from training.evaluate import main as evaluate_main

    folder = write_task(tmp_path / "data", "lm")
    (folder / "valid.txt").write_text("\n".join(LINES[:2]) + "\n", encoding="utf-8")  # 2 lines; test has 12
    ckpt = load_checkpoint(train(tiny_spec("lm"), tmp_path / "data", tmp_path / "c", 0, 1, "test"))
    valid, _ = evaluate(ckpt, tmp_path / "data", split="valid")
    test, _ = evaluate(ckpt, tmp_path / "data")
    assert (valid["split"], valid["test_lines"], test["split"], test["test_lines"]) == ("valid", 2, "test", 12)
    assert valid["command"].endswith("--split valid") and valid["perplexity"] != test["perplexity"]
    args = [str(ckpt.path), "--data", str(tmp_path / "data"), "--split", "valid"]
    with pytest.raises(SystemExit) as stopped:
        evaluate_main([*args, "--write-card"])
    assert stopped.value.code == 2 and "--write-card stores the test split's figures" in capsys.readouterr().err
    write_task(tmp_path / "data", "translate")
    translator = load_checkpoint(train(tiny_spec("translate"), tmp_path / "data", tmp_path / "t", 0, 1, "test"))
    assert evaluate_main([str(translator.path), "--data", str(tmp_path / "data"), "--split", "valid"]) == 2
    assert "--split valid is for language models" in capsys.readouterr().err


def test_the_finished_card_names_the_step_whose_weights_were_saved_even_when_rounded_losses_tie(tmp_path) -> None:
    from training.checkpoint import finish_card

    history = [
        {"step": 5250, "valid_loss": 4.322},
        {"step": 6000, "valid_loss": 4.33},
        {"step": 7500, "valid_loss": 4.322},
    ]
    (tmp_path / "card.json").write_text(json.dumps({"training": {"best_step": 7500, "resumed_at": 4500}}), "utf-8")
    finish_card(tmp_path, history, 7500, 1000, 10.0)
    done = json.loads((tmp_path / "card.json").read_text(encoding="utf-8"))["training"]
    assert (done["best_step"], done["steps_done"], done["finished"]) == (7500, 7500, True)

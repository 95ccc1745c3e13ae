"""`python -m atlas experiment`: seed 003's Table 1 at this machine's scale, trained and evaluated by one command.

Every row of inference.experiment.ROWS is the report's centre-word predictor (model.components.centre_word): the
four context words of a 5-gram, embedded with four learned positions, through encoder layers without a mask,
the four outputs summed, scored against every word. Each row trains with the same settings and the same number of
steps from the same seed, on the prepared fivegram task (`python -m training.data prepare fivegram`), one thread,
and is saved as a checkpoint in 4 bits (inference.quantized) whose card holds its accuracy and loss on the
held-out test 5-grams measured on the weights as shipped (and in float32, for comparison), its training time, and
its pruning curve: heads removed one at a time, least important first, by
the ranking the app's Ablation page computes (each head switched off alone, the KL divergence of the prediction,
here averaged over held-out validation 5-grams), the test accuracy after each removal (for the rows of
inference.experiment.PRUNED: 1 layer × 16 heads and 3 layers × 8 heads).

Rows whose checkpoint already holds a finished card of the same settings are kept (the table resumes row by row);
`--force` trains them again.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from inference.catalog import checkpoints_dir
from inference.checkpoint import CARD, load_checkpoint, save_checkpoint
from inference.experiment import PRUNED, ROWS, Row, heads_needed, one_position_share, pruning, table
from inference.text import word_id
from inference.tokenizer import Tokenizer
from model.attention import Ablation
from model.config import ModelConfig, Published
from model.factory import build_model
from model.forward import forward
from model.names import sublayer_layer, sublayer_name
from model.transformer import NONE, Ablations, Model
from training.data.fivegram import CONTEXT


@dataclass(frozen=True)
class Settings:
    """What every row of the table shares: the width, the optimiser and the budget of steps."""

    d_model: int = 64
    d_ff: int = 256
    # no dropout, where the report's layers have 0.1: a run here sees under half of the training 5-grams once, so
    # there is nothing to over-fit, and dropout's random draws take a fifth of each step's time on one core
    dropout: float = 0.0
    batch: int = 512  # 5-grams per step
    steps: int = 3500
    warmup: int = 200  # the rate rises linearly to `peak_rate`, then falls linearly to 0 at the last step
    peak_rate: float = 2e-3  # Adam, betas (0.9, 0.98) as the paper's
    eval_every: int = 1000  # validation loss and accuracy on `valid_sample` 5-grams, into the card's history
    valid_sample: int = 8192
    seed: int = 0


def read_grams(path: Path, tok: Tokenizer) -> np.ndarray:
    """(N, 5) int64: each line's five words as ids (one piece per word; `<unk>` for a word outside the list)."""
    ids: dict[str, int] = {}
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if len(words) != 2 * CONTEXT + 1:
                raise ValueError(f"{path}: expected {2 * CONTEXT + 1} words a line, got {line!r}")
            rows.append([ids[w] if w in ids else ids.setdefault(w, word_id(tok, w)) for w in words])
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2 * CONTEXT + 1)


def split(grams: np.ndarray | Tensor) -> tuple[Tensor, Tensor]:
    """The context (N, 4) and the centre word (N,) of 5-grams (N, 5)."""
    grams = torch.as_tensor(grams)
    return torch.cat([grams[:, :CONTEXT], grams[:, CONTEXT + 1 :]], dim=1), grams[:, CONTEXT]


def config_for(row: Row, tok: Tokenizer, settings: Settings) -> ModelConfig:
    """The report's model at our width: post-norm layers, learned positions for the four context words,
    embeddings not scaled by √d_model (its nn.Embedding), separate input and output embeddings unless the row
    shares them, the outputs summed."""
    return ModelConfig(
        kind="encoder-only",
        vocab_size=tok.vocab_size,
        d_model=settings.d_model,
        n_heads=row.heads,
        n_encoder_layers=row.layers,
        n_decoder_layers=0,
        d_ff=settings.d_ff,
        dropout=settings.dropout,
        max_len=2 * CONTEXT,
        positional="learned",
        norm="post",
        tie_embeddings=row.shared_embeddings,
        pad_id=tok.pad_id,
        unk_id=tok.unk_id,
        bos_id=tok.bos_id,
        eos_id=tok.eos_id,
        published=Published(embed_scale=False, sum_outputs=True, shared_layers=row.shared_layers),
    )


def rate(step: int, settings: Settings) -> float:
    """Linear warm-up to the peak, then a straight line down to 0 after the last step."""
    if step <= settings.warmup:
        return settings.peak_rate * step / settings.warmup
    return settings.peak_rate * (settings.steps - step + 1) / (settings.steps - settings.warmup + 1)


@torch.inference_mode()
def loss_and_accuracy(
    model: Model, grams: np.ndarray, ablate: Ablations = NONE, batch: int = 8192
) -> tuple[float, float]:
    """Mean cross-entropy (nats) and top-1 accuracy of the centre word over `grams`."""
    model.eval()
    total, right = 0.0, 0
    for i in range(0, len(grams), batch):
        context, centre = split(grams[i : i + batch])
        logits = forward(model, context, record=False, ablate=ablate)[0][:, 0]
        total += float(F.cross_entropy(logits, centre, reduction="sum"))
        right += int((logits.argmax(dim=-1) == centre).sum())
    return total / len(grams), right / len(grams)


@torch.inference_mode()
def head_ranking(model: Model, grams: np.ndarray, batch: int = 8192) -> list[tuple[str, int, float]]:
    """Each head switched off alone (zeroed, as the Ablation page does): (sub-layer, head, KL(intact ‖ ablated))
    averaged over `grams`, least important first."""
    model.eval()
    context, _ = split(grams)
    intact = torch.log_softmax(forward(model, context, record=False)[0][:, 0], dim=-1)
    sublayers = [sublayer_name("encoder", i, "self_attn") for i in range(model.config.n_encoder_layers)]
    table = []
    for sublayer in sublayers:
        for head in range(model.config.n_heads):
            cut_logits = forward(model, context, record=False, ablate={sublayer: Ablation((head,))})[0][:, 0]
            cut = torch.log_softmax(cut_logits, dim=-1)
            kl = float((intact.exp() * (intact - cut)).sum(dim=-1).mean())
            table.append((sublayer, head, kl))
    return sorted(table, key=lambda row: row[2])


@torch.inference_mode()
def pruning_curve(model: Model, order: list[tuple[str, int, float]], grams: np.ndarray) -> list[dict]:
    """Test loss and accuracy with the first 0, 1, … len(order) heads of `order` switched off together."""
    points = []
    for removed in range(len(order) + 1):
        heads: dict[str, list[int]] = {}
        for sublayer, head, _ in order[:removed]:
            heads.setdefault(sublayer, []).append(head)
        ablate = {sublayer: Ablation(tuple(sorted(hs))) for sublayer, hs in heads.items()}
        loss, accuracy = loss_and_accuracy(model, grams, ablate)
        points.append({"removed": removed, "accuracy": round(accuracy, 4), "loss": round(loss, 4)})
    return points


@torch.inference_mode()
def mean_attention(model: Model, grams: np.ndarray) -> list:
    """Every head's attention weights averaged over `grams`: [layer][head][query][key], 3 decimals."""
    model.eval()
    context, _ = split(grams)
    trace = forward(model, context)[1]
    return [np.round(rec.weights.mean(dim=0).numpy(), 3).tolist() for rec in trace.attention.values()]


def train_row(row: Row, data: Path, out: Path, settings: Settings, threads: int, command: str) -> dict:
    """Train one row, save its checkpoint under `out`, and return its card."""
    torch.manual_seed(settings.seed)
    torch.set_num_threads(threads)
    tok_bytes = (data / "tokenizer.model").read_bytes()
    tok = Tokenizer(tok_bytes, str(data / "tokenizer.model"))
    grams = {s: _cached_grams(data, s, tok) for s in ("train", "valid", "test")}
    config = config_for(row, tok, settings)
    model = build_model(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    order = np.random.default_rng(settings.seed).permutation(len(grams["train"]))
    valid = grams["valid"][: settings.valid_sample]
    history, started, seen = [], time.perf_counter(), 0
    for step in range(1, settings.steps + 1):
        take = order[(np.arange(settings.batch) + seen) % len(order)]
        seen += settings.batch
        context, centre = split(grams["train"][take])
        for group in optimizer.param_groups:
            group["lr"] = rate(step, settings)
        logits = forward(model, context, record=False)[0][:, 0]
        loss = F.cross_entropy(logits, centre)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % settings.eval_every == 0 or step == settings.steps:
            v_loss, v_acc = loss_and_accuracy(model, valid)
            model.train()
            history.append({"step": step, "train_loss": round(loss.item(), 4), "valid_loss": round(v_loss, 4),
                            "valid_accuracy": round(v_acc, 4)})  # fmt: skip
            print(f"{row.name} step {step}: valid loss {v_loss:.3f}, accuracy {v_acc:.4f}", file=sys.stderr)
    seconds = time.perf_counter() - started
    model.eval()
    loss32, acc32 = loss_and_accuracy(model, grams["test"])
    folder = out / row.name
    card = {
        "task": "Seed 003's 5-gram task: the centre word from the two words on each side of it "
        f"({row.architecture.lower()}, {row.layers} layer{'s' * (row.layers > 1)} × {row.heads} "
        f"head{'s' * (row.heads > 1)}).",
        "name": row.name,
        "data": json.loads((data / "sources.json").read_text(encoding="utf-8")),
        "hyperparameters": {"model": config.to_dict(), "training": {**asdict(settings), "threads": threads}},
        "metrics": {"status": "measured below"},
        "training": {"history": history, "seconds": round(seconds, 1), "examples_seen": seen, "finished": True},
        "predictions": "The four outputs summed and scored against every word: the model's guess for the blank.",
        "command": command,
        "tokenizer_sha256": tok.sha256,
    }
    save_checkpoint(folder, model, tok_bytes, card, bits=4)
    shipped = load_checkpoint(folder).model  # what the app will load: the 4-bit weights
    loss4, acc4 = loss_and_accuracy(shipped, grams["test"])
    card["metrics"] = {
        "split": "test",
        "examples": len(grams["test"]),
        "accuracy": round(acc4, 4),
        "loss": round(loss4, 4),
        "weights": "4 bits as shipped (inference.quantized); float32 before saving beside it",
        "accuracy_float32": round(acc32, 4),
        "loss_float32": round(loss32, 4),
        "command": command,
    }
    card["experiment"] = {
        "row": asdict(row),
        "architecture": row.architecture,
        "parameters": config.n_parameters,
        "seconds": round(seconds, 1),
        "seed_row": asdict(seed) if (seed := row.seed_row()) else None,
        "mean_attention": mean_attention(shipped, grams["test"]),
        "mean_attention_of": f"the {len(grams['test']):,} test 5-grams: each head's weights averaged over them",
    }
    if row.name in PRUNED:  # each point is a pass over the test split: 25 (3 × 8) or 17 (1 × 16) of them
        ranking = head_ranking(shipped, valid)
        card["experiment"]["pruning"] = {
            "order": [[sublayer, head, round(kl, 5)] for sublayer, head, kl in ranking],
            "ranked_on": f"the first {len(valid):,} validation 5-grams: each head zeroed alone, KL(intact ‖ ablated)",
            "measured_on": "the test 5-grams, on the weights as shipped",
            "curve": pruning_curve(shipped, ranking, grams["test"]),
        }
    (folder / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{row.name}: test accuracy {acc4:.4f} (float32 {acc32:.4f}), {seconds:.0f} s", file=sys.stderr)
    return card


_GRAMS: dict[tuple[str, str], np.ndarray] = {}


def _cached_grams(data: Path, split_name: str, tok: Tokenizer) -> np.ndarray:
    """A split's 5-grams as ids, read once per process (every row trains on the same arrays)."""
    key = (str(data.resolve()), split_name)
    if key not in _GRAMS:
        _GRAMS[key] = read_grams(data / f"{split_name}.txt", tok)
    return _GRAMS[key]


def finished(folder: Path, settings: Settings, threads: int) -> bool:
    """Whether `folder` holds this row trained with exactly these settings."""
    try:
        card = json.loads((folder / CARD).read_text(encoding="utf-8"))
        return card["training"]["finished"] and card["hyperparameters"]["training"] == {
            **asdict(settings),
            "threads": threads,
        }
    except (OSError, ValueError, KeyError, TypeError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m atlas experiment", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/fivegram"), help="prepared fivegram data")
    parser.add_argument("--out", type=Path, help="where the checkpoints go (default: the app's checkpoints folder)")
    parser.add_argument("--rows", nargs="+", choices=[r.name for r in ROWS], help="train these rows only")
    parser.add_argument("--steps", type=int, default=Settings.steps, help=f"steps per row (default {Settings.steps})")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="train rows again that are already done")
    parser.add_argument("--table", action="store_true", help="print the table of the trained rows' cards, train none")
    args = parser.parse_args(argv)
    out = args.out or checkpoints_dir()
    if args.table:
        print(markdown(out))
        return 0
    if not (args.data / "tokenizer.model").is_file():
        print(f"error: {args.data}: no prepared data; run `python -m training.data prepare fivegram`", file=sys.stderr)
        return 2
    settings = Settings(steps=args.steps, eval_every=min(Settings.eval_every, args.steps))
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m atlas experiment " + " ".join(shlex.quote(a) for a in given)
    rows = [r for r in ROWS if not args.rows or r.name in args.rows]
    started = time.perf_counter()
    for row in rows:
        if not args.force and finished(out / row.name, settings, args.threads):
            print(f"{row.name}: done already (--force trains it again)", file=sys.stderr)
            continue
        train_row(row, args.data, out, settings, args.threads, command.strip())
    print(f"{len(rows)} rows in {time.perf_counter() - started:.0f} s (load: {os.getloadavg()[0]:.2f})")
    print(markdown(out))
    return 0


def markdown(out: Path) -> str:
    """The table of the rows trained under `out`, from their cards, as docs/checkpoints.md shows it."""
    cards = {}
    for row in ROWS:
        try:
            cards[row.name] = json.loads((out / row.name / CARD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    lines = [
        "| model | layers × heads | parameters | training (s) | accuracy | loss | seed 003 accuracy | seed 003 loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = table(cards)
    for r in rows:
        shape = f"{r['layers']}{' shared' if r['shared_layers'] else ''} × {r['heads']}"
        shape += " (in/out embeddings shared)" if r["shared_embeddings"] else ""
        seed = "—" if r["seed_accuracy"] is None else f"{r['seed_accuracy']:.4f}"
        seed_loss = "—" if r["seed_loss"] is None else f"{r['seed_loss']:.2f}"
        lines.append(
            f"| `{r['name']}` | {shape} | {r['parameters']:,} | {r['seconds']:.0f} | **{r['accuracy']:.4f}** | "
            f"{r['loss']:.3f} | {seed} | {seed_loss} |"
        )
    total = sum(r["seconds"] for r in rows)
    lines.append("")
    lines.append(f"Training time of the {len(cards)} rows: {total:.0f} s ({total / 60:.1f} minutes) of one thread.")
    for name in PRUNED:
        record = pruning(cards.get(name, {}))
        if record:
            curve = record["curve"]
            full, heads = curve[0]["accuracy"], len(curve) - 1
            kept = heads_needed(curve)
            lines.append(
                f"{name}: accuracy {full:.4f} with all {heads} heads, {curve[heads // 2]['accuracy']:.4f} with half "
                f"removed, {curve[-1]['accuracy']:.4f} with none; 95 % of it kept by its {kept} most important heads."
            )
            share = one_position_share(cards[name]["experiment"]["mean_attention"])
            order = [
                (sublayer_layer(sublayer), head) for sublayer, head, _ in cards[name]["experiment"]["pruning"]["order"]
            ]
            named = [f"L{layer + 1} H{head + 1} {share[layer][head]:.2f}" for layer, head in reversed(order)]
            lines.append(
                f"  weight on one position, most important heads first: {', '.join(named[:4])}; the least important: "
                f"{', '.join(named[-4:])}."
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

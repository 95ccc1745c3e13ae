"""Seed 003's experiment: the rows of its Table 1 ("Assignment 2. Language models", a student report), the models
of our own table that stand for them (trained by `python -m atlas experiment`, training.experiment), and the
table the Experiment page draws from their cards. Plain data: no model is loaded here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SeedRow:
    """One row of the report's Table 1, as printed: model width, Transformer layers, heads (None: the single-head
    SelfAttention sub-layer), parameters, time (the report gives no unit), accuracy and loss on its test 5-grams."""

    architecture: str
    dim: int
    layers: int
    heads: int | None
    parameters: int
    time: float
    accuracy: float
    loss: float
    shared_layers: bool = False
    shared_embeddings: bool = False
    note: str = ""


SEED_TABLE: tuple[SeedRow, ...] = (
    SeedRow("Self-attention", 256, 1, None, 51_729_152, 3.81, 0.33133, 3.42),
    SeedRow("Self-attention", 256, 2, None, 55_404_800, 4.17, 0.32783, 3.40, shared_layers=True),
    SeedRow("Self-attention", 256, 3, None, 55_404_800, 4.59, 0.34100, 3.37),
    SeedRow("Self-attention + MLP", 256, 3, None, 109_759_488, 8.78, 0.04100, 7.39, note="not run here: it failed"),
    SeedRow("Multi-head", 256, 1, 8, 55_404_800, 3.86, 0.33516, 3.39),
    SeedRow("Multi-head", 256, 1, 16, 55_404_800, 3.94, 0.33783, 3.34),
    SeedRow("Multi-head", 256, 2, 8, 55_404_800, 4.32, 0.33766, 3.36),
    SeedRow("Multi-head", 256, 2, 16, 55_404_800, 4.50, 0.33783, 3.39),
    SeedRow("Multi-head", 256, 3, 8, 55_404_800, 4.79, 0.34250, 3.35),
    SeedRow("Multi-head", 512, 2, 8, 109_759_488, 7.58, 0.33466, 3.34, note="not run here: twice as wide"),
    SeedRow("Multi-head", 576, 3, 12, 123_593_920, 7.80, 0.34050, 3.30, note="not run here: wider"),
    SeedRow("Multi-head", 256, 3, 8, 52_783_360, 4.63, 0.33100, 3.50, shared_embeddings=True),
)
SEED_BEST = 0.34250  # the report's best accuracy: 3 layers × 8 heads


@dataclass(frozen=True)
class Row:
    """One model of our table: its checkpoint's name, layers, heads (1: the report's single-head self-attention),
    and whether its layers or its input and output embeddings are shared."""

    name: str
    layers: int
    heads: int
    shared_layers: bool = False
    shared_embeddings: bool = False

    @property
    def architecture(self) -> str:
        kind = "Self-attention" if self.heads == 1 else "Multi-head"
        extra = (
            " (layers shared)" if self.shared_layers else " (input/output embeddings shared)" * self.shared_embeddings
        )
        return kind + extra

    def seed_row(self) -> SeedRow | None:
        """The report's row for the same architecture at its own width (256), or None (it ran no such model)."""
        heads = None if self.heads == 1 else self.heads
        for row in SEED_TABLE:
            same = (row.layers, row.heads, row.shared_layers, row.shared_embeddings) == (
                self.layers, heads, self.shared_layers, self.shared_embeddings,
            )  # fmt: skip
            if same and row.dim == 256 and not row.note:
                return row
        return None


ROWS: tuple[Row, ...] = (
    Row("fivegram-1L-1H", 1, 1),
    Row("fivegram-2Ls-1H", 2, 1, shared_layers=True),
    Row("fivegram-3L-1H", 3, 1),
    Row("fivegram-1L-8H", 1, 8),
    Row("fivegram-1L-16H", 1, 16),
    Row("fivegram-2L-8H", 2, 8),
    Row("fivegram-2L-16H", 2, 16),
    Row("fivegram-3L-8H", 3, 8),
    Row("fivegram-3L-16H", 3, 16),
    Row("fivegram-3L-8H-tied", 3, 8, shared_embeddings=True),
)
PRUNED = ("fivegram-1L-16H", "fivegram-3L-8H")  # the two pruning curves shown; every multi-head row has one
PREFIX = "fivegram-"


def is_experiment_model(card: dict[str, Any]) -> bool:
    """Whether a checkpoint's card is one of this table's models (its card carries an "experiment" section)."""
    return isinstance(card.get("experiment"), dict)


def table(cards: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Our table from the cards of its trained models (name → card), in ROWS' order; a row not trained yet is left
    out. Each: the row's fields, its short label, parameters, training seconds, test accuracy and loss (4-bit
    weights as shipped), and the report's accuracy and loss for the same architecture (None: it ran none)."""
    found = []
    for row in ROWS:
        card = cards.get(row.name)
        if card is None or not is_experiment_model(card):
            continue
        metrics, experiment = card.get("metrics") or {}, card["experiment"]
        seed = row.seed_row()
        found.append(
            {
                "name": row.name,
                "short": row.name.removeprefix(PREFIX),
                "architecture": row.architecture,
                "layers": row.layers,
                "heads": row.heads,
                "shared_layers": row.shared_layers,
                "shared_embeddings": row.shared_embeddings,
                "parameters": int(experiment.get("parameters", 0)),
                "seconds": float(experiment.get("seconds", 0.0)),
                "accuracy": float(metrics.get("accuracy", float("nan"))),
                "loss": float(metrics.get("loss", float("nan"))),
                "seed_accuracy": seed.accuracy if seed else None,
                "seed_loss": seed.loss if seed else None,
            }
        )
    return found


def seed_table() -> list[dict[str, Any]]:
    """The report's Table 1 as dicts (heads 1 for its single-head self-attention), in its order."""
    return [
        {
            "architecture": r.architecture,
            "dim": r.dim,
            "layers": r.layers,
            "heads": r.heads or 1,
            "shared_layers": r.shared_layers,
            "shared_embeddings": r.shared_embeddings,
            "parameters": r.parameters,
            "time": r.time,
            "accuracy": r.accuracy,
            "loss": r.loss,
            "note": r.note,
        }
        for r in SEED_TABLE
    ]


def pruning(card: dict[str, Any]) -> dict[str, Any] | None:
    """A model's pruning record from its card (order, curve, what each was measured on), or None."""
    found = (card.get("experiment") or {}).get("pruning")
    return found if isinstance(found, dict) and found.get("curve") else None


def one_position_share(mean_attention: Any) -> list[list[float]]:
    """Per head [layer][head]: the largest share of its weight on one key position, averaged over the queries (1:
    every word reads the same one position, a positional head; 0.25: weight spread evenly over the four words)."""
    return [
        [max(sum(q[k] for q in head) / len(head) for k in range(len(head[0]))) for head in layer]
        for layer in mean_attention
    ]


def heads_needed(curve: list[dict[str, Any]], share: float = 0.95) -> int:
    """From a pruning curve: the fewest heads kept (the most important ones) that still give `share` of the intact
    model's accuracy."""
    total, full = len(curve) - 1, curve[0]["accuracy"]
    return min(total - p["removed"] for p in curve if p["accuracy"] >= share * full)

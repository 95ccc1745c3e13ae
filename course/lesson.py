"""The Lesson's steps: their order, their course text and the model each step's live view needs.

Each step's text is `course/steps/<slug>.md`: a `# Title` line, then the paragraph in markdown, ours, checked
against the seed documents and "Attention Is All You Need" (Vaswani et al., 2017; sections cited), the induction
step against "In-context Learning and Induction Heads" (Olsson et al., 2022). A paragraph's lines are joined with
spaces, as markdown reads them, so a file may wrap its lines anywhere. The pages draw the steps (views/lesson.py);
the model work they show is analysis.lesson's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from model.config import ModelConfig

TEXTS = Path(__file__).resolve().parent / "steps"

ANY, ENC_DEC, LM, SINUSOIDAL = "any", "encoder-decoder", "decoder-only", "sinusoidal"
DECODER, LENGTHS = "decoder", "lengths"
NEEDS = {
    ANY: "any model",
    ENC_DEC: "an encoder-decoder (a model with an encoder and cross-attention)",
    LM: "a decoder-only language model",
    SINUSOIDAL: "a model with sinusoidal positions",
    DECODER: "a model with a decoder (a language model or an encoder-decoder)",
    LENGTHS: "a model that reads texts of any length (a centre-word model reads four words, always)",
}
SHORTEST = 8  # LENGTHS: at least this many positions (the cost step times 8 lengths up to max_len)


@dataclass(frozen=True)
class Step:
    """One step of the lesson: its URL slug, title, paragraph (markdown) and the model kind it needs."""

    slug: str
    title: str
    text: str
    needs: str = ANY

    def fits(self, config: ModelConfig) -> bool:
        """Whether a model of `config` can show this step: asked of what the model has, not of its kind."""
        fitting = {
            ANY: True,
            ENC_DEC: config.has_cross_attention,
            LM: not config.has_encoder,
            SINUSOIDAL: config.positional == "sinusoidal",
            DECODER: config.has_decoder,
            LENGTHS: not config.switches.sum_outputs and config.max_len >= SHORTEST,
        }
        return fitting[self.needs]


def read_step(slug: str, needs: str = ANY) -> Step:
    """The step `slug` with its title and paragraph from `course/steps/<slug>.md`."""
    path = TEXTS / f"{slug}.md"
    heading, _, body = path.read_text(encoding="utf-8").partition("\n")
    if not heading.startswith("# ") or not body.strip():
        raise ValueError(f"{path}: expected a '# Title' line, then the step's paragraph")
    paragraphs = [" ".join(line.strip() for line in p.splitlines()) for p in body.strip().split("\n\n")]
    return Step(slug, heading[2:].strip(), "\n\n".join(paragraphs), needs)


STEPS: tuple[Step, ...] = (
    read_step("embeddings"),
    read_step("positional-encoding", SINUSOIDAL),
    read_step("padding-mask", LENGTHS),
    read_step("no-peek-mask", DECODER),
    read_step("scaled-dot-product"),
    read_step("multi-head"),
    read_step("feed-forward"),
    read_step("residual-layernorm"),
    read_step("cross-attention", ENC_DEC),
    read_step("next-token", LM),
    read_step("kv-cache", DECODER),
    read_step("quadratic-cost", LENGTHS),
    read_step("induction-heads", LM),
    read_step("induction-circuit", LM),
)
SLUGS: tuple[str, ...] = tuple(s.slug for s in STEPS)

# The lesson's sentence for each preset family (inference.catalog.preset_family).
SENTENCES = {
    "reverse": "pineapple",  # letters of its alphabet only (a to p, no space): any other character is <unk> to it
    "translate": "The cat sat on the mat.",
    "lm": "Once upon a time, there was a little girl who",  # lm-english writes on after it (the cache step)
    "induction": "the old man went down to the river and the old man went down to the",  # words it knows, repeated
    "fivegram": "it was the ___ day of the week",  # seed 003's models: the words around a blank, of their vocabulary
}


def step_index(slug: object) -> int | None:
    """The 0-based index of the step with this slug, or None for anything else."""
    return SLUGS.index(slug) if isinstance(slug, str) and slug in SLUGS else None

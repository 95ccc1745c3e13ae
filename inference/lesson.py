"""The Lesson: the twelve steps of the seed curriculum as data, and the model work only the lesson needs.

Each step's paragraph is ours, checked against the seed documents and "Attention Is All You Need" (Vaswani et al.,
2017; sections cited). The pages draw the steps; what needs the model (the vectors on the way through the first
stack, the measured cost of attention) is computed here and comes out as numpy, like `inference.analyze`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from inference.checkpoint import Checkpoint
from inference.decoding import generate
from inference.text import clean_text, encode_first_stack, encode_prefix, encode_source
from model.attention import attention_mask, padding_mask
from model.config import ModelConfig

ANY, ENC_DEC, LM, SINUSOIDAL = "any", "encoder-decoder", "decoder-only", "sinusoidal"
OURS = "ours"  # the layer walk (walk) follows our 2017 layers: ReLU feed-forward, LayerNorm, added positions
NEEDS = {
    ANY: "any model",
    ENC_DEC: "an encoder-decoder (a model with an encoder and cross-attention)",
    LM: "a decoder-only language model",
    SINUSOIDAL: "a model with sinusoidal positions",
    OURS: "one of our own 2017-style models (ReLU feed-forward, LayerNorm, positions added to the embeddings)",
}


@dataclass(frozen=True)
class Step:
    """One step of the lesson: its URL slug, title, paragraph (markdown) and the model kind it needs."""

    slug: str
    title: str
    text: str
    needs: str = ANY

    def fits(self, config: ModelConfig) -> bool:
        """Whether a model of `config` can show this step."""
        if self.needs == SINUSOIDAL:
            return config.positional == "sinusoidal"
        if self.needs == OURS:  # a published BERT or Llama has GELU/SwiGLU, RMSNorm or rotary positions
            classic = config.activation == "relu" and config.norm_type == "layer" and config.positional != "rotary"
            return classic and config.kind in (ENC_DEC, LM)
        return self.needs == ANY or config.kind == self.needs


STEPS: tuple[Step, ...] = (
    Step(
        "embeddings",
        "Embeddings",
        "The model never sees letters. A tokenizer cuts the text into pieces from a fixed vocabulary (whole words, "
        "parts of words, single characters or bytes; `▁` marks a piece that starts a word), and each piece's id "
        "picks one row of a learned table: a vector of d_model numbers. As in the paper (section 3.4), the row is "
        "multiplied by √d_model, and (in the paper and in our models) the output layer reuses the same table to score "
        "every possible next token. Pieces used in similar ways tend to end up with similar rows, because training "
        "moves them alike.",
        needs=OURS,
    ),
    Step(
        "positional-encoding",
        "Sinusoidal positional encoding",
        "Without positions, attention ignores order: shuffle the input tokens and each one computes the same output, "
        "only in another place. So a vector that depends only on the position is added to each token's embedding. "
        "The paper's is fixed, not trained (section 3.5): PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) and "
        "PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)). Each pair of dimensions is a sine and a cosine of one "
        "frequency; the wavelengths grow from 2π to 10000·2π, so the first dimensions change quickly from one "
        "position to the next and the last ones slowly, like the hands of a clock. For any offset k, PE(pos + k) is "
        "PE(pos) with each sine–cosine pair turned by a fixed angle, a linear function of PE(pos), which the authors "
        "hoped makes relative positions easy to attend to. A learned table, one trained vector per position, worked "
        "about as well in the paper; the sinusoid may extend to lengths never seen in training.",
        SINUSOIDAL,
    ),
    Step(
        "padding-mask",
        "Padding mask",
        "Sentences in a batch have different lengths, but a tensor has one: the short ones are filled up with a "
        "pad token. The pads must not change the result, so the padding mask is True at real tokens and False at "
        "pads, and in every attention the score of a pad key becomes −∞ before the softmax: its weight is exactly 0. "
        "Below, the sentence and a short one are padded into one batch, with the masks our model computes for them "
        "(a pad's own row is all masked: what it computes is never used).",
    ),
    Step(
        "no-peek-mask",
        "No-peek mask",
        "A decoder writes one token at a time, so in training it must not see the tokens it is asked to predict. "
        "In its self-attention, query i may attend only to keys 1 … i: the no-peek (causal) mask is True on and "
        "below the diagonal and False above it, where the scores become −∞ and the weights exactly 0 (section "
        "3.2.3). Every position can then be trained in one pass while each sees only its past, as it will when it "
        "generates. The encoder has no such mask: it reads the whole source at once.",
    ),
    Step(
        "scaled-dot-product",
        "Scaled dot-product attention",
        "Each token's vector is projected three ways: a query q (what it looks for), a key k (what it can be found "
        "by) and a value v (what it passes on). Query i scores key j with q·k/√d_k; the mask sets forbidden scores "
        "to −∞; a softmax turns each row into weights that are positive and sum to 1; the output is the weighted sum "
        "of the values: softmax(QKᵀ/√d_k)V (section 3.2.1). Why divide by √d_k: if q and k have d_k independent "
        "components of mean 0 and variance 1, their dot product has variance d_k, and large scores push the softmax "
        "to where its gradients vanish. d_k is the width of one head (d_model / heads), not d_model.",
    ),
    Step(
        "multi-head",
        "Multi-head attention: split and concatenate",
        "Instead of one attention of width d_model, the model runs h narrower ones side by side (section 3.2.2). "
        "Q, K and V are projected to d_model numbers and split into h heads of d_k = d_model / h; each head computes "
        "its own weights, so one head can follow the previous token while another links a word to a related one. "
        "The heads' outputs, h × d_k numbers per token, are concatenated back to d_model and mixed by one more "
        "matrix, W^O. The total work is about that of one full-width head.",
    ),
    Step(
        "feed-forward",
        "Position-wise feed-forward network",
        "Attention moves information between positions; then each position goes on alone through the same small "
        "network (section 3.3): FFN(x) = max(0, xW₁ + b₁)W₂ + b₂, widening d_model to d_ff (4 times in the paper, "
        "512 → 2048) and back. The ReLU sets every negative unit to 0, so each token switches on its own subset of "
        "units. The network is the same at every position and different in every layer; with d_ff = 4·d_model it "
        "has twice the weights of the self-attention beside it.",
        needs=OURS,
    ),
    Step(
        "residual-layernorm",
        "Residual connections and LayerNorm",
        "Each sub-layer (attention, feed-forward) adds its result to its input instead of replacing it: "
        "x + Sublayer(x). This residual path lets information and gradients pass straight through a deep stack; "
        "each sub-layer only writes a correction. Layer normalisation rescales each token's vector to mean 0 and "
        "variance 1 (then a learned gain and bias), which keeps the numbers in range from layer to layer. The paper "
        "normalises after the addition, LayerNorm(x + Sublayer(x)) (post-norm, section 3.1); many later models, our "
        "language model among them, normalise the sub-layer's input instead, x + Sublayer(LayerNorm(x)) (pre-norm, "
        "with one last LayerNorm at the top), which usually trains more stably.",
        needs=OURS,
    ),
    Step(
        "cross-attention",
        "Cross-attention",
        "In an encoder-decoder, each decoder layer has a third sub-layer between its self-attention and its "
        "feed-forward network: its queries come from the decoder (the output written so far), its keys and values "
        "from the encoder's final output over the whole source (section 3.2.3). This is how each output token looks "
        "up the source: the German word being written attends to the English words it translates. No no-peek mask "
        "here, since the whole source is known; only the source's padding is masked.",
        ENC_DEC,
    ),
    Step(
        "next-token",
        "Language model: shift right, predict the next token",
        "A language model learns to predict each next token, and the text is its own answer key: the input is the "
        "text, the target the same text shifted by one (X = text[:-1], Y = text[1:]), so position i is trained to "
        "predict token i + 1. With the no-peek mask, position i sees only tokens up to i, so every position is "
        "trained at once and none can copy its answer. The loss is the cross-entropy of the right next token, "
        "averaged over positions. To generate, the model's choice after the last position is appended and fed back "
        "in. (An encoder-decoder's decoder is trained the same way: its input is the target shifted right, "
        "starting with `<s>`.)",
        LM,
    ),
    Step(
        "kv-cache",
        "Decoding with a key/value cache",
        "When generating, step t attends from the newest token to all t tokens so far. The keys and values of the "
        "earlier tokens never change (the no-peek mask means no position sees a later one), so the decoder keeps "
        "them, the key/value cache, and each step computes the query, key and value of the new token only. Without "
        "the cache, step t recomputes all t positions: n steps cost 1 + 2 + … + n ≈ n²/2 position computations "
        "instead of n. The price is memory, 2 × layers × positions × d_model numbers, one position more per step. "
        "In an encoder-decoder, the cross-attention's keys and values come from the encoder and are computed once.",
    ),
    Step(
        "quadratic-cost",
        "The O(n²) cost of attention",
        "Every query scores every key, so n tokens make an n × n matrix of scores for each head in each layer: "
        "computing QKᵀ and the weighted sum takes time in proportion to n²·d, and storing the weights h·n² numbers. "
        "Double the text and both grow four times, where the projections and the feed-forward grow only twice "
        "(n·d²). The paper's Table 1 counts a self-attention layer as O(n²·d) with O(1) sequential steps, against a "
        "recurrent layer's O(n·d²) with n steps: cheaper while n < d, and all positions run in parallel. Below: one "
        "attention block of the loaded model, timed on the machine running this app at growing lengths, with "
        "a·n² + b·n + c fitted to the measurements.",
    ),
)
SLUGS: tuple[str, ...] = tuple(s.slug for s in STEPS)

# The lesson's sentence for each preset family (inference.catalog.preset_family).
SENTENCES = {
    "reverse": "pineapple",  # letters of its alphabet only (a to p, no space): "hello world" had three <unk>
    "translate": "The cat sat on the mat.",
    "lm": "Once upon a time, there was a little girl who",  # lm-english writes on after it (the cache step)
}


def step_index(slug: object) -> int | None:
    """The 0-based index of the step with this slug, or None for anything else."""
    return SLUGS.index(slug) if isinstance(slug, str) and slug in SLUGS else None


@dataclass(frozen=True)
class Walk:
    """The first stack (encoder, or the language model's decoder) walked layer by layer with the model's own
    modules: what the feed-forward and residual steps show.

    pieces, ids: the tokens.
    embedded: (T, d_model) token embeddings × √d_model, before the positions are added.
    hidden:  (T, d_ff) the first layer's feed-forward units after the ReLU.
    norms:   (n_layers, 2, 3) mean vector length over the tokens, per layer and sub-layer (attention,
             feed-forward), of: the stream coming in, the sub-layer's output, the stream going out.
    output:  (T, d_model) what the stack hands on (after its last LayerNorm for pre-norm).
    pre_norm: the model normalises each sub-layer's input (True) or the sum (False, the paper).
    """

    pieces: tuple[str, ...]
    ids: tuple[int, ...]
    embedded: np.ndarray
    hidden: np.ndarray
    norms: np.ndarray
    output: np.ndarray
    pre_norm: bool

    def active_units(self, most: int) -> np.ndarray:
        """The indices of the `most` feed-forward units of the first layer with the largest total activation on
        this text, in unit order: a trained layer leaves most units at 0 for any one sentence."""
        total = self.hidden.sum(axis=0)
        return np.sort(np.argsort(-total, kind="stable")[:most])

    @property
    def zero_share(self) -> float:
        """The share of the first layer's feed-forward units the ReLU set to exactly 0."""
        return float((self.hidden == 0).mean()) if self.hidden.size else 0.0


def layer_weights(config: ModelConfig) -> tuple[int, int]:
    """Weights (with biases) of one layer's self-attention (W^Q, W^K, W^V, W^O) and of its feed-forward network."""
    d, d_ff = config.d_model, config.d_ff
    return 4 * (d * d + d), d * d_ff + d_ff + d_ff * d + d


def _mean_norm(x: torch.Tensor) -> float:
    return float(x[0].norm(dim=-1).mean())


@torch.inference_mode()
def walk(ckpt: Checkpoint, text: str) -> Walk:
    """Run `text` through the first stack one sub-layer at a time (the same steps as EncoderLayer/DecoderLayer,
    equal to the model's own output: tests/test_lesson.py). Raises InputError for text that cannot be read."""
    model, cfg = ckpt.model, ckpt.config
    ids = torch.tensor([encode_first_stack(ckpt, clean_text(text).text, [])])  # (1, T)
    valid = padding_mask(ids, cfg.pad_id)
    mask = attention_mask(valid, valid, causal=not cfg.is_encoder_decoder)  # (1, T, T)
    stack = model.encoder if cfg.is_encoder_decoder else model.decoder
    embedded = model.embed(ids)  # (1, T, d_model)
    x, _ = model.embed_with_positions(ids)
    norms, hidden = [], None
    for layer in stack.layers:
        first, last = layer.sublayer[0], layer.sublayer[-1]
        h = first.input(x)
        attn, _ = layer.self_attn(h, h, mask, record=False)
        after = first.output(x, attn)
        row = [(_mean_norm(x), _mean_norm(attn), _mean_norm(after))]
        x = after
        h = last.input(x)
        units = torch.relu(layer.feed_forward.w_1(h))  # (1, T, d_ff)
        hidden = units if hidden is None else hidden
        ff = layer.feed_forward(h)
        after = last.output(x, ff)
        row.append((_mean_norm(x), _mean_norm(ff), _mean_norm(after)))
        x = after
        norms.append(row)
    out = stack.norm(x)
    return Walk(
        pieces=tuple(ckpt.tokenizer.pieces(ids[0].tolist())),
        ids=tuple(ids[0].tolist()),
        embedded=embedded[0].numpy().astype(np.float32),
        hidden=hidden[0].numpy().astype(np.float32),
        norms=np.asarray(norms, dtype=np.float32),
        output=out[0].numpy().astype(np.float32),
        pre_norm=cfg.norm == "pre",
    )


@dataclass(frozen=True)
class Cost:
    """One attention block timed at growing lengths, and the quadratics fitted to the measurements.

    block:   which block was timed (`encoder.layers.0.self_attn`).
    clock:   "CPU" (the CPU time of the thread running it, when torch runs on that one thread: other work on a busy
             machine barely changes it) or "wall" (elapsed time, when torch spreads the work over threads).
    lengths: the sequence lengths n.
    repeats: how many timed runs at each n.
    seconds: the fastest of the repeats at each n (the least disturbed by other work on the machine).
    bytes:   bytes of the scores and weights tensors the block actually created at each n (float32, every head).
    time_fit, bytes_fit: (a, b, c) of a·n² + b·n + c, least squares.
    """

    block: str
    clock: str
    repeats: int
    lengths: tuple[int, ...]
    seconds: tuple[float, ...]
    bytes: tuple[int, ...]
    time_fit: tuple[float, float, float]
    bytes_fit: tuple[float, float, float]

    def fitted(self, fit: tuple[float, float, float], n: np.ndarray) -> np.ndarray:
        """The fitted quadratic `fit` at lengths `n`."""
        a, b, c = fit
        return a * n**2 + b * n + c

    def doubling(self, fit: tuple[float, float, float]) -> float:
        """How many times the fitted quadratic `fit` grows from half the longest length to the longest: 4 for a
        pure n² cost, 2 for a linear one."""
        n = np.asarray([self.lengths[-1] / 2, self.lengths[-1]], dtype=np.float64)
        low, high = self.fitted(fit, n)
        return float(high / low) if low > 0 else float("inf")


def _clock() -> tuple[str, Callable[[], float]]:
    """The thread's CPU time when torch computes on the calling thread alone (steady on a busy machine), else the
    elapsed time (CPU time would miss torch's other threads)."""
    return ("CPU", time.thread_time) if torch.get_num_threads() == 1 else ("wall", time.perf_counter)


def cost_lengths(max_len: int, points: int = 8, longest: int = 512) -> tuple[int, ...]:
    """`points` evenly spaced lengths up to min(max_len, longest): small, so the lesson measures in about a second."""
    top = max(points, min(max_len, longest))
    return tuple(int(n) for n in np.linspace(top / points, top, points).round())


@torch.inference_mode()
def attention_cost(ckpt: Checkpoint, lengths: tuple[int, ...] | None = None, repeats: int = 3) -> Cost:
    """Time the first stack's first self-attention block (projections, QKᵀ/√d_k, mask, softmax, ·V, W^O: the
    explicit path that materialises the weights) on random vectors of each length, `repeats` times each in turn,
    and count the bytes of the score and weight tensors it returns. About a second for the shipped models."""
    model, cfg = ckpt.model, ckpt.config
    lengths = lengths or cost_lengths(cfg.max_len)
    if len(lengths) < 3 or any(not 1 <= n <= cfg.max_len for n in lengths):
        raise ValueError(f"need at least 3 lengths within 1..{cfg.max_len}, got {lengths}")
    stack = "encoder" if cfg.is_encoder_decoder else "decoder"
    attn = getattr(model, stack).layers[0].self_attn
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for n in lengths:
        valid = torch.ones(1, n, dtype=torch.bool)
        x = torch.randn(1, n, cfg.d_model, generator=generator)
        inputs.append((x, attention_mask(valid, valid, causal=stack == "decoder")))
    clock, now = _clock()
    seconds = [float("inf")] * len(lengths)
    sizes = [0] * len(lengths)
    for round_ in range(repeats + 1):  # round robin, so that a burst of other work slows every length alike
        for i, (x, mask) in enumerate(inputs):
            start = now()
            _, record = attn(x, x, mask)
            if round_:  # the first round is a warm-up: the first call at a new size allocates
                seconds[i] = min(seconds[i], now() - start)
            sizes[i] = sum(t.element_size() * t.nelement() for t in (record.scores, record.weights))
    n = np.asarray(lengths, dtype=np.float64)
    time_fit = tuple(float(v) for v in np.polyfit(n, seconds, 2))
    bytes_fit = tuple(float(v) for v in np.polyfit(n, np.asarray(sizes, dtype=np.float64), 2))
    block = f"{stack}.layers.0.self_attn"
    return Cost(block, clock, repeats, tuple(lengths), tuple(seconds), tuple(sizes), time_fit, bytes_fit)


@dataclass(frozen=True)
class CacheTiming:
    """Greedy decoding of one text timed with and without the key/value cache (the same tokens either way)."""

    clock: str  # as Cost.clock
    tokens: int  # tokens written (the end token not counted)
    with_cache: float  # seconds, the faster of two runs
    without_cache: float


@torch.inference_mode()
def cache_timing(ckpt: Checkpoint, text: str, max_tokens: int) -> CacheTiming:
    """Time `inference.decoding.generate` writing up to `max_tokens` after `text` (the translation, or the language
    model's continuation) with the cache (each step runs the new token only) and without it (each step runs
    everything again). Raises InputError for text that cannot be read."""
    cfg, notes = ckpt.config, []
    cleaned = clean_text(text).text
    if cfg.is_encoder_decoder:
        source, prefix = torch.tensor([encode_source(ckpt, cleaned, notes)]), [cfg.bos_id]
    else:
        source, prefix = None, encode_prefix(ckpt, cleaned, notes, reserve=min(max_tokens, cfg.max_len // 2))
    clock, now = _clock()
    best = {True: float("inf"), False: float("inf")}
    for cache in (True, False, True, False):
        start = now()
        out = generate(ckpt.model, prefix, source, max_tokens, cache=cache)
        best[cache] = min(best[cache], now() - start)
    return CacheTiming(clock, len(out.ids), best[True], best[False])

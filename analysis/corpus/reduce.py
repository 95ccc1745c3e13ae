"""Every self-attention head over a corpus, reduced as the batches stream by: state of a fixed size, whatever the
number of texts.

Per head, from the weights of each traced pass:
- the detectors' scores (analysis.detectors: the share of a text's attention on each pattern of PATTERNS, then on
  each custom pattern of the run's (analysis.corpus.patterns), over the queries that may attend), summed over
  texts for their mean;
- attention entropy, −Σ_k w log w of each such query, averaged over its text, summed over texts;
- mean attention by relative offset (query − key, clamped to ±OFFSETS: the end bins hold everything farther),
  summed over every such query, for each query's mean;
- the top-k contexts: for each query with a choice (a key besides the first; a query with one key gives it
  weight 1), its strongest key after the first (the first of equal ones), and the k strongest such (text, query,
  key) cells over the corpus, equal weights ordered by text then query, so the result is one set whatever the
  batches. The first position is left out as a key because it is where heads park attention they do not need (the
  attention sink: `<s>` in our models), which would otherwise fill most heads' top contexts with the same "→ <s>"
  (its share is the first-token score);
- a sample of query and key vectors: each (text, position) gets a priority from a hash of the pair, and the
  `sample` lowest are kept (a uniform sample without replacement, the same whatever the order or interruption).

`Reducer.state()` and `Reducer.from_state` turn it into arrays (safetensors) and JSON: a run resumed from a saved
state ends bit for bit as one that never stopped. Positions are 0-based here; the stored tables count from 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from analysis.corpus.patterns import CustomPattern, drawn
from analysis.detectors import PATTERNS
from model.names import parse_sublayer_name
from model.trace import Trace

SCORES = (*PATTERNS, "entropy")  # the scores of a run without custom patterns (Reducer.scores: with them)
OFFSETS = 32
# A manifest and a saved state list the self-attention sub-layers under this key: the corpus format's, kept as every
# profile and state was written, so that one made before reads and resumes as it is.
SUBLAYERS_KEY = "blocks"
SNIPPET_SIDE = 4  # pieces shown each side of the query and of the key


@dataclass(frozen=True)
class Batch:
    """One padded batch: the traced pass over `ids` (B, T), each row's text number (from 1), token count and
    pieces (for snippets)."""

    trace: Trace
    ids: torch.Tensor
    texts: list[int]
    lengths: list[int]
    pieces: list[list[str]]


def patterns(ids: torch.Tensor) -> torch.Tensor:
    """(B, P, T, T) float: each pattern of PATTERNS over each row of `ids` (B, T), as detectors.pattern_for draws
    it from a text's ids (padding cells carry no weight, so what the pattern says there does not count)."""
    b, t = ids.shape
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    same = ids[:, :, None] == ids[:, None, :]  # (B, T, T) token i equals token j
    shifted = torch.zeros_like(same)
    shifted[:, :, 1:] = ids[:, :, None] == ids[:, None, :-1]  # token i equals token j − 1
    by_name = {
        "previous token": (j == i - 1).expand(b, t, t),
        "first token": (j == 0).expand(b, t, t),
        "current token": (j == i).expand(b, t, t),
        "same token": same & (j < i),
        "induction": shifted & (j >= 1) & (j <= i),
    }
    return torch.stack([by_name[name] for name in PATTERNS], dim=1).float()


def _priorities(texts: np.ndarray, positions: np.ndarray, seed: int) -> np.ndarray:
    """A uniform 64-bit hash (splitmix64) of each (text, position): the sample's order."""
    x = (texts.astype(np.uint64) << np.uint64(24)) ^ positions.astype(np.uint64) ^ np.uint64(seed)
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def snippet(pieces: list[str], query: int, key: int | None = None) -> str:
    """The pieces around key and query (0-based) as text: the key in «», the query in [], gaps as " … "; no key:
    the query's own context. A word
    starts at sentencepiece's "▁" or byte-level BPE's "Ġ"; in WordPiece's pieces (neither mark) at every piece but
    a "##" continuation."""
    shown = sorted(
        {p for centre in {key, query} - {None} for p in range(centre - SNIPPET_SIDE, centre + SNIPPET_SIDE + 1)}
        & set(range(len(pieces)))
    )
    marked = any(piece[:1] in ("▁", "Ġ") for piece in pieces)
    out, last = [], None
    for p in shown:
        if last is not None and p != last + 1:
            out.append(" …")
        piece = pieces[p]
        if marked:
            piece = piece.replace("▁", " ").replace("Ġ", " ")
        else:
            piece = piece[2:] if piece.startswith("##") else " " + piece
        word = piece.lstrip(" ")
        space = piece[: len(piece) - len(word)]  # outside the marks: "the «cat»", not "the« cat»"
        if p == query:
            word = f"[{word}]"
        if p == key:
            word = f"«{word}»"
        out.append(space + word)
        last = p
    return "".join(out).strip()


def columns(scores: Sequence[str]) -> tuple[str, ...]:
    """Each score's column in the tables: names SQL reads without quotes."""
    return tuple(name.replace(" ", "_") for name in scores)


class Reducer:
    """The corpus's per-head state: sub-layers × heads (L, H) of one self-attention stack. `patterns`: the run's
    custom patterns, scored after PATTERNS (`scores`: every score's name, in the state's order); a reducer read
    back from a state without them (`pattern_names` only) merges others but reduces no batch."""

    def __init__(
        self,
        sublayers: list[str],
        n_heads: int,
        d_head: int,
        top_k: int,
        sample: int,
        seed: int,
        patterns: Sequence[CustomPattern] = (),
        pattern_names: Sequence[str] | None = None,
    ) -> None:
        self.sublayers, self.n_heads, self.d_head = list(sublayers), n_heads, d_head
        self.top_k, self.sample, self.seed = top_k, sample, seed
        self.patterns = tuple(patterns)
        self.pattern_names = [p.name for p in self.patterns] if pattern_names is None else list(pattern_names)
        self.scores = (*PATTERNS, *self.pattern_names, "entropy")
        n, h = len(sublayers), n_heads
        self.texts = 0
        self.score_sums = np.zeros((len(self.scores), n, h))  # float64: sums over texts of each text's mean
        self.offset_sums = np.zeros((n, h, 2 * OFFSETS + 1))
        self.queries = 0  # queries that may attend, over the corpus: the offsets' denominator
        self.top_weight = np.full((n, h, top_k), -np.inf, dtype=np.float32)
        self.top_where = np.zeros((n, h, top_k, 3), dtype=np.int64)  # text (from 1), query, key (0-based)
        self.top_text: list[list[list[list[str]]]] = [[[] for _ in range(h)] for _ in range(n)]  # snippet, pieces
        self.sample_priority = np.zeros(0, dtype=np.uint64)
        self.sample_where = np.zeros((0, 2), dtype=np.int64)  # text (from 1), position (0-based)
        self.sample_piece: list[str] = []
        self.sample_context: list[str] = []  # each sampled position's snippet, the position in []
        self.sample_q = np.zeros((n, h, 0, d_head), dtype=np.float32)
        self.sample_k = np.zeros((n, h, 0, d_head), dtype=np.float32)

    @classmethod
    def for_trace(
        cls, trace: Trace, top_k: int, sample: int, seed: int, patterns: Sequence[CustomPattern] = ()
    ) -> Reducer:
        names = [name for name in trace.attention if name.endswith("self_attn")]
        rec = trace.attention[names[0]]
        return cls(names, rec.keys.shape[1], rec.keys.shape[-1], top_k, sample, seed, patterns)

    @property
    def columns(self) -> tuple[str, ...]:
        return columns(self.scores)

    def _patterns(self, batch: Batch) -> torch.Tensor:
        """(B, P + C, T, T): PATTERNS' and then each custom pattern's, drawn from each text's pieces."""
        built_in = patterns(batch.ids.cpu())
        if not self.pattern_names:
            return built_in
        if len(self.patterns) != len(self.pattern_names):
            raise ValueError("this reducer was read back without its custom patterns' functions: it can only merge")
        b, _, t, _ = built_in.shape
        custom = np.zeros((b, len(self.patterns), t, t), dtype=np.float32)
        for row, (text, n, pieces) in enumerate(zip(batch.texts, batch.lengths, batch.pieces)):
            for c, pattern in enumerate(self.patterns):
                custom[row, c, :n, :n] = drawn(pattern, pieces[:n], text)
        return torch.cat([built_in, torch.from_numpy(custom)], dim=1)

    @torch.inference_mode()
    def update(self, batch: Batch) -> np.ndarray:
        """Fold one batch in; returns (B, len(scores), L, H) each text's own scores, for the shard's table."""
        pattern = self._patterns(batch)  # (B, P + C, T, T)
        shared = pattern.shape[1]
        per_text = np.zeros((len(batch.texts), len(self.scores), len(self.sublayers), self.n_heads))
        for layer, name in enumerate(self.sublayers):
            rec = batch.trace.attention[name]
            w = rec.weights.float().cpu()  # (B, H, T, T)
            mask = rec.mask.cpu()
            rows = mask.any(-1)  # (B, T): the queries that may attend
            n_rows = rows.sum(-1).clamp_min(1).double()  # (B,)
            total = w.sum((2, 3)).double()  # (B, H)
            hits = torch.einsum("bhqk,bpqk->bph", w, pattern).double()  # (B, P, H)
            shares = torch.where(total[:, None] > 0, hits / total.clamp_min(1e-30)[:, None], 0.0)
            entropy = -(w * torch.log(w.clamp_min(1e-30))).sum(-1)  # (B, H, T), 0 on padding rows
            per_text[:, :shared, layer] = shares.numpy()
            per_text[:, -1, layer] = (entropy.double().sum(-1) / n_rows[:, None]).numpy()
            self._offsets(layer, w)
            self._top(layer, w, mask, batch)
        self.score_sums += per_text.sum(0)
        self.texts += len(batch.texts)
        self.queries += int(batch.trace.attention[self.sublayers[0]].mask.any(-1).sum())
        self._sample(batch)
        return per_text

    def _offsets(self, layer: int, w: torch.Tensor) -> None:
        t = w.shape[-1]
        offset = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).clamp(-OFFSETS, OFFSETS) + OFFSETS  # (T, T)
        summed = w.double().sum(0).reshape(self.n_heads, t * t)  # (H, T·T)
        bins = torch.zeros(self.n_heads, 2 * OFFSETS + 1, dtype=torch.float64)
        self.offset_sums[layer] += bins.index_add_(1, offset.reshape(-1), summed).numpy()

    def _top(self, layer: int, w: torch.Tensor, mask: torch.Tensor, batch: Batch) -> None:
        b, h, t, _ = w.shape
        if t < 2:
            return
        later = w[..., 1:]  # (B, H, T, T-1): every key but the first, the sink
        best = later.max(-1).values  # (B, H, T)
        positions = torch.arange(1, t).expand_as(later)
        key = torch.where(later == best[..., None], positions, t).min(-1).values  # the first of equal maxima
        chosen = (mask[..., 1:].sum(-1) >= 1)[:, None, :].expand(b, h, t)  # queries that may attend past the first
        best = torch.where(chosen, best, -torch.inf)
        flat = best.permute(1, 0, 2).reshape(h, b * t)  # (H, B·T)
        floor = torch.topk(flat, min(self.top_k, b * t), dim=1).values[:, -1:]  # ties at the k-th all go on
        for head in range(h):
            cells = torch.nonzero((flat[head] >= floor[head]) & torch.isfinite(flat[head])).flatten()
            rows, queries = (cells // t).numpy(), (cells % t).numpy()
            weights = flat[head, cells].numpy().astype(np.float32)
            keys = key[rows, head, queries].numpy()
            where = np.stack([np.asarray(batch.texts)[rows], queries, keys], axis=1).astype(np.int64)
            context = lambda i, rows=rows, where=where: self._context(batch.pieces[rows[i]], *where[i, 1:])
            self._merge_top(layer, head, weights, where, context)

    def _merge_top(
        self, layer: int, head: int, weights: np.ndarray, where: np.ndarray, context: Callable[[int], list[str]]
    ) -> None:
        """Keep the k strongest of the kept and the new candidates; `context(i)`, the snippet and pieces of new
        candidate i, is asked only for a candidate kept."""
        kept = np.isfinite(self.top_weight[layer, head])
        old = int(kept.sum())
        all_w = np.concatenate([self.top_weight[layer, head][kept], weights])
        all_where = np.concatenate([self.top_where[layer, head][kept], where])
        order = np.lexsort((all_where[:, 1], all_where[:, 0], -all_w))[: self.top_k]  # weight, then text, query
        texts = self.top_text[layer][head]
        self.top_text[layer][head] = [texts[i] if i < old else context(i - old) for i in order]
        n = len(order)
        self.top_weight[layer, head] = -np.inf
        self.top_weight[layer, head, :n] = all_w[order]
        self.top_where[layer, head] = 0
        self.top_where[layer, head, :n] = all_where[order]

    @staticmethod
    def _context(pieces: list[str], query: int, key: int) -> list[str]:
        return [snippet(pieces, int(query), int(key)), pieces[query], pieces[key]]

    def _sample(self, batch: Batch) -> None:
        rows = np.concatenate([np.full(n, r) for r, n in enumerate(batch.lengths)])
        positions = np.concatenate([np.arange(n) for n in batch.lengths])
        texts = np.asarray(batch.texts, dtype=np.int64)[rows]
        old = len(self.sample_priority)
        priority = np.concatenate([self.sample_priority, _priorities(texts, positions, self.seed)])
        order = np.argsort(priority, kind="stable")[: self.sample]  # lowest first
        new = order[order >= old] - old  # the batch's positions that enter the sample
        r, p = torch.as_tensor(rows[new]), torch.as_tensor(positions[new])
        q = [batch.trace.attention[n].queries.cpu()[r, :, p].float().numpy() for n in self.sublayers]  # (new, H, d)
        k = [batch.trace.attention[n].keys.cpu()[r, :, p].float().numpy() for n in self.sublayers]
        all_q = np.concatenate([self.sample_q, np.stack(q).transpose(0, 2, 1, 3)], axis=2)  # (L, H, old+new, d)
        all_k = np.concatenate([self.sample_k, np.stack(k).transpose(0, 2, 1, 3)], axis=2)
        slot = np.empty(len(priority), dtype=np.int64)  # an entry of `priority` → its row of all_q
        slot[:old] = np.arange(old)
        slot[old + new] = old + np.arange(len(new))
        picked = slot[order]
        pieces = self.sample_piece + [batch.pieces[a][b] for a, b in zip(rows[new], positions[new])]
        contexts = self.sample_context + [snippet(batch.pieces[a], int(b)) for a, b in zip(rows[new], positions[new])]
        where = np.concatenate([self.sample_where, np.stack([texts[new], positions[new]], axis=1)])
        self.sample_priority = priority[order]
        self.sample_where, self.sample_piece = where[picked], [pieces[i] for i in picked]
        self.sample_context = [contexts[i] for i in picked]
        self.sample_q, self.sample_k = all_q[:, :, picked], all_k[:, :, picked]

    # --- partial reductions -------------------------------------------------------------------------------------

    def empty(self) -> Reducer:
        """A reducer of the same heads and settings that has seen no text: a shard's own (see merge)."""
        settings = (self.sublayers, self.n_heads, self.d_head, self.top_k, self.sample, self.seed)
        return Reducer(*settings, self.patterns, self.pattern_names)

    def merge(self, later: Reducer) -> None:
        """Fold in `later`, a reducer of the texts after this one's: sums add, the top contexts and the sample keep
        the strongest and the lowest-priority of both, by the same total orders as update. Reducing a corpus
        shard by shard into empty() reducers and merging them in order is one procedure wherever the shards ran
        (here or on Ray workers): the same results."""
        self.texts += later.texts
        self.queries += later.queries
        self.score_sums += later.score_sums
        self.offset_sums += later.offset_sums
        for layer in range(len(self.sublayers)):
            for head in range(self.n_heads):
                kept = np.isfinite(later.top_weight[layer, head])
                texts = later.top_text[layer][head]
                self._merge_top(
                    layer,
                    head,
                    later.top_weight[layer, head][kept],
                    later.top_where[layer, head][kept],
                    lambda i, texts=texts: texts[i],
                )
        priority = np.concatenate([self.sample_priority, later.sample_priority])
        order = np.argsort(priority, kind="stable")[: self.sample]  # lowest first, as _sample keeps them
        pieces, contexts = self.sample_piece + later.sample_piece, self.sample_context + later.sample_context
        self.sample_priority = priority[order]
        self.sample_where = np.concatenate([self.sample_where, later.sample_where])[order]
        self.sample_piece, self.sample_context = [pieces[i] for i in order], [contexts[i] for i in order]
        self.sample_q = np.concatenate([self.sample_q, later.sample_q], axis=2)[:, :, order]
        self.sample_k = np.concatenate([self.sample_k, later.sample_k], axis=2)[:, :, order]

    # --- results -------------------------------------------------------------------------------------------------

    def layers(self) -> list[int]:
        """Each sub-layer's layer, from 1."""
        return [parse_sublayer_name(name)[1] + 1 for name in self.sublayers]

    def head_scores(self) -> np.ndarray:
        """(len(scores), L, H) the corpus's mean of each score."""
        return self.score_sums / max(self.texts, 1)

    def offset_means(self) -> np.ndarray:
        """(L, H, 2·OFFSETS + 1) each query's mean weight at offsets −OFFSETS … OFFSETS."""
        return self.offset_sums / max(self.queries, 1)

    # --- saved state ---------------------------------------------------------------------------------------------

    def state(self) -> tuple[dict[str, np.ndarray], dict]:
        """The state as arrays (for safetensors) and JSON: from_state of them continues exactly."""
        arrays = {
            "score_sums": self.score_sums,
            "offset_sums": self.offset_sums,
            "top_weight": self.top_weight,
            "top_where": self.top_where,
            "sample_priority": self.sample_priority.view(np.int64),  # safetensors has no uint64 for every reader
            "sample_where": self.sample_where,
            "sample_q": self.sample_q,
            "sample_k": self.sample_k,
        }
        info = {
            SUBLAYERS_KEY: self.sublayers,
            "n_heads": self.n_heads,
            "d_head": self.d_head,
            "top_k": self.top_k,
            "sample": self.sample,
            "seed": self.seed,
            "patterns": self.pattern_names,
            "texts": self.texts,
            "queries": self.queries,
            "top_text": self.top_text,
            "sample_piece": self.sample_piece,
            "sample_context": self.sample_context,
        }
        return {name: np.ascontiguousarray(a) for name, a in arrays.items()}, info

    @classmethod
    def from_state(
        cls, arrays: dict[str, np.ndarray], info: dict, patterns: Sequence[CustomPattern] | None = None
    ) -> Reducer:
        """The reducer `state()` wrote; `patterns`, its custom patterns' functions again (None: it only merges)."""
        names = info.get("patterns", [])  # a state from before custom patterns has none
        if patterns is not None and [p.name for p in patterns] != names:
            raise ValueError(f"the state's custom patterns are {names}, not {[p.name for p in patterns]}")
        settings = (info[SUBLAYERS_KEY], info["n_heads"], info["d_head"], info["top_k"], info["sample"], info["seed"])
        r = cls(*settings, patterns or (), names)
        r.texts, r.queries = info["texts"], info["queries"]
        r.top_text, r.sample_piece, r.sample_context = info["top_text"], info["sample_piece"], info["sample_context"]
        r.score_sums, r.offset_sums = arrays["score_sums"], arrays["offset_sums"]
        r.top_weight, r.top_where = arrays["top_weight"], arrays["top_where"]
        r.sample_priority = arrays["sample_priority"].view(np.uint64)
        r.sample_where, r.sample_q, r.sample_k = arrays["sample_where"], arrays["sample_q"], arrays["sample_k"]
        return r

"""The induction-circuit step told from its numbers: every sentence the Lesson prints beside a figure of the circuit
(analysis.lesson.circuit) is built here from that figure, so no fixed claim sits beside a number that contradicts it.

The textbook circuit (Olsson et al. 2022; Elhage et al. 2021) is a previous-token head whose output the induction
head's keys read (K-composition), and the induction head moving the copy. A trained model need not keep to it: its
keys may read most from other heads, and several heads may share the copying so that none restores much alone. The
sentences say which, from the figures; the course text keeps the textbook picture, marked as such.

Heads are (layer, head, score), counted from 0 here and from 1 in every sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.lesson import INDUCTION_AT, Circuit
from model.names import sublayer_layer

Head = tuple[int, int, float]  # (layer, head, score), 0-based

ONE_HEAD = 0.5  # one head patched alone restoring this share of the copy or more carries it; "most" is > half
NARROW = 0.95  # a runner-up K-composition source within this fraction of the first is as good as level with it
NAMED = 3  # the K-composition sources named above the previous-token head
SHARES = 10  # the induction heads listed in the shares table, the largest first


def label(layer: int, head: int) -> str:
    """`layer 3, head 7` for 0-based (2, 6): as a person counts."""
    return f"layer {layer + 1}, head {head + 1}"


def _listed(heads: Sequence[Head], more: int = 0) -> str:
    """`layer 2, head 8 (0.125), layer 1, head 2 (0.106) and layer 1, head 5 (0.106)`, or `…, layer 1, head 5
    (0.106) and 3 more` with `more`."""
    named = [f"{label(la, h)} ({s:.3f})" for la, h, s in heads] + ([f"{more} more"] if more else [])
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


@dataclass(frozen=True)
class Told:
    """The step's sentences, each from the figures it sits beside.

    previous:     under the previous-token head's weights.
    keys_heading: the second part's heading; keys: what the K-composition table shows.
    textbook_keys: whether the previous-token head tops the induction head's K-composition sources, clearly.
    patching:     under the patching heatmap and the shares table; spread: no head restores ONE_HEAD alone while the
                  induction heads together restore more than half.
    shares:       the induction heads patched one at a time, the most restoring first: (label, induction score,
                  restored alone), at most SHARES of them; shares_sum: what they restore alone, summed over all.
    writes:       under the direct logit attribution.
    """

    previous: str
    keys_heading: str
    keys: str
    textbook_keys: bool
    patching: str
    spread: bool
    shares: tuple[tuple[str, float, float], ...]
    shares_sum: float
    writes: str


def _keys(previous: Head, induction: Head, sources: Sequence[Head]) -> tuple[str, str, bool]:
    """The second part's heading and sentence, and whether the keys read most from the previous-token head."""
    prev, ind = label(*previous[:2]), label(*induction[:2])
    if not sources:
        return (
            f"The induction head, {ind}",
            f"{ind} is in the first layer: no earlier head writes into its keys.",
            False,
        )
    rank = next((i + 1 for i, (la, h, _) in enumerate(sources) if (la, h) == previous[:2]), None)
    top = sources[0]
    close = [s for s in sources[1:] if s[2] >= NARROW * top[2]]
    if rank == 1 and not close:
        heading = f"Its output feeds the keys of the induction head, {ind}"
        said = f"Of every earlier head, {ind} reads most from the previous-token head, {prev} ({top[2]:.3f})"
        runner = f"; next is {_listed(sources[1:2])}." if len(sources) > 1 else "."
        return heading, said + runner, True
    heading = f"The keys of the induction head, {ind}: which earlier heads they read"
    if rank == 1:
        said = (
            f"Of every earlier head, {ind} reads most from the previous-token head, {prev} ({top[2]:.3f}), but barely: "
            f"{_listed(close[:NAMED], max(0, len(close) - NAMED))} {'come' if len(close) > 1 else 'comes'} within "
            f"{1 - NARROW:.0%} of it. Its keys "
            "read several earlier heads about as much."
        )
        return heading, said, False
    above = sources[: min(NAMED, (rank or len(sources) + 1) - 1)]
    more = (rank - 1 if rank else len(sources)) - len(above)
    said = f"Of every earlier head, {ind} reads most from {_listed(above, more)}"
    if rank is None:
        said += f"; the previous-token head, {prev}, is not in an earlier layer, so its keys cannot read it."
    else:
        said += (
            f"; the previous-token head, {prev}, ranks {rank:d} of {len(sources)} ({sources[rank - 1][2]:.3f}): here "
            "the keys do not read mainly from it."
        )
    return heading, said, False


def _patching(
    induction: Head, alone: np.ndarray, together: Sequence[Head], restored: float
) -> tuple[str, bool, tuple[tuple[str, float, float], ...], float]:
    """The third part's sentence, whether the copying is spread, the shares table and its sum."""
    layer, head = np.unravel_index(int(np.argmax(alone)), alone.shape)
    best, most = label(int(layer), int(head)), float(alone[layer, head])
    rows = sorted(((label(la, h), s, float(alone[la, h])) for la, h, s in together), key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    n = len(together)
    heads = f"the {n} heads that score {INDUCTION_AT:g} or more as induction heads"
    if most >= ONE_HEAD:
        who = (
            "the induction head itself"
            if (layer, head) == induction[:2]
            else f"not the induction head, {label(*induction[:2])}"
        )
        said = f"One head carries the copy: {best} alone restores {most:.2f} ({who})."
        if n:
            said += f" {heads.capitalize()}, patched together, restore {restored:.2f}."
        return said, False, tuple(rows[:SHARES]), total
    spread = n > 1 and restored > ONE_HEAD
    said = f"No head restores much alone: at most {most:.2f} ({best})."
    if spread:
        said += (
            f" {heads.capitalize()} restore {total:.2f} one at a time, summed, and {restored:.2f} patched together: "
            "the model spreads the circuit over several heads."
        )
    elif n:
        said += (
            f" {heads.capitalize()}, patched together, restore {restored:.2f}: patching finds no circuit of them here."
        )
    else:
        said += f" No head scores {INDUCTION_AT:g} or more as an induction head: patching finds no circuit here."
    return said, spread, tuple(rows[:SHARES]), total


def _writes(induction: Head, together: Sequence[Head], writes: np.ndarray) -> str:
    """The fourth part's sentence: which head writes the copied word's logit most, and what the induction heads do."""
    layer, head = (int(i) for i in np.unravel_index(int(np.argmax(writes)), writes.shape))
    ind, most = label(*induction[:2]), float(writes[layer, head])
    of_ind = float(writes[induction[0], induction[1]])
    scores = {(la, h): s for la, h, s in together}
    if (layer, head) == induction[:2]:
        said = f"The largest is the induction head's, {ind}: {most:.2f}."
    elif (layer, head) in scores:
        said = (
            f"The largest is {label(layer, head)}'s, {most:.2f}, itself an induction head (score "
            f"{scores[layer, head]:.2f}); {ind}, the best on the probe, writes {of_ind:.2f}."
        )
    else:
        said = f"The largest is {label(layer, head)}'s, {most:.2f}, not an induction head; {ind} writes {of_ind:.2f}."
    if len(together) > 1:
        share = sum(float(writes[la, h]) for la, h, _ in together)
        said += (
            f" The {len(together)} induction heads write {share:.2f} of the {float(writes.sum()):.2f} all heads write."
        )
    return said


def told(
    previous: Head,
    induction: Head,
    sources: Sequence[Head],
    alone: np.ndarray,
    together: Sequence[Head],
    restored: float,
    writes: np.ndarray,
) -> Told:
    """The step's sentences from its figures: the previous-token and induction heads with their probe scores, the
    induction head's K-composition sources (strongest first), each head's share of the copy restored when patched
    alone (L, H), the induction heads with their scores and what patching them together restores, and each head's
    direct contribution to the copied word's logit (L, H)."""
    heading, keys, textbook = _keys(previous, induction, sources)
    patching, spread, shares, total = _patching(induction, alone, together, restored)
    return Told(
        previous=(
            f"On the probe, each token puts {previous[2]:.2f} of its weight, on average, on the token just before it "
            "(the cells just left of the diagonal; 1 would be all of it)."
        ),
        keys_heading=heading,
        keys=keys,
        textbook_keys=textbook,
        patching=patching,
        spread=spread,
        shares=shares,
        shares_sum=total,
        writes=_writes(induction, together, writes),
    )


def tell(seen: Circuit) -> Told:
    """`told` on the figures of one measured circuit."""
    (pb, ph, ps), (ib, ih, iscore) = seen.previous, seen.induction
    return told(
        (sublayer_layer(pb), ph, ps),
        (sublayer_layer(ib), ih, iscore),
        seen.sources,
        seen.patching.scores,
        tuple((sublayer_layer(b), h, s) for b, h, s in seen.together),
        seen.restored,
        seen.attribution.heads["decoder.self_attn"],
    )

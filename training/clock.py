"""A run's wall-clock budget (`python -m training.train … --minutes M`).

A run given minutes, not steps, must still end on a finished learning-rate schedule (its cool-down included) and
leave time to validate and save. So the run times its own steps once, after a few warm-up steps, and times one
validation; from those it fits how many steps the budget holds, and the schedule is laid over that many. At each
validation before the cool-down begins it fits again, from the speed since the last fit: a run whose first steps
were slowed by another process (a niced run on a shared machine) or sped up still fills its minutes, and the rate
it has already used is never bent (the cool-down, once begun, stays where it was laid). A guard stops the run early
when a slower stretch (another process, a thermal limit) would overrun the budget anyway, so the folder always
holds a saved, loadable checkpoint when the minutes are up.

The fit is recorded on the card; `--max-steps` with the fitted number replays the same run without a clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

WARM_STEPS = 5  # not timed: the first steps compile kernels, fill allocator caches and load the data pipeline
TIMED_STEPS = 20  # steps timed to fit the run
SAVE_SECONDS = 5.0  # kept back for the last save (weights, optimizer state, card)
MARGIN = 0.9  # the share of the spare time fitted with steps: speed drifts, and saves at validations take time too


def now() -> float:
    """The wall clock a budget reads (time.time): one function, so that a test can drive a run's budget."""
    return time.time()


@dataclass
class Clock:
    """The budget of one run, started at `started` (time.time())."""

    minutes: float
    started: float = field(default_factory=lambda: now())
    timing_from: float | None = None  # when the timed steps began
    validation_seconds: float = 0.0  # one validation, measured at the last fit
    mark: tuple[int, float] = (0, 0.0)  # the step and time of the last fit: the next one times the steps since

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    def left(self) -> float:
        return self.seconds - (now() - self.started)

    def fit(self, seconds_per_step: float, validation_seconds: float, eval_every: int) -> int:
        """How many more steps the budget holds, each costing `seconds_per_step` plus a share of a validation every
        `eval_every` steps, keeping back one validation and one save for the end."""
        self.validation_seconds = validation_seconds
        spare = self.left() - validation_seconds - SAVE_SECONDS
        per_step = seconds_per_step + validation_seconds / max(eval_every, 1)
        return max(0, math.floor(MARGIN * spare / per_step))

    def must_stop(self) -> bool:
        """True when what is left would not cover one more validation and the save."""
        return self.left() < 1.5 * self.validation_seconds + SAVE_SECONDS


def cooldown_steps(cooldown: int, share: float, steps: int) -> int:
    """A run's cool-down in steps: the task's own `cooldown`, or its `share` of a run of `steps` steps, whichever is
    longer, and never more than the run."""
    return min(steps, max(cooldown, round(share * steps)))


def speed_since(mark: tuple[int, float], step: int, at: float, validation_seconds: float) -> float:
    """Seconds a step took from the last fit (`mark`: its step and time) to `step` at time `at`, leaving out the
    validation just made (its time is a share of its own in `Clock.fit`, not the steps')."""
    mark_step, mark_time = mark
    return max(at - mark_time - validation_seconds, 0.0) / (step - mark_step)


def cooling(step: int, last: int, cooldown: int) -> bool:
    """True once a run ending at `last` has begun its cool-down of `cooldown` steps at `step`: its line down to zero is
    laid and no refit moves it."""
    return step >= last - cooldown


def refitted_last(
    *, start: int, cap: int, last: int, cooldown: int, step: int, more: int, cooldown_of: Callable[[int], int]
) -> int:
    """The run's new last step, refitted at `step` to `more` steps the budget still holds: at most `cap` (the
    task's own steps). A run already cooling keeps its `last`. A plan shorter than the current one whose cool-down
    (`cooldown_of` a run of so many steps) would have begun before `step` is lengthened until it begins at `step`:
    before its cool-down the rate does not depend on the last step, so the rate already used stays what the new plan
    uses and a replay with `--max-steps` of the final fit is the same run (the guard, `Clock.must_stop`, still stops
    an overrun)."""
    if cooling(step, last, cooldown):
        return last
    fitted = min(cap, step + more)
    while fitted < last and fitted - cooldown_of(fitted - start) < step:
        fitted += 1
    return fitted

"""A run's schedule: the paper's learning rate (section 5.3) with an optional cool-down, and the steps that keep a
snapshot.
"""

from __future__ import annotations

from training import clock as wall
from training.tasks import TaskSpec


def learning_rate(step: int, d_model: int, warmup: int, factor: float) -> float:
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def cooled_rate(step: int, last: int, cooldown: int, d_model: int, warmup: int, factor: float) -> float:
    """The paper's rate, except over the run's last `cooldown` steps (those after ``last - cooldown``): there it
    falls in a straight line from the paper's rate at ``last - cooldown`` to 0 after the last step (a
    "cool-down", as in warmup-stable-decay schedules: the inverse square root alone never lets the weights
    settle, and the validation loss wavers from one evaluation to the next)."""
    begin = last - cooldown
    if cooldown <= 0 or step <= begin:
        return learning_rate(step, d_model, warmup, factor)
    return learning_rate(begin, d_model, warmup, factor) * (last - step + 1) / (cooldown + 1)


SNAPSHOT_FRACTIONS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)


def snapshot_steps(start: int, max_steps: int, fractions: tuple[float, ...] = SNAPSHOT_FRACTIONS) -> list[int]:
    """The steps of a run (`start` .. `start + max_steps`) at which it keeps a snapshot: 0, 1 %, 3 % … of it."""
    return sorted({start + round(f * max_steps) for f in fractions})


def spec_cooldown(spec: TaskSpec, steps: int) -> int:
    """The run's cool-down in steps for a run of `steps` steps (training.clock.cooldown_steps of the task's)."""
    return wall.cooldown_steps(spec.cooldown, spec.cooldown_share, steps)


def planned_snapshots(spec: TaskSpec, start: int, last: int) -> set[int]:
    """The steps of a run from `start` to `last` that keep a snapshot (see snapshot_steps, and spec.snapshot_every)."""
    snapshots = set(snapshot_steps(start, last - start))
    if spec.snapshot_every:
        snapshots |= set(range(start, last + 1, spec.snapshot_every))
    return snapshots

"""The budget's plan as pure functions (training/clock.py): each rule at its edge, without training a model."""

from __future__ import annotations

import pytest

from training.clock import cooldown_steps, cooling, refitted_last, speed_since


def share_of_a_fifth(steps: int) -> int:
    return cooldown_steps(0, 0.2, steps)


def test_the_cool_down_is_the_tasks_own_or_its_share_whichever_is_longer_and_never_more_than_the_run() -> None:
    assert cooldown_steps(30, 0.2, 100) == 30, "the task's own is longer than a fifth of 100"
    assert cooldown_steps(30, 0.2, 150) == 30 == cooldown_steps(30, 0.2, 149), "at the edge both are 30"
    assert cooldown_steps(30, 0.2, 160) == 32, "a fifth of 160 is longer"
    assert cooldown_steps(30, 0.2, 20) == 20, "never more than the run"


def test_the_speed_since_the_last_fit_leaves_out_the_validation_just_made() -> None:
    assert speed_since((50, 100.0), 100, 110.0, 5.0) == pytest.approx(0.1), "10 s, 5 of them the validation"
    assert speed_since((50, 100.0), 100, 110.0, 0.0) == pytest.approx(0.2)
    assert speed_since((50, 100.0), 100, 101.0, 5.0) == 0.0, "a validation longer than the wait: no negative speed"


def test_a_run_cools_from_the_first_step_of_its_cool_down() -> None:
    assert not cooling(79, 100, 20)
    assert cooling(80, 100, 20)


def test_a_cooling_run_keeps_its_last_step_whatever_the_budget_holds() -> None:
    assert (
        refitted_last(start=0, cap=1000, last=100, cooldown=20, step=80, more=500, cooldown_of=share_of_a_fifth) == 100
    )
    assert (
        refitted_last(start=0, cap=1000, last=100, cooldown=20, step=79, more=500, cooldown_of=share_of_a_fifth) == 579
    )


def test_a_refit_never_plans_past_the_tasks_steps() -> None:
    assert refitted_last(start=10, cap=110, last=60, cooldown=10, step=40, more=80, cooldown_of=share_of_a_fifth) == 110
    assert refitted_last(start=10, cap=110, last=60, cooldown=10, step=40, more=69, cooldown_of=share_of_a_fifth) == 109


def test_a_shorter_plan_is_lengthened_until_its_cool_down_begins_at_the_refit() -> None:
    """At step 100 the budget holds 10 more steps: a run ending at 110 would have cooled from step 88 (a fifth of
    110 is 22), before this step. The plan is lengthened to 125, the first whose cool-down (25 steps) begins at 100."""
    last = refitted_last(start=0, cap=1000, last=400, cooldown=80, step=100, more=10, cooldown_of=share_of_a_fifth)
    assert last == 125 and last - share_of_a_fifth(last) == 100
    assert 124 - share_of_a_fifth(124) < 100, "one step shorter would have cooled before the refit"


def test_a_lengthened_plan_never_grows_past_the_plan_it_replaces() -> None:
    """A cool-down of its own (10 steps, not a fifth): at step 85 a fifth's cool-down would need a run of 106 steps to
    begin here; the lengthening stops at the current plan's 100 (the guard stops what still overruns)."""
    assert refitted_last(start=0, cap=1000, last=100, cooldown=10, step=85, more=0, cooldown_of=share_of_a_fifth) == 100

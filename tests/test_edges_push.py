"""The push's bounds at their edges (live/push.py, its public behaviour): a session asked again while its rerun is
under way restarts in the one place it holds, never a second; and MAX_FOLLOWERS followers at most, where a
session already followed still draws again and a place freed is taken."""

from __future__ import annotations

from live.push import MAX_FOLLOWERS, Followers


class Class:
    def __init__(self) -> None:
        self.version: int | None = 1

    def read(self, code: str) -> int | None:
        return self.version


def rerun_log(log: list[str], name: str):
    return lambda whole=False: log.append(name) or True


def test_a_session_asked_again_mid_run_keeps_its_one_place_and_leaves_the_other_free() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=3600, running=2)
    for name in ("s1", "s2", "s3"):
        followers.drawn(name, "ABCDE", "version", 1, rerun_log(log, name))
    cls.version = 2
    assert followers.tick() == 2 and log == ["s1", "s2"]
    followers.ran("s2")  # s1's run is still under way: it holds one of the two places
    cls.version = 3
    # s1 first in turn: asked again in the place it holds, so the free place still goes to the next (s2), and s3
    # waits: one place a session, whatever the number of asks
    assert followers.tick() == 2 and log[-2:] == ["s1", "s2"]
    assert followers.tick() == 0


def test_at_most_max_followers_a_followed_session_draws_again_and_a_freed_place_is_taken() -> None:
    cls, log = Class(), []
    followers = Followers({"version": cls.read}, tick_s=3600, running=MAX_FOLLOWERS + 1)
    for i in range(MAX_FOLLOWERS):
        followers.drawn(f"s{i}", "ABCDE", "version", 1, rerun_log(log, f"s{i}"))
    assert len(followers) == MAX_FOLLOWERS
    followers.drawn("late", "ABCDE", "version", 1, rerun_log(log, "late"))
    assert len(followers) == MAX_FOLLOWERS  # one past the bound: drawn, not told
    cls.version = 2
    followers.drawn("s0", "ABCDE", "version", 2, rerun_log(log, "s0"))  # at the bound, a follower draws again
    assert followers.tick() == MAX_FOLLOWERS - 1 and "s0" not in log and "late" not in log
    followers.left("s1")
    followers.drawn("late", "ABCDE", "version", 1, rerun_log(log, "late"))  # s1's place
    assert len(followers) == MAX_FOLLOWERS
    assert followers.tick() == 1 and log[-1] == "late"

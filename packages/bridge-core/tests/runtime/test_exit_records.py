from typing import Any

import pytest
from bridge_core.runtime._docker_events import DockerEvents
from bridge_core.runtime._exit_records import EventFollower
from bridge_core.runtime._podman_events import ContainerEvents
from bridge_core.runtime.base import SandboxExit


def _followers() -> list[EventFollower]:
    # Never started: events are handed to _record as the reader thread would.
    return [ContainerEvents("unix:///nonexistent.sock", "1:2"), DockerEvents(["docker"], "1:2")]


def _death(follower: EventFollower, name: str, code: object, time: int = 0) -> dict[str, Any]:
    attributes = {"name": name, follower.exit_code_key: code}
    return {"Action": follower.died, "time": time, "Actor": {"Attributes": attributes}}


@pytest.mark.parametrize("follower", _followers(), ids=["podman", "docker"])
def test_each_engines_death_event_records_the_exit_code_of_a_followed_container(
    follower: EventFollower,
) -> None:
    follower.follow("a")
    follower.follow("b")
    follower._record(_death(follower, "a", "137"))
    follower._record(_death(follower, "b", 3))
    follower._record(_death(follower, "unfollowed", "1"))
    assert (follower.exit_code("a"), follower.exit_code("b")) == (137, 3)
    assert not follower.following("unfollowed")


@pytest.mark.parametrize("follower", _followers(), ids=["podman", "docker"])
def test_other_actions_malformed_codes_and_non_objects_record_nothing(
    follower: EventFollower,
) -> None:
    follower.follow("a")
    follower._record({**_death(follower, "a", "1"), "Action": "start"})
    follower._record(_death(follower, "a", "x1"))
    follower._record(_death(follower, "a", ""))
    follower._record(["not", "an", "event"])
    assert follower.exit_code("a") is None


def test_an_event_moves_the_replay_point_only_forward() -> None:
    follower = _followers()[0]
    start = follower._since
    follower._record(_death(follower, "a", "0", time=start + 100))
    follower._record(_death(follower, "a", "0", time=start - 100))
    assert follower._since == start + 98  # two seconds replayed: event times are whole seconds


async def test_a_removed_container_ends_with_its_recorded_code_and_the_oom_verdict() -> None:
    follower = _followers()[1]
    follower.follow("gone")
    follower._record(_death(follower, "gone", "137"))
    asked: list[int | None] = []

    async def oom_killed(exit_code: int | None) -> bool:
        asked.append(exit_code)
        return True

    assert await follower.sandbox_exit("gone", None, oom_killed) == SandboxExit(False, 137, True)
    assert asked == [137]


async def test_an_engines_own_oom_report_is_believed_without_asking_the_cgroup() -> None:
    async def never(exit_code: int | None) -> bool:
        raise AssertionError("the cgroup was asked")

    follower = _followers()[0]
    state = {"Running": False, "ExitCode": 137, "OOMKilled": True}
    assert await follower.sandbox_exit("a", state, never) == SandboxExit(False, 137, True)
    assert await follower.sandbox_exit("a", {"Running": True}, never) == SandboxExit(True)

"""UpstreamPool against the probe MCP server run as a real subprocess."""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.abc import TaskStatus
from bridge_core.proxy import (
    ProxyOptions,
    UnknownServer,
    UpstreamCrashed,
    UpstreamPool,
    UpstreamRPCError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from bridge_core.servers import ServerSpec

from .conftest import FakeClock, ProbeFactory, exited


def _text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    assert block["type"] == "text"
    text = block["text"]
    assert isinstance(text, str)
    return text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _server_pid(pool: UpstreamPool, server: str = "probe") -> int:
    report = json.loads(_text(await pool.call_tool(server, "env")))
    return int(report["pid"])


async def test_calls_to_one_server_are_in_flight_at_the_same_time(probe: ProbeFactory) -> None:
    results: list[str] = []
    sleeps: list[dict[str, Any]] = []
    async with UpstreamPool([probe()]) as pool:
        await pool.list_tools("probe")

        async def meet() -> None:
            # Each rendezvous answers only once all three are on the server together.
            results.append(
                _text(await pool.call_tool("probe", "rendezvous", {"key": "k", "count": 3}))
            )

        async def nap() -> None:
            result = await pool.call_tool("probe", "sleep", {"seconds": 0.3})
            assert isinstance(result.get("structuredContent"), dict)
            sleeps.append(result["structuredContent"])

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(meet)
                    tg.start_soon(nap)
    assert results == ["met 3"] * 3
    assert max(s["started"] for s in sleeps) < min(s["ended"] for s in sleeps)


async def test_call_past_its_timeout_fails_clearly_and_is_cancelled_upstream(
    probe: ProbeFactory,
) -> None:
    async with UpstreamPool([probe()], ProxyOptions(call_timeout=0.3)) as pool:
        with pytest.raises(UpstreamTimeout) as caught:
            await pool.call_tool("probe", "sleep", {"seconds": 30})
        assert (caught.value.server, caught.value.tool, caught.value.timeout) == (
            "probe",
            "sleep",
            0.3,
        )
        with anyio.fail_after(10):
            seen = await pool.call_tool("probe", "wait_cancelled", {"count": 1}, call_timeout=10)
        assert _text(seen) == "1"


async def test_cancelling_the_caller_cancels_its_upstream_call(probe: ProbeFactory) -> None:
    async with UpstreamPool([probe()]) as pool:
        await pool.list_tools("probe")
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.call_tool, "probe", "hang")
            await anyio.wait_all_tasks_blocked()  # the request is written, awaiting its answer
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            seen = await pool.call_tool("probe", "wait_cancelled", {"count": 1})
        assert _text(seen) == "1"


async def test_server_exit_fails_in_flight_calls_with_status_and_stderr_then_next_call_restarts(
    probe: ProbeFactory,
) -> None:
    options = ProxyOptions(backoff_initial=0.2)  # the restart waits out a real backoff
    failures: list[BaseException] = []
    async with UpstreamPool([probe()], options) as pool:
        first_pid = await _server_pid(pool)

        async def call(tool: str, args: dict[str, Any]) -> None:
            try:
                await pool.call_tool("probe", tool, args)
            except UpstreamCrashed as exc:
                failures.append(exc)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "hang", {})
                await pool.call_tool("probe", "echo", {"text": "warm"})  # hang is now in flight
                tg.start_soon(call, "crash", {"status": 7, "message": "disk on fire"})
            second_pid = await _server_pid(pool)

    assert len(failures) == 2
    for exc in failures:
        assert isinstance(exc, UpstreamCrashed)
        assert exc.exit_status == 7
        assert "disk on fire" in exc.stderr_tail
        assert "'probe' exited with status 7" in str(exc)
    assert second_pid != first_pid


async def test_repeated_start_failures_fail_fast_until_the_cooldown_passes(
    probe: ProbeFactory,
) -> None:
    clock = FakeClock()
    options = ProxyOptions(backoff_initial=0.0, max_failures=2, cooldown=60.0, clock=clock)
    async with UpstreamPool(
        [probe("--mode", "exit-at-start", "--exit-code", "3")], options
    ) as pool:
        for _ in range(2):
            with pytest.raises(UpstreamCrashed) as crashed:
                await pool.call_tool("probe", "echo", {"text": "x"})
            assert crashed.value.exit_status == 3
            assert "refusing to start" in crashed.value.stderr_tail
        with pytest.raises(UpstreamUnavailable) as fast:
            await pool.call_tool("probe", "echo", {"text": "x"})
        assert not isinstance(fast.value, UpstreamCrashed)  # no new start was attempted
        assert "fail fast" in str(fast.value)
        assert not pool.is_running("probe")

        clock.now += 61
        with pytest.raises(UpstreamCrashed):
            await pool.call_tool("probe", "echo", {"text": "x"})  # one new attempt after cooldown


async def test_tools_list_changed_notification_refreshes_the_cached_list(
    probe: ProbeFactory,
) -> None:
    refreshed = anyio.Event()
    seen: list[list[str]] = []
    current_while_relisting: list[bool] = []

    async def on_tools(spec: ServerSpec, tools: list[types.Tool]) -> None:
        seen.append([tool.name for tool in tools])
        if "fresh_tool" in seen[-1]:
            current_while_relisting.append(pool.tools_current("probe"))
            refreshed.set()

    async with UpstreamPool([probe()], on_tools=on_tools) as pool:
        assert pool.tools_current("probe") is False  # not running: no list is current
        assert "fresh_tool" not in [t.name for t in await pool.list_tools("probe")]
        assert pool.tools_current("probe") is True
        await pool.call_tool("probe", "add_tool", {"name": "fresh_tool"})
        with anyio.fail_after(10):
            await refreshed.wait()
        cached = pool.cached_tools("probe")
        assert cached is not None
        assert "fresh_tool" in [t.name for t in cached]
        # Announced as changed, the list was not current until the relisting brought it in.
        assert current_while_relisting == [False]
        assert _text(await pool.call_tool("probe", "echo", {"text": "x"})) == "x"
        assert pool.tools_current("probe") is True


async def test_one_megabyte_result_arrives_whole_and_the_next_call_still_works(
    probe: ProbeFactory,
) -> None:
    async with UpstreamPool([probe()]) as pool:
        huge = await pool.call_tool("probe", "huge", {"size": 1_000_000})
        assert len(_text(huge)) == 1_000_000
        assert _text(await pool.call_tool("probe", "echo", {"text": "after"})) == "after"


async def test_three_hundred_tools_are_listed_across_pages(probe: ProbeFactory) -> None:
    async with UpstreamPool([probe("--tools", "300", "--page-size", "40")]) as pool:
        names = [tool.name for tool in await pool.list_tools("probe")]
        assert len(names) == len(set(names)) == 312
        assert _text(await pool.call_tool("probe", "tool_299", {"value": "v"})) == "tool_299:v"


async def test_is_error_result_is_returned_and_jsonrpc_error_is_raised(probe: ProbeFactory) -> None:
    async with UpstreamPool([probe()]) as pool:
        result = await pool.call_tool("probe", "fail_is_error")
        assert result["isError"] is True
        with pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("probe", "fail_rpc")
        assert (caught.value.server, caught.value.tool, caught.value.code) == (
            "probe",
            "fail_rpc",
            -32603,
        )
        assert _text(await pool.call_tool("probe", "echo", {"text": "still up"})) == "still up"


async def test_server_sees_its_own_env_and_nothing_else_from_the_host(
    probe: ProbeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST_ONLY_SECRET", "must-not-leak")
    specs = [probe(name="a", env={"A_TOKEN": "alpha"}), probe(name="b", env={"B_TOKEN": "beta"})]
    async with UpstreamPool(specs) as pool:
        env_a = json.loads(_text(await pool.call_tool("a", "env")))["env"]
        env_b = json.loads(_text(await pool.call_tool("b", "env")))["env"]
    assert env_a["A_TOKEN"] == "alpha"
    assert env_b["B_TOKEN"] == "beta"
    assert "B_TOKEN" not in env_a
    assert "A_TOKEN" not in env_b
    assert "HOST_ONLY_SECRET" not in env_a
    # Only the SDK's minimal inherited set (plus the interpreter's own locale coercion).
    allowed = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE", "A_TOKEN"}
    assert set(env_a) <= allowed


async def test_aclose_leaves_no_server_process_behind(probe: ProbeFactory) -> None:
    async with UpstreamPool([probe(name="one"), probe(name="two")]) as pool:
        pids = [await _server_pid(pool, "one"), await _server_pid(pool, "two")]
        pids.append(int(_text(await pool.call_tool("two", "spawn_child"))))  # a grandchild
        assert all(_alive(pid) for pid in pids)
        busy = anyio.Event()

        async def hang() -> None:
            busy.set()
            with pytest.raises(UpstreamUnavailable):
                await pool.call_tool("one", "hang")

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang)
            await busy.wait()
            await pool.aclose()
    for pid in pids:
        assert await exited(pid), f"process {pid} outlived the pool"


async def test_junk_on_stdout_before_jsonrpc_does_not_break_the_session(
    probe: ProbeFactory,
) -> None:
    async with UpstreamPool([probe("--mode", "junk-stdout")]) as pool:
        assert _text(await pool.call_tool("probe", "echo", {"text": "fine"})) == "fine"


async def test_server_that_never_answers_initialize_fails_its_start_clearly(
    probe: ProbeFactory,
) -> None:
    async with UpstreamPool([probe("--mode", "no-init")], ProxyOptions(start_timeout=0.5)) as pool:
        with pytest.raises(UpstreamUnavailable) as caught:
            await pool.call_tool("probe", "echo", {"text": "x"})
    assert "failed to start: no answer to initialize within 0.5s" in str(caught.value)


async def test_missing_command_fails_its_start_naming_the_server() -> None:
    spec = ServerSpec(name="ghost", transport="stdio", command="/nonexistent/mcp-ghost")
    async with UpstreamPool([spec]) as pool:
        with pytest.raises(UpstreamUnavailable) as caught:
            await pool.list_tools("ghost")
    assert "'ghost' failed to start" in str(caught.value)
    assert "mcp-ghost" in str(caught.value)


async def test_unknown_server_error_suggests_close_names(probe: ProbeFactory) -> None:
    async with UpstreamPool([probe(name="filesystem"), probe(name="github")]) as pool:
        with pytest.raises(UnknownServer) as caught:
            await pool.call_tool("filesystems", "read_file")
    assert caught.value.suggestions[0] == "filesystem"
    assert not pool.is_running("filesystem")


async def _fails_when_stopped(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """A supervisor with a teardown bug: it raises as the pool stops it."""
    task_status.started()
    try:
        await anyio.sleep_forever()
    finally:
        raise RuntimeError("supervisor teardown failed")


async def _fail_inside_a_pool(spec: ServerSpec, pids: list[int], *, teardown_bug: bool) -> None:
    """Enter a pool, start ``spec``'s server (its pid goes to ``pids``), then fail in the body."""
    async with UpstreamPool([spec]) as pool:
        pids.append(await _server_pid(pool))
        if teardown_bug:
            await pool.task_group.start(_fails_when_stopped)
        raise ValueError("the body failed")


async def test_an_error_in_the_body_and_one_in_a_supervisor_teardown_both_come_out(
    probe: ProbeFactory,
) -> None:
    pids: list[int] = []
    with pytest.raises(BaseExceptionGroup) as caught:
        await _fail_inside_a_pool(probe(), pids, teardown_bug=True)
    assert caught.group_contains(ValueError, match="the body failed")
    assert caught.group_contains(RuntimeError, match="supervisor teardown failed")
    assert await exited(pids[0])


async def test_an_error_in_the_body_comes_out_as_itself_and_stops_the_servers(
    probe: ProbeFactory,
) -> None:
    pids: list[int] = []
    with pytest.raises(ValueError, match="the body failed"):
        await _fail_inside_a_pool(probe(), pids, teardown_bug=False)
    assert await exited(pids[0])

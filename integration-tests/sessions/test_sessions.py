"""The session manager over real podman containers running the real sandbox client.

Every test also gets the ``podman_backend`` fixture's check: no container of ours may be left
once the test ends (so each test proves "no orphan" after the manager closed).
"""

from __future__ import annotations

import ast
import functools
import importlib
import itertools
import time

import anyio
import pytest
from bridge_core.errors import SessionLimitExceeded
from bridge_core.runtime.podman import PodmanBackend
from bridge_core.sessions import ExecutionResult
from bridge_protocol import Stream

from .conftest import MakeManager, our_containers

# The shared conftest of integration-tests (a module named after its path under importlib mode).
_shared = importlib.import_module("integration-tests.conftest")

pytestmark = [pytest.mark.container, pytest.mark.engine]


async def test_variables_imports_and_files_persist_across_executions(
    make_manager: MakeManager,
) -> None:
    async with make_manager() as manager:
        await manager.execute("import json\ncounter = 41\nopen('/tmp/f.txt', 'w').write('kept')")
        result = await manager.execute(
            "counter += 1\nprint(json.dumps(counter), open('/tmp/f.txt').read())"
        )
    assert result.status == "ok", result
    assert result.stdout == "42 kept\n"


async def test_sessions_are_isolated_and_run_in_parallel(make_manager: MakeManager) -> None:
    code = "import time\nstart = time.time()\ntime.sleep(2)\n(start, time.time())"
    results: dict[str, ExecutionResult] = {}

    async def run(name: str) -> None:
        results[name] = await manager.execute(code, session=name, timeout=60)

    async with make_manager() as manager:
        await manager.execute("secret = 'a'", session="a", timeout=60)
        await manager.execute("print(1)", session="b", timeout=60)
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "a")
            tg.start_soon(run, "b")
        isolated = await manager.execute("print('secret' in globals())", session="b")
    (start_a, end_a), (start_b, end_b) = (ast.literal_eval(results[n].value or "") for n in "ab")
    # Both slept at the same time: each one started before the other ended.
    assert start_a < end_b
    assert start_b < end_a
    assert isolated.stdout == "False\n"


async def test_twenty_four_sandboxes_starting_at_once_reuse_their_api_connections(
    make_manager: MakeManager, caplog: pytest.LogCaptureFixture
) -> None:
    # podman-py keeps 10 connections to the API by default: a burst of starts opened the rest,
    # used each once and logged a urllib3 warning per discarded one (26 for 30 starts).
    async with make_manager(max_sessions=24) as manager, anyio.create_task_group() as tg:
        for index in range(24):
            run = functools.partial(manager.execute, f"{index}", session=f"s{index}", timeout=120)
            tg.start_soon(run)
    assert [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()] == []


async def test_executions_in_one_session_run_one_at_a_time_in_order(
    make_manager: MakeManager,
) -> None:
    results: list[ExecutionResult] = []

    async def run(i: int) -> None:
        code = (
            f"import time\nstart = time.time()\ntime.sleep(0.3)\norder.append({i})\n"
            "(start, time.time())"
        )
        results.append(await manager.execute(code, timeout=60))

    async with make_manager() as manager:
        await manager.execute("order = []")
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(run, i)
                await anyio.wait_all_tasks_blocked()
        order = await manager.execute("order")
    assert order.value == "[0, 1, 2]"
    windows = sorted(ast.literal_eval(r.value or "") for r in results)
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start  # no overlap


async def test_warm_pool_serves_the_first_execution_of_a_new_session(
    make_manager: MakeManager,
) -> None:
    async with make_manager(pool_size=1) as manager:
        with anyio.fail_after(60):
            await manager.wait_warm()
        result = await manager.execute("print('warm')", session="brand-new")
        assert manager.stats.pool_hits == 1
        assert manager.stats.pool_misses == 0
    assert result.stdout == "warm\n"


async def test_timeout_on_a_busy_loop_returns_partial_output_and_the_session_survives(
    make_manager: MakeManager,
) -> None:
    async with make_manager() as manager:
        await manager.execute("kept = 'yes'")
        started = manager.stats.sandboxes_started
        busy = "print('partial', flush=True)\nwhile True: pass"
        result = await manager.execute(busy, timeout=2)
        after = await manager.execute("print(kept)")
        assert manager.stats.sandboxes_started == started  # interrupted, not replaced
    assert result.status == "timeout"
    assert result.stdout == "partial\n"
    assert after.stdout == "yes\n"


async def test_timeout_on_code_swallowing_the_interrupt_kills_and_replaces_the_container(
    make_manager: MakeManager, podman_backend: PodmanBackend
) -> None:
    stubborn = (
        "import time\nprint('partial', flush=True)\n"
        "while True:\n"
        "    try:\n        time.sleep(100)\n    except KeyboardInterrupt:\n        pass"
    )
    async with make_manager(interrupt_grace=1.0) as manager:
        await manager.execute("kept = 'yes'")
        (first,) = await our_containers(podman_backend)
        result = await manager.execute(stubborn, timeout=2)
        after = await manager.execute("print('kept' in globals())")
        assert first not in await our_containers(podman_backend)
    assert result.status == "timeout"
    assert result.stdout == "partial\n"
    assert any("killed" in notice for notice in result.notices)
    assert after.status == "ok"
    assert after.stdout == "False\n"
    assert any("reset" in notice for notice in after.notices)


class FirstOutput:
    def __init__(self) -> None:
        self.seen = anyio.Event()

    async def on_output(self, stream: Stream, text: str) -> None:
        self.seen.set()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        pass


async def test_cancelling_the_caller_interrupts_the_code_and_keeps_the_session(
    make_manager: MakeManager,
) -> None:
    listener = FirstOutput()
    async with make_manager() as manager:
        await manager.execute("kept = 'yes'")
        started = manager.stats.sandboxes_started
        async with anyio.create_task_group() as tg:
            code = "import time\nprint('running', flush=True)\ntime.sleep(60)\nkept = 'no'"
            tg.start_soon(lambda: manager.execute(code, timeout=120, listener=listener))
            with anyio.fail_after(30):
                await listener.seen.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):  # the interrupted code gave the session back
            after = await manager.execute("print(kept)")
        assert manager.stats.sandboxes_started == started
    assert after.stdout == "yes\n"
    assert after.notices == ()


async def test_oom_is_reported_as_memory_limit_exceeded_and_the_state_loss_is_told(
    make_manager: MakeManager,
) -> None:
    async with make_manager() as manager:
        await manager.execute("kept = 'yes'")
        result = await manager.execute(
            "hog = bytearray(600 * 1024 * 1024)\nhog[::4096] = b'x' * len(hog[::4096])"
        )
        after = await manager.execute("print('kept' in globals())")
    assert result.status == "crashed"
    assert result.error is not None
    assert "memory limit 256m exceeded" in result.error.message
    assert after.stdout == "False\n"
    assert any("memory limit 256m exceeded" in n for n in after.notices)


async def test_container_killed_from_outside_is_reported_and_replaced(
    make_manager: MakeManager, podman_backend: PodmanBackend
) -> None:
    async with make_manager() as manager:
        await manager.execute("kept = 'yes'")
        (name,) = await our_containers(podman_backend)
        await anyio.run_process(["podman", "kill", "--signal", "KILL", name])
        after = await manager.execute("print('kept' in globals())")
    assert after.status == "ok"
    assert after.stdout == "False\n"
    assert any("state was lost" in n for n in after.notices)


async def test_exceeding_max_sessions_is_a_clear_error(make_manager: MakeManager) -> None:
    async with make_manager(max_sessions=1) as manager:
        await manager.execute("print(1)", session="one")
        with pytest.raises(SessionLimitExceeded, match=r"\[sessions\] max in bridge\.toml"):
            await manager.execute("print(2)", session="two")


async def test_idle_session_expires_its_container_stops_and_the_next_call_is_told(
    make_manager: MakeManager, podman_backend: PodmanBackend
) -> None:
    async with make_manager(idle_ttl=1.0) as manager:
        await manager.execute("kept = 'yes'", session="idle")
        with anyio.fail_after(30):
            await manager._expiry.wait()
            while await our_containers(podman_backend):  # noqa: ASYNC110 (polls podman)
                await anyio.sleep(0.1)  # the stop runs in the background; bounded above
        after = await manager.execute("print('kept' in globals())", session="idle")
    assert after.stdout == "False\n"
    assert any("idle" in n for n in after.notices)


async def test_reset_gives_a_fresh_namespace_and_acknowledges_it(make_manager: MakeManager) -> None:
    async with make_manager() as manager:
        await manager.execute("kept = 'yes'")
        result = await manager.execute("print('kept' in globals())", reset=True)
    assert result.stdout == "False\n"
    assert any("reset as requested" in n for n in result.notices)


async def test_output_over_the_cap_has_a_marker_and_the_full_text_is_readable_next_time(
    make_manager: MakeManager,
) -> None:
    async with make_manager(output_cap=10_000) as manager:
        result = await manager.execute("for i in range(200_000):\n    print(i)")
        assert result.truncated
        path = result.full_output_path
        assert path is not None
        check = await manager.execute(
            f"lines = open({path!r}).read().splitlines()\nprint(len(lines), lines[0], lines[-1])"
        )
    total = sum(len(f"{i}\n") for i in range(200_000))
    assert result.stdout.startswith("0\n1\n2\n")
    assert result.stdout.endswith("199998\n199999\n")
    assert f"{total:,} characters" in result.stdout
    assert check.stdout == "200000 0 199999\n"


async def test_ten_megabytes_of_output_return_a_capped_result(make_manager: MakeManager) -> None:
    async with make_manager(output_cap=64 * 1024) as manager:
        result = await manager.execute("import sys\nsys.stdout.write('x' * (10 * 1024 * 1024))")
    assert result.status == "ok"
    assert result.truncated
    assert len(result.stdout) < 64 * 1024 + 500


async def test_persist_false_gives_a_fresh_container_to_each_execution(
    make_manager: MakeManager, podman_backend: PodmanBackend
) -> None:
    async with make_manager(persist=False) as manager:
        await manager.execute("kept = 'yes'")
        after = await manager.execute("print('kept' in globals())")
    assert after.stdout == "False\n"


async def test_no_container_is_left_after_cancellation_during_start(
    make_manager: MakeManager, podman_backend: PodmanBackend
) -> None:
    began = time.time()
    with anyio.move_on_after(0.5):  # the pool's containers are still starting at this point
        async with make_manager(pool_size=2):
            await anyio.sleep_forever()
    # Killed (or removed, if not started yet) on cancellation; podman's auto-removal does the rest.
    await _shared.wait_until_removed(await our_containers(podman_backend), since=began)
    assert await our_containers(podman_backend) == set()


async def test_no_container_is_left_after_the_manager_closes(
    make_manager: MakeManager, podman_backend: PodmanBackend
) -> None:
    async with make_manager(pool_size=1) as manager:
        await manager.execute("print(1)", session="a")
        await manager.execute("print(2)", session="b")
        assert len(await our_containers(podman_backend)) >= 2
        closing = time.time()
    # Killed at once by the manager; podman's auto-removal deletes them.
    await _shared.wait_until_removed(await our_containers(podman_backend), since=closing)
    assert await our_containers(podman_backend) == set()

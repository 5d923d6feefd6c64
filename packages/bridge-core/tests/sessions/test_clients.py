"""Sessions belong to clients: names per client, limits per client, a client's end stops them."""

from __future__ import annotations

import anyio
import pytest
from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions import ExecutionResult

from .conftest import Harness, settle


async def test_each_client_has_its_own_sessions_under_the_same_names(harness: Harness) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=alice", client="alice")
        await manager.execute("set:a=alice-notes", session="notes", client="alice")
        bob_default = await manager.execute("get:a", client="bob")
        bob_notes = await manager.execute("get:a", session="notes", client="bob")
        alice_default = await manager.execute("get:a", client="alice")
        assert manager.session_names("alice") == ["default", "notes"]
        assert manager.session_names("bob") == ["default", "notes"]
        assert manager.session_names() == []  # the stdio client (None) is another client
    assert bob_default.stdout == bob_notes.stdout == "<unset>\n"
    assert alice_default.stdout == "alice\n"


async def test_a_client_does_not_wait_behind_another_clients_running_code(
    harness: Harness,
) -> None:
    results: list[ExecutionResult] = []

    async def alice() -> None:
        results.append(await manager.execute("hold:alice", client="alice", timeout=10))

    async with harness.manager() as manager:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(alice)
                await harness.runtime.holding("alice").wait()
                bob = await manager.execute("print:bob", client="bob")
                assert bob.stdout == "bob\n"
                assert results == []  # alice still runs
                harness.runtime.release("alice").set()


async def test_the_per_client_limit_names_only_the_callers_sessions_and_its_setting(
    harness: Harness,
) -> None:
    async with harness.manager(max_sessions=8, max_sessions_per_client=2) as manager:
        await manager.execute("print:1", session="private-a", client="alice")
        await manager.execute("print:2", session="private-b", client="alice")
        with pytest.raises(SessionLimitExceeded) as raised:
            await manager.execute("print:3", session="c", client="alice")
        # Another client is not affected by alice's limit.
        assert (await manager.execute("print:bob", client="bob")).ok
    async with harness.manager(max_sessions=1) as small:
        await small.execute("print:x", session="secret-name", client="alice")
        with pytest.raises(SessionLimitExceeded) as bob_at_global:
            await small.execute("print:y", client="bob")
    message = str(raised.value)
    assert "[sessions] max_per_client" in message
    assert "private-a, private-b" in message
    # The global limit's message never shows bob another client's session names.
    assert "[sessions] max" in str(bob_at_global.value)
    assert "secret-name" not in str(bob_at_global.value)


async def test_the_per_client_limit_does_not_apply_to_the_stdio_client(harness: Harness) -> None:
    async with harness.manager(max_sessions=3, max_sessions_per_client=1) as manager:
        for name in ("a", "b", "c"):
            assert (await manager.execute("print:x", session=name)).ok


async def test_closing_a_client_stops_its_sandboxes_and_leaves_the_others(
    harness: Harness,
) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1", client="gone")
        await manager.execute("set:a=1", session="other", client="gone")
        await manager.execute("set:a=2", client="stays")
        assert manager.holds_sessions("gone")
        stays = {s.name for s in harness.runtime.running.values()}
        closed = await manager.close_client("gone")
        assert closed == ["default", "other"]
        assert not manager.holds_sessions("gone")
        assert len(harness.runtime.killed) == 2
        assert set(harness.runtime.killed) < stays
        kept = await manager.execute("get:a", client="stays")
        fresh = await manager.execute("get:a", client="gone")
    assert kept.stdout == "2\n"
    assert fresh.stdout == "<unset>\n"


async def test_an_execution_waiting_for_a_closed_clients_session_starts_no_sandbox(
    harness: Harness,
) -> None:
    results: list[ExecutionResult] = []

    async def run(code: str) -> None:
        results.append(await manager.execute(code, client="gone", timeout=10))

    async with harness.manager() as manager:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "hold:first")
                await harness.runtime.holding("first").wait()
                tg.start_soon(run, "print:second")  # waits for the session's turn
                await anyio.wait_all_tasks_blocked()
                await manager.close_client("gone")
        await settle(lambda: not harness.runtime.running)
    assert [r.status for r in results] == ["crashed", "unavailable"]
    assert harness.runtime.starts_begun == 1

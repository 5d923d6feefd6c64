"""Timeouts, cancellation, crashes and protocol violations, against the fake runtime."""

from __future__ import annotations

import anyio
from bridge_protocol import CancelCall, Interrupt

from .conftest import Harness, settle


async def test_timeout_interrupts_returns_partial_output_and_keeps_the_session(
    harness: Harness,
) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("set:a=1\nprint:partial\nsleep:1000", timeout=0.2)
        after = await manager.execute("get:a")
        killed_before_shutdown = list(harness.runtime.killed)  # shutdown itself kills
    assert result.status == "timeout"
    assert result.stdout == "partial\n"
    assert result.error is not None
    assert result.error.type == "TimeoutError"
    assert any("interrupted" in n for n in result.notices)
    assert after.stdout == "1\n"
    assert after.notices == ()
    assert killed_before_shutdown == []


async def test_timeout_on_code_ignoring_the_interrupt_kills_and_replaces_the_container(
    harness: Harness,
) -> None:
    async with harness.manager(interrupt_grace=0.2) as manager:
        await manager.execute("set:a=1")
        first = harness.runtime.only().name
        result = await manager.execute("print:partial\nstubborn:forever", timeout=0.2)
        after = await manager.execute("get:a")
    assert result.status == "timeout"
    assert result.stdout == "partial\n"
    assert any("killed" in n and "reset" in n for n in result.notices)
    assert first in harness.runtime.killed
    assert after.stdout == "<unset>\n"
    assert any("state" in n or "gone" in n for n in after.notices)


async def test_cancelling_the_caller_interrupts_the_code_and_propagates(harness: Harness) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1")
        sandbox = harness.runtime.only()
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(manager.execute, "hold:run")
                with anyio.fail_after(5):
                    await harness.runtime.holding("run").wait()
                tg.cancel_scope.cancel()
            with anyio.fail_after(1):
                await sandbox.interrupted.wait()
        after = await manager.execute("get:a")
        killed_before_shutdown = list(harness.runtime.killed)  # shutdown itself kills
    assert not scope.cancelled_caught  # the cancellation was ours, and it propagated to tg
    assert any(isinstance(m, Interrupt) for m in sandbox.received)
    assert after.stdout == "1\n"
    assert killed_before_shutdown == []


async def test_cancelled_code_that_ignores_the_interrupt_is_killed_and_next_call_is_told(
    harness: Harness,
) -> None:
    async with harness.manager(interrupt_grace=0.2) as manager:
        await manager.execute("set:a=1")
        first = harness.runtime.only().name
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.execute, "stubborn:x")
            await settle(lambda: len(harness.runtime.executions) == 2)
            tg.cancel_scope.cancel()
        after = await manager.execute("get:a")
    assert first in harness.runtime.killed
    assert after.stdout == "<unset>\n"
    assert any("cancelled" in n for n in after.notices)


async def test_crash_reports_the_exit_status_and_the_next_execution_says_state_was_lost(
    harness: Harness,
) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1")
        crashed = await manager.execute("print:before\ncrash:139")
        after = await manager.execute("get:a")
    assert crashed.status == "crashed"
    assert crashed.stdout == "before\n"
    assert crashed.error is not None
    assert "container exited with status 139" in crashed.error.message
    assert after.status == "ok"
    assert after.stdout == "<unset>\n"
    assert any("status 139" in n for n in after.notices)


async def test_oom_kill_is_reported_as_memory_limit_exceeded(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("oom")
    assert result.status == "crashed"
    assert result.error is not None
    assert "memory limit 512m exceeded" in result.error.message


async def test_container_killed_from_outside_while_idle_is_reported_next_time(
    harness: Harness,
) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1")
        sandbox = harness.runtime.only()
        harness.runtime.kill_from_outside(sandbox)
        await settle(sandbox.finished.is_set)
        await anyio.wait_all_tasks_blocked()  # the manager's reader sees the end of the channel
        after = await manager.execute("get:a")
    assert after.status == "ok"
    assert after.stdout == "<unset>\n"
    assert any("killed from outside" in n for n in after.notices)


async def test_protocol_violation_ends_only_that_session(harness: Harness) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1", session="good")
        bad = await manager.execute("print:hi\ngarbage\nsleep:1000", session="bad")
        good = await manager.execute("get:a", session="good")
        again = await manager.execute("print:back", session="bad")
    assert bad.status == "crashed"
    assert bad.error is not None
    assert "protocol violation" in bad.error.message
    assert good.stdout == "1\n"
    assert again.stdout == "back\n"


async def test_cancel_call_from_the_sandbox_cancels_the_gateway_call(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("call:srv.slow", timeout=0.3)
    assert result.status == "timeout"
    assert harness.gateway.cancelled == ["slow"]
    sandbox = next(iter(harness.runtime.sandboxes.values()))
    assert sandbox.runtime is harness.runtime
    # The fake abandons its pending call on interrupt, like the real client.
    assert not any(isinstance(m, CancelCall) for m in sandbox.received)


async def test_ending_the_execution_cancels_its_calls_in_flight(harness: Harness) -> None:
    async with harness.manager(interrupt_grace=0.2) as manager:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.execute, "call:srv.slow")
            with anyio.fail_after(5):
                await harness.gateway.slow_started.wait()
            tg.cancel_scope.cancel()
        await settle(lambda: harness.gateway.cancelled == ["slow"])

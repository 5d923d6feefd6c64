"""Each sandbox's calls in flight and their bytes are bounded on the host: past either bound a
call is refused at once (``TOO_MANY_CALLS``), never forwarded, and the room comes back when the
calls end. Real frames through the fake runtime of ``conftest``."""

from __future__ import annotations

from bridge_protocol import ErrorCode, Reply

from .conftest import Harness, settle

TOO_MANY = int(ErrorCode.TOO_MANY_CALLS)


async def test_calls_past_the_count_bound_are_refused_and_never_reach_the_gateway(
    harness: Harness,
) -> None:
    async with harness.manager(max_calls_in_flight=3) as manager:
        flood = await manager.execute("fan:5:2:files.slow:10")
        after = await manager.execute("call:files.ok")
    assert flood.stdout == f"fault {TOO_MANY} x2\n"
    assert [tool for _, _, tool in harness.gateway.calls].count("slow") == 3
    assert harness.gateway.cancelled == ["slow"] * 3  # the execution's end freed the room
    assert "reply" in after.stdout


async def test_calls_past_the_byte_bound_are_refused_but_one_large_call_alone_runs(
    harness: Harness,
) -> None:
    async with harness.manager(max_call_bytes=1000) as manager:
        flood = await manager.execute("fan:3:2:files.slow:600")
        alone = await manager.execute("fan:1:1:files.ok:5000")
    assert flood.stdout == f"fault {TOO_MANY} x2\n"
    assert alone.stdout == "ok x1\n"


async def test_the_refusal_names_the_fixed_bound_and_the_remedy(harness: Harness) -> None:
    async with harness.manager(max_calls_in_flight=1) as manager:
        await manager.execute("fan:2:1:files.slow:10")
        [live] = list(manager._fleet.live)
        await settle(lambda: live.budget.calls == 0)  # the execution's end cancelled the call
        sent = [m for m in harness.runtime.only().received if isinstance(m, Reply) and m.fault]
    fault = sent[0].fault
    assert fault is not None
    assert fault.code == TOO_MANY
    assert "allows (1, a fixed bound)" in fault.message
    assert "files.slow" in fault.message
    assert "asyncio.Semaphore" in fault.message
    assert fault.data["max_calls_in_flight"] == 1
    assert live.budget.bytes == 0

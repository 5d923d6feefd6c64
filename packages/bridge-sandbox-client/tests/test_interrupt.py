"""Interrupts: KeyboardInterrupt semantics for plain and async code; the session survives."""

from __future__ import annotations

from typing import Any

from bridge_protocol import Call, Interrupt, Output, Ping, Pong, Result


def _interrupt_after_marker(host: Any, code: str) -> Result:
    """Run ``code``, which prints 'started' once it is inside the blocking part, then interrupt."""
    execution_id = host.submit(code)
    while True:
        message = host.next_message()
        assert message is not None
        if isinstance(message, Output) and "started" in message.text:
            break
    host.send(Interrupt(execution_id=execution_id))
    result = host.wait_for(Result)
    assert isinstance(result, Result)
    assert result.execution_id == execution_id
    return result


def test_busy_loop_in_plain_code_is_interrupted_and_namespace_survives(host: Any) -> None:
    host.execute("kept = 'still here'")
    result = _interrupt_after_marker(host, "print('started')\nwhile True:\n    pass")
    assert result.status == "interrupted"
    assert result.error is not None
    assert result.error.type == "KeyboardInterrupt"
    assert "<cell 2>" in result.error.traceback
    assert host.execute("kept").result.value == "'still here'"


def test_blocking_sleep_in_plain_code_is_interrupted(host: Any) -> None:
    result = _interrupt_after_marker(host, "import time\nprint('started')\ntime.sleep(100)")
    assert result.status == "interrupted"


def test_awaiting_code_is_interrupted_by_task_cancellation(host: Any) -> None:
    result = _interrupt_after_marker(
        host, "import asyncio\nprint('started')\nawait asyncio.sleep(100)"
    )
    assert result.status == "interrupted"
    assert result.error is not None
    assert result.error.type == "KeyboardInterrupt"
    # The loop is still usable.
    assert host.execute("import asyncio\nawait asyncio.sleep(0, 'ok')").result.value == "'ok'"


def test_busy_loop_inside_async_code_is_interrupted(host: Any) -> None:
    result = _interrupt_after_marker(
        host, "import asyncio\nawait asyncio.sleep(0)\nprint('started')\nwhile True:\n    pass"
    )
    assert result.status == "interrupted"
    assert host.execute("import asyncio\nawait asyncio.sleep(0, 1)").result.value == "1"


def test_ping_is_answered_while_code_runs(host: Any) -> None:
    execution_id = host.submit("print('started')\nwhile True:\n    pass")
    while True:
        message = host.next_message()
        if isinstance(message, Output):
            break
    host.send(Ping(nonce=99))
    pong = host.wait_for(Pong)
    assert isinstance(pong, Pong)
    assert pong.nonce == 99
    host.send(Interrupt(execution_id=execution_id))
    assert host.wait_for(Result).status == "interrupted"


def test_interrupt_abandons_tool_calls_in_flight_with_cancel_frames(host: Any) -> None:
    execution_id = host.submit("await mcp_servers['media'].hang()")
    call = host.wait_for(Call)
    host.send(Interrupt(execution_id=execution_id))
    result = host.wait_for(Result)
    assert result.status == "interrupted"
    assert host.cancel_seen.wait(20)
    assert host.cancelled == [call.call_id]


def test_interrupt_abandons_a_blocking_sync_call(host: Any) -> None:
    execution_id = host.submit("mcp_servers['media'].hang.sync()")
    call = host.wait_for(Call)
    host.send(Interrupt(execution_id=execution_id))
    assert host.wait_for(Result).status == "interrupted"
    assert host.cancel_seen.wait(20)
    assert host.cancelled == [call.call_id]


def test_cancelled_wait_for_sends_a_cancel_frame(host: Any) -> None:
    run = host.execute(
        "import asyncio\n"
        "try:\n"
        "    await asyncio.wait_for(mcp_servers['media'].hang(), 0.05)\n"
        "except TimeoutError:\n"
        "    print('timed out')"
    )
    assert run.stdout == "timed out\n"
    assert host.cancel_seen.wait(20)
    assert len(host.cancelled) == 1


def test_interrupt_for_another_execution_id_is_ignored(host: Any) -> None:
    host.send(Interrupt(execution_id="not-running"))
    assert host.execute("1 + 1").result.status == "ok"


def test_interrupt_that_arrives_before_the_execution_starts_still_stops_it(host: Any) -> None:
    # Both frames are sent back to back: the reader thread usually sees the interrupt before
    # the main thread has started the execution.
    host.send(Interrupt(execution_id="x1"))
    result = host.collect(host.submit("while True:\n    pass"))
    assert result.result.status == "interrupted"


def test_interrupt_works_after_user_code_ignored_sigint(host: Any) -> None:
    host.execute("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)")
    result = _interrupt_after_marker(host, "print('started')\nwhile True:\n    pass")
    assert result.status == "interrupted"


def test_interrupt_during_a_large_send_never_leaves_half_a_frame(host: Any) -> None:
    from bridge_protocol import Display

    # Each 12 MB image takes many socket writes: interrupts land in the middle of sends.
    for _ in range(3):
        execution_id = host.submit(
            "big = b'\\x89PNG\\r\\n\\x1a\\n' + bytes(12_000_000)\n"
            "while True:\n"
            "    runtime.display_image(big)"
        )
        host.wait_for(Display)
        host.send(Interrupt(execution_id=execution_id))
        result = host.wait_for(Result)
        assert result.status == "interrupted"
        assert host.execute("'in sync'").result.value == "'in sync'"


def test_an_interrupt_the_code_swallows_is_sent_again_until_it_stops(host: Any) -> None:
    # One SIGINT can be lost (raised inside a finalizer, or caught by a bare except): the
    # interrupt repeats while the execution runs, so a loop that swallows the first one stops.
    code = (
        "caught = 0\nprint('started')\nwhile True:\n    try:\n        while True:\n"
        "            pass\n    except KeyboardInterrupt:\n        caught += 1\n"
        "        if caught >= 3:\n            raise\n"
    )
    result = _interrupt_after_marker(host, code)
    assert result.status == "interrupted"
    assert host.execute("caught").result.value == "3"

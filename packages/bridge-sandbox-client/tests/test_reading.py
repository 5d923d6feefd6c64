"""Reading the channel while code runs and signals land.

Nothing may be lost or cut: replies and interrupts that arrive while code runs are read, a frame
is never split by a signal, and a signal handler left by user code cannot stop the client
between executions (such signals wait until user code runs again).
"""

from __future__ import annotations

import os
import signal
from typing import Any

from bridge_protocol import Execute, Interrupt, Output, Result, encode

RAISING_HANDLER = """
import signal

def _boom(signum, frame):
    raise RuntimeError("boom from a handler left behind")

signal.signal(signal.SIGUSR1, _boom)
"""


def test_a_raising_signal_handler_between_executions_never_cuts_a_frame(host: Any) -> None:
    # A signal landing while the client waits for (or is in the middle of) a frame must neither
    # lose bytes nor end the client.
    assert host.execute(RAISING_HANDLER).result.status == "ok"
    assert host.process is not None
    for n in range(5):
        frame = encode(Execute(execution_id=f"split{n}", code=f"'after {n}'"))
        host.sock.sendall(frame[:7])
        os.kill(host.process.pid, signal.SIGUSR1)
        host.sock.sendall(frame[7:])
        # The whole frame was read: the execution ran, and got the signal (held back until user
        # code ran) as its error.
        run = host.collect(f"split{n}")
        assert run.result.status == "error"
        assert run.result.error is not None
        assert run.result.error.type == "RuntimeError"
    run = host.execute("'still in sync'")
    assert run.result.value == "'still in sync'"


def test_a_signal_that_arrived_between_executions_is_delivered_to_the_next_one(host: Any) -> None:
    # Outside user code the client holds such signals back; the next execution gets them.
    assert host.execute(RAISING_HANDLER).result.status == "ok"
    assert host.process is not None
    os.kill(host.process.pid, signal.SIGUSR1)
    run = host.execute("'not reached'")
    assert run.result.status == "error"
    assert run.result.error is not None
    assert run.result.error.type == "RuntimeError"
    assert "boom from a handler left behind" in run.result.error.message
    assert host.execute("'next'").result.value == "'next'"


def test_replies_and_interrupts_are_read_across_many_hand_overs(host: Any) -> None:
    # Alternating quick executions, executions that wait for a tool reply and interrupted ones:
    # every frame of each is read, in order, with signals held back between them.
    for n in range(15):
        assert host.execute(f"{n} + 1").result.value == str(n + 1)
        run = host.execute(f"mcp_media.echo.sync(n={n})")
        assert run.result.status == "ok", run.result.error
        assert f"'n': {n}" in (run.result.value or "")
        execution_id = host.submit("import time\nprint('started', flush=True)\ntime.sleep(60)")
        while True:
            message = host.next_message()
            if isinstance(message, Output) and "started" in message.text:
                break
        host.send(Interrupt(execution_id=execution_id))
        result = host.wait_for(Result)
        assert result.execution_id == execution_id
        assert result.status == "interrupted"


def test_an_interrupt_in_the_same_read_as_its_execute_stops_it(host: Any) -> None:
    both = encode(Execute(execution_id="both", code="while True:\n    pass")) + encode(
        Interrupt(execution_id="both")
    )
    host.sock.sendall(both)
    assert host.collect("both").result.status == "interrupted"
    assert host.execute("'next'").result.value == "'next'"

"""Hostile frame sequences from a sandbox end only that sandbox, with bounded memory.

The fast variant runs in the default test run; the ``slow`` one repeats it at scale. For a
coverage-guided run of a million inputs: ``hatch run fuzz:host`` (see ``atheris_host.py``).
"""

from __future__ import annotations

import os
import tracemalloc

import anyio
import pytest
from bridge_protocol import Fault, Pong, Reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ._driver import _frame, drive, frames_from

MEMORY_BOUND = 48 * 1024 * 1024
"""Peak Python allocations of one example: at most 40 frames of at most 128 KiB are fed, output
is capped at 4 KiB and images at 32 MiB, so anything above this is memory the host kept."""

FAST = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SLOW = settings(  # BRIDGE_SLOW_EXAMPLES: .ci/run's short run; the full count stays on demand
    max_examples=int(os.environ.get("BRIDGE_SLOW_EXAMPLES", 5_000)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _check(data: bytes) -> None:
    tracemalloc.start()
    try:
        observed = anyio.run(drive, frames_from(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, f"{peak} bytes allocated at the peak"
    assert observed.sibling_answered, "a sibling sandbox stopped answering"
    for message in observed.sent_to_sandbox:
        if isinstance(message, Reply) and message.fault is None:
            assert isinstance(message.value, dict)


def test_replies_to_unknown_calls_and_stale_results_leave_the_channel_usable() -> None:
    # Steps 0-5 are well-formed frames: a cancel of an unknown call, then a result of an old
    # execution (dropped), then a ping that must still get its pong.
    recipe = bytes([0, 4, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 7, 0, 0])
    frames = frames_from(recipe)
    observed = anyio.run(drive, frames)
    assert not observed.protocol_failure
    assert observed.sibling_answered


def test_a_hello_after_the_handshake_ends_that_sandbox_as_a_protocol_violation() -> None:
    observed = anyio.run(drive, [_frame({"kind": "hello", "versions": [1]})])
    assert observed.protocol_failure
    assert "UNEXPECTED_MESSAGE" in observed.reason or "hello" in observed.reason
    assert observed.sibling_answered


def test_a_tool_result_the_wire_cannot_carry_reaches_the_sandbox_as_a_fault() -> None:
    call = {
        "kind": "call",
        "call_id": 1,
        "execution_id": "e-current",
        "server": "s",
        "tool": "weird",
        "arguments": {},
    }
    observed = anyio.run(drive, [_frame(call), _frame({"kind": "ping", "nonce": 3})])
    faults = [m for m in observed.sent_to_sandbox if isinstance(m, Reply) and m.fault is not None]
    assert [type(f.fault) for f in faults] == [Fault]
    assert Pong(3) in observed.sent_to_sandbox
    assert not observed.protocol_failure


@FAST
@given(data=st.binary(max_size=400))
def test_hostile_frame_sequences_end_only_that_sandbox_with_bounded_memory(data: bytes) -> None:
    _check(data)


@pytest.mark.slow
@SLOW
@given(data=st.binary(max_size=400))
def test_hostile_frame_sequences_end_only_that_sandbox_with_bounded_memory_at_scale(
    data: bytes,
) -> None:
    _check(data)

"""The host limits Progress frames itself: sandbox code can forge them past the client's limit."""

from __future__ import annotations

from typing import Any

from bridge_core.sessions._progress import (
    MAX_PROGRESS_MESSAGE,
    PROGRESS_BURST,
    ProgressGate,
    cut_message,
)

from .conftest import Harness


class ProgressRecorder:
    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def on_output(self, stream: Any, text: str) -> None:
        pass

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))


async def test_a_progress_flood_is_relayed_only_up_to_the_burst_and_reported(
    harness: Harness,
) -> None:
    recorder = ProgressRecorder()
    flood = "\n".join(f"progress:{n}/1000" for n in range(1, 1001))
    async with harness.manager() as manager:
        result = await manager.execute(flood, listener=recorder)
    assert result.status == "ok"
    assert PROGRESS_BURST <= len(recorder.progress) < 1000
    assert recorder.progress[0] == (1.0, 1000.0, "working")
    assert any("progress update(s) were not relayed" in notice for notice in result.notices)


def test_the_gate_admits_a_burst_then_refuses_and_counts() -> None:
    gate = ProgressGate()
    admitted = sum(gate.admit(float(n)) for n in range(PROGRESS_BURST * 10))
    assert PROGRESS_BURST <= admitted < PROGRESS_BURST * 10
    assert gate.dropped == PROGRESS_BURST * 10 - admitted


def test_the_gate_relays_only_increasing_progress_as_mcp_requires() -> None:
    gate = ProgressGate()
    relayed = [value for value in (1.0, 2.0, 2.0, 1.5, 3.0, 0.0, 4.0) if gate.admit(value)]
    assert relayed == [1.0, 2.0, 3.0, 4.0]
    assert gate.not_increasing == 3
    assert gate.dropped == 0


async def test_decreasing_progress_from_sandbox_code_never_reaches_the_client(
    harness: Harness,
) -> None:
    recorder = ProgressRecorder()
    script = "\n".join(f"progress:{n}/10" for n in (1, 5, 3, 6, 6, 2, 9))
    async with harness.manager() as manager:
        result = await manager.execute(script, listener=recorder)
    assert result.status == "ok"
    assert [p for p, _, _ in recorder.progress] == [1.0, 5.0, 6.0, 9.0]


def test_long_progress_messages_are_cut() -> None:
    cut = cut_message("z" * 10 * MAX_PROGRESS_MESSAGE)
    assert cut is not None
    assert len(cut) == MAX_PROGRESS_MESSAGE
    assert cut.endswith("…")
    assert cut_message("short") == "short"
    assert cut_message(None) is None

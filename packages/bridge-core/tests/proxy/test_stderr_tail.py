"""The stderr ring buffer: bounded, ends at the newest bytes, reads to EOF without threads."""

from __future__ import annotations

import anyio
from bridge_core.proxy._stderr import StderrTail


async def test_tail_keeps_only_the_newest_bytes_from_a_line_boundary() -> None:
    tail = StderrTail("probe", limit=100)
    async with anyio.create_task_group() as tg:
        tg.start_soon(tail.pump)
        for i in range(50):
            tail.writer.write(f"line {i:02d}\n")
        tail.close_writer()
        with anyio.fail_after(5):
            await tail.eof.wait()
    text = tail.tail()
    assert text.endswith("line 49")
    assert len(text) <= 100
    assert text.startswith("line ")  # cut at a line start, not mid-line
    assert "line 00" not in text


async def test_tail_limits_what_it_returns_to_max_chars() -> None:
    tail = StderrTail("probe", limit=10_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(tail.pump)
        tail.writer.write("a" * 5000 + "\nlast words\n")
        tail.close_writer()
        with anyio.fail_after(5):
            await tail.eof.wait()
    assert tail.tail(max_chars=50) == "last words"


def test_discard_closes_both_ends_when_the_pump_never_ran() -> None:
    tail = StderrTail("probe", limit=100)
    tail.discard()
    assert tail.writer.closed

"""The stderr ring buffer: bounded, ends at the newest bytes, reads to EOF without threads, and
hands out (and logs) only masked text."""

from __future__ import annotations

import logging

import anyio
import pytest
from bridge_core.proxy._stderr import StderrTail
from bridge_core.redaction import Redactor


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


SECRET = "sk-live-0123456789abcdef"


def test_the_tail_is_masked_before_it_is_cut_so_no_end_of_a_secret_shows() -> None:
    tail = StderrTail("probe", limit=50, redactor=Redactor([SECRET]))
    tail._append(b"x" * 10 + SECRET.encode() + b"y" * 40)  # the ring drops 24 bytes
    assert tail.tail() == "***" + "y" * 40
    tail.discard()


def test_stderr_is_logged_line_by_line_masked_and_a_long_line_by_its_head_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tail = StderrTail("probe", limit=100_000, redactor=Redactor([SECRET]))
    with caplog.at_level(logging.DEBUG, logger="bridge_core.proxy.stderr"):
        tail._append(b"token " + SECRET[:10].encode())  # a read can end inside a secret
        tail._append(SECRET[10:].encode() + b" ok\n")
        tail._append(b"z" * 10_000 + b"\nlast\n")
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0] == "probe stderr: token *** ok"
    assert lines[1].startswith("probe stderr: zzz")
    assert lines[1].endswith("[line cut]")
    assert len(lines[1]) < 4200
    assert lines[2] == "probe stderr: last"
    assert SECRET[:10] not in "".join(lines)
    tail.discard()

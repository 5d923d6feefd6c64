"""The audit log: JSON lines with argument names and sizes, never values; never raises."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from bridge_core.audit import (
    MAX_ARGUMENTS,
    MAX_DETAIL_CHARS,
    MAX_RECORD_BYTES,
    AuditLog,
    CallRecord,
    argument_sizes,
)

SECRET = "hunter2-very-secret"


async def test_a_call_is_recorded_with_argument_sizes_and_without_values(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit" / "calls.jsonl")
    await log.record(
        CallRecord(
            session="default",
            server="github",
            tool="create_issue",
            arguments={"title": SECRET, "labels": ["bug", "p1"], "count": 3},
            outcome="ok",
            duration=0.0123,
            execution_id="e-1",
        )
    )
    text = (tmp_path / "audit" / "calls.jsonl").read_text()
    assert SECRET not in text
    assert "bug" not in text
    [record] = [json.loads(line) for line in text.splitlines()]
    assert datetime.fromisoformat(record.pop("time")).tzinfo is not None
    assert record == {
        "session": "default",
        "execution": "e-1",
        "server": "github",
        "tool": "create_issue",
        "arguments": {"title": len(SECRET) + 2, "labels": 13, "count": 1},
        "outcome": "ok",
        "duration_ms": 12.3,
    }


async def test_failures_record_their_outcome_and_detail(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl")
    await log.record(
        CallRecord(
            session="s",
            server="fs",
            tool="write_file",
            arguments={},
            outcome="denied",
            duration=0,
            detail="denied by MCP_BRIDGE_DENY_TOOLS=*.write_file",
        )
    )
    record = json.loads((tmp_path / "a.jsonl").read_text())
    assert record["outcome"] == "denied"
    assert record["detail"] == "denied by MCP_BRIDGE_DENY_TOOLS=*.write_file"
    assert record["execution"] is None


async def test_concurrent_records_never_interleave(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl")
    big = "x" * 100_000

    async def call(i: int) -> None:
        await log.record(
            CallRecord(
                session=f"s{i}",
                server="srv",
                tool=f"t{i}" + "y" * 5000,
                arguments={"blob": big},
                outcome="ok",
                duration=0.001,
            )
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for i in range(40):
                group.start_soon(call, i)
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert sorted(r["session"] for r in records) == sorted(f"s{i}" for i in range(40))


async def test_an_unwritable_log_warns_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "file").write_text("not a directory")
    log = AuditLog(tmp_path / "file" / "audit.jsonl")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await log.record(
                CallRecord(
                    session="s", server="a", tool="b", arguments={}, outcome="ok", duration=0
                )
            )
    assert len([r for r in caplog.records if "audit log" in r.getMessage()]) == 1


async def test_a_disabled_log_writes_nothing(tmp_path: Path) -> None:
    log = AuditLog(None)
    assert not log.enabled
    await log.record(
        CallRecord(session="s", server="a", tool="b", arguments={"k": 1}, outcome="ok", duration=0)
    )
    assert [entry async for entry in anyio.Path(tmp_path).iterdir()] == []


def test_argument_sizes_survive_values_json_cannot_encode() -> None:
    class Odd:
        def __repr__(self) -> str:
            return "Odd()"

    nested: list[object] = []
    nested.append(nested)
    sizes = argument_sizes({"odd": Odd(), "loop": nested, "bytes": b"\x00\x01", "text": "é"})
    assert sizes["odd"] == len('"Odd()"')
    assert sizes["text"] == len('"é"'.encode())
    assert sizes["loop"] > 0
    assert sizes["bytes"] > 0


async def test_every_record_is_bounded_whatever_names_and_details_sandbox_code_sends(
    tmp_path: Path,
) -> None:
    # Control characters are the worst case: JSON escapes each to six bytes.
    huge = "\x01" * (4 * 1024 * 1024)
    log = AuditLog(tmp_path / "a.jsonl")
    for _ in range(4):
        await log.record(
            CallRecord(
                session=huge,
                server=huge,
                tool=huge,
                arguments={f"{i}{huge}": i for i in range(100)} | {huge: "x"},
                outcome="unknown_tool",
                duration=0,
                execution_id=huge,
                detail=huge,
            )
        )
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines()
    assert len(lines) == 4
    assert all(len(line) <= MAX_RECORD_BYTES for line in lines)
    record = json.loads(lines[0])
    assert record["more_arguments"] == 101 - MAX_ARGUMENTS
    assert len(record["arguments"]) == MAX_ARGUMENTS
    assert all(name.endswith("…") for name in record["arguments"])
    assert record["tool"].endswith("…")
    assert len(record["detail"]) == MAX_DETAIL_CHARS + 1


@pytest.mark.parametrize(
    "char",
    [
        *("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"),
        *("\u202e", "\u2066", "\u200b", "\u200d", "\u0600", "\ufff9", "\U000e0041", "\U000e0001"),
    ],
)
async def test_a_record_is_one_line_whatever_its_names_hold_and_decodes_to_them(
    tmp_path: Path, char: str
) -> None:
    forged = f'{char}{{"time": "2026-01-01T00:00:00.000+00:00", "approval": "approved"}}'
    log = AuditLog(tmp_path / "a.jsonl")
    call = CallRecord(
        session="s", server="srv", tool=f"t{forged}", arguments={}, outcome="denied",
        duration=0, detail=f"refused{forged}",
    )  # fmt: skip
    await log.record(call)
    text = (tmp_path / "a.jsonl").read_text(encoding="utf-8").removesuffix("\n")
    assert char not in text
    assert len(text.splitlines()) == 1  # str.splitlines also breaks at U+0085, U+2028, U+2029
    record = json.loads(text)
    assert record["tool"] == f"t{forged}"
    assert record["detail"] == f"refused{forged}"


async def test_a_record_of_line_separators_and_bidi_overrides_is_bounded(tmp_path: Path) -> None:
    huge = "\u2028\u202e\U000e0041" * (1024 * 1024)
    log = AuditLog(tmp_path / "a.jsonl")
    await log.record(
        CallRecord(
            session=huge,
            server=huge,
            tool=huge,
            arguments={f"{i}{huge}": i for i in range(30)},
            outcome="unknown_tool",
            duration=0,
            execution_id=huge,
            detail=huge,
        )
    )
    [line] = (tmp_path / "a.jsonl").read_bytes().split(b"\n")[:-1]
    assert len(line) <= MAX_RECORD_BYTES

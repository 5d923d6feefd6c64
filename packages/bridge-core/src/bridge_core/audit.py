"""The optional audit log: one JSON line per upstream tool call, never the argument values.

Each record holds the time (UTC, ISO 8601), session, execution, server, tool, the argument names
with the size in bytes of each value's JSON encoding, the outcome and the duration. Values stay
out on purpose: they may hold secrets or personal data, and the log outlives the session.

Names come from sandbox code, so every record is bounded (at most :data:`MAX_RECORD_BYTES`):
names are cut to :data:`MAX_NAME_CHARS` / :data:`MAX_ARGUMENT_NAME_CHARS` (a cut name ends with
``…``), at most :data:`MAX_ARGUMENTS` arguments are listed (``more_arguments`` counts the rest)
and ``detail`` is cut to :data:`MAX_DETAIL_CHARS`.

Every record is one line whatever its names hold: JSON escapes control characters and newlines,
and the characters it leaves raw that a reader could take for a line break (U+0085, U+2028,
U+2029) or that make a line read differently from what it is (bidi overrides and isolates,
invisible format characters, C1 controls) are written as ``\\uXXXX`` escapes too: the line stays
valid JSON and decodes to the same values.

Writing never raises into the caller: an I/O error is logged as a warning and the call goes on.
A new log file is created 0600 (missing directories 0700); an existing file keeps the mode its
owner gave it (docs/decisions/0024: the path is the user's choice, maybe a shared collector).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread

from bridge_core._visible import _ALWAYS
from bridge_core.private_files import PRIVATE_FILE_MODE, make_dirs

__all__ = [
    "MAX_ARGUMENTS",
    "MAX_ARGUMENT_NAME_CHARS",
    "MAX_DETAIL_CHARS",
    "MAX_NAME_CHARS",
    "MAX_RECORD_BYTES",
    "AuditLog",
    "CallRecord",
    "WorkflowRecord",
    "argument_sizes",
]

logger = logging.getLogger(__name__)

MAX_NAME_CHARS = 128
"""Session, server and tool names longer than this are cut."""
MAX_ARGUMENTS = 24
"""Arguments listed per record; ``more_arguments`` counts the others."""
MAX_ARGUMENT_NAME_CHARS = 48
MAX_DETAIL_CHARS = 800
MAX_RECORD_BYTES = 32 * 1024
"""Bound on one record, reached only by names of escaped invisible characters (a tag character
outside the Basic Multilingual Plane is 12 bytes as a JSON surrogate pair)."""
_CUT = "…"
_UNSAFE = re.compile(f"[{_ALWAYS}\u200c\u200d]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw that is not safe in a line (see above):
the product's escaper's list (:mod:`bridge_core._visible`), tags and other invisible
format characters outside the Basic Multilingual Plane included."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON escape of a code point past U+FFFF is its surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + _CUT


def _size(value: object) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str).encode())
    except (TypeError, ValueError, RecursionError):
        return len(repr(value).encode())


def argument_sizes(arguments: Mapping[str, Any]) -> dict[str, int]:
    """``{name: size in bytes of the value's JSON}`` for the first :data:`MAX_ARGUMENTS`
    arguments, names cut to :data:`MAX_ARGUMENT_NAME_CHARS`: what the log records instead of
    values."""
    sizes: dict[str, int] = {}
    for index, (name, value) in enumerate(arguments.items()):
        if index == MAX_ARGUMENTS:
            break
        sizes[_cut(str(name), MAX_ARGUMENT_NAME_CHARS)] = _size(value)
    return sizes


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """One upstream call (or resource read, or prompt) as the audit log records it.

    ``outcome``: ``ok``, ``tool_error`` (an ``isError`` result), or the failure's kind
    (``denied``, ``unknown_tool``, ``timeout``, ``unavailable``, ``cancelled``, ...).
    ``detail``: a short reason for a failure (an error message, never argument values).
    ``approval``: how a call that needed the user's approval was decided (see
    :class:`bridge_core.approval.ApprovalGate`); ``None`` when it needed none.
    """

    session: str
    server: str
    tool: str
    arguments: Mapping[str, Any]
    outcome: str
    duration: float
    execution_id: str | None = None
    detail: str | None = None
    approval: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def line(self) -> str:
        """The JSON line :meth:`AuditLog.record` writes (without the newline), every field
        bounded."""
        record: dict[str, Any] = {
            "time": self.at.isoformat(timespec="milliseconds"),
            "session": _cut(self.session, MAX_NAME_CHARS),
            "execution": None
            if self.execution_id is None
            else _cut(self.execution_id, MAX_NAME_CHARS),
            "server": _cut(self.server, MAX_NAME_CHARS),
            "tool": _cut(self.tool, MAX_NAME_CHARS),
            "arguments": argument_sizes(self.arguments),
        }
        if len(self.arguments) > MAX_ARGUMENTS:
            record["more_arguments"] = len(self.arguments) - MAX_ARGUMENTS
        if self.approval is not None:
            record["approval"] = _cut(self.approval, MAX_NAME_CHARS)
        record["outcome"] = self.outcome
        record["duration_ms"] = round(self.duration * 1000, 3)
        if self.detail is not None:
            record["detail"] = _cut(self.detail, MAX_DETAIL_CHARS)
        return _UNSAFE.sub(_escaped, json.dumps(record, ensure_ascii=False))


@dataclass(frozen=True, kw_only=True)
class WorkflowRecord:
    """A workflow saved or deleted (``event``: ``workflow_saved``, ``workflow_deleted``): who
    (``principal``: ``stdio``, ``token:NAME`` or ``anonymous``), from which session, and when.
    The source is never recorded; its size is."""

    event: str
    principal: str
    session: str
    workflow: str
    versions: tuple[int, ...]
    execution_id: str | None = None
    source_bytes: int | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def line(self) -> str:
        """The JSON line :meth:`AuditLog.record` writes, every field bounded."""
        record: dict[str, Any] = {
            "time": self.at.isoformat(timespec="milliseconds"),
            "event": self.event,
            "principal": _cut(self.principal, MAX_NAME_CHARS),
            "session": _cut(self.session, MAX_NAME_CHARS),
            "execution": None
            if self.execution_id is None
            else _cut(self.execution_id, MAX_NAME_CHARS),
            "workflow": _cut(self.workflow, MAX_NAME_CHARS),
            "versions": list(self.versions[:MAX_ARGUMENTS]),
        }
        if self.source_bytes is not None:
            record["source_bytes"] = self.source_bytes
        return _UNSAFE.sub(_escaped, json.dumps(record, ensure_ascii=False))


class AuditLog:
    """Appends JSON lines to ``path``; with ``path=None`` it records nothing.

    Safe to share between tasks and threads: each record is one ``write`` of one line to a file
    opened in append mode, under a lock, so lines never interleave.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._failed = False

    @property
    def enabled(self) -> bool:
        """False when no path was configured."""
        return self.path is not None

    async def record(self, call: CallRecord | WorkflowRecord) -> None:
        """Append ``call``'s line (in a worker thread: measuring a large argument, JSON-encoding
        it, is CPU work, and the file write is blocking I/O)."""
        if self.path is None:
            return
        await anyio.to_thread.run_sync(lambda: self._append(call.line()))

    def _append(self, line: str) -> None:
        assert self.path is not None
        data = (line + "\n").encode()
        try:
            with self._lock:
                make_dirs(self.path.parent)  # a missing directory is made private, 0700
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError as exc:
            # Warn once per failure streak: a full disk must not flood the log either.
            if not self._failed:
                logger.warning("audit log %s: cannot write: %s", self.path, exc)
            self._failed = True
        else:
            self._failed = False

"""The optional audit log: one JSON line per upstream tool call, never the argument values.

Each record holds the time (UTC, ISO 8601), session, execution, server, tool, the argument names
with the size in bytes of each value's JSON encoding, the outcome and the duration. Values stay
out on purpose: they may hold secrets or personal data, and the log outlives the session.

Writing never raises into the caller: an I/O error is logged as a warning and the call goes on.
A new log file is created 0600 (missing directories 0700); an existing file keeps the mode its
owner gave it (docs/decisions.md: the path is the user's choice, maybe a shared collector).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread

from bridge_core.private_files import PRIVATE_FILE_MODE, make_dirs

__all__ = ["AuditLog", "argument_sizes"]

logger = logging.getLogger(__name__)


def _size(value: object) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str).encode())
    except (TypeError, ValueError, RecursionError):
        return len(repr(value).encode())


def argument_sizes(arguments: Mapping[str, Any]) -> dict[str, int]:
    """``{name: size in bytes of the value's JSON}``: what the log records instead of values."""
    return {str(name): _size(value) for name, value in arguments.items()}


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

    async def record(
        self,
        *,
        session: str,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        outcome: str,
        duration: float,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Append one record (in a worker thread; the file write is blocking I/O).

        ``outcome``: ``ok``, ``tool_error`` (an ``isError`` result), or the failure's kind
        (``denied``, ``unknown_tool``, ``timeout``, ``unavailable``, ``cancelled``, ...).
        ``detail``: a short reason for a failure (an error message, never argument values).
        """
        if self.path is None:
            return
        line = self.format(
            session=session,
            server=server,
            tool=tool,
            arguments=arguments,
            outcome=outcome,
            duration=duration,
            execution_id=execution_id,
            detail=detail,
        )
        await anyio.to_thread.run_sync(self._append, line)

    def format(
        self,
        *,
        session: str,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        outcome: str,
        duration: float,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> str:
        """The JSON line :meth:`record` writes (without the newline)."""
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "session": session,
            "execution": execution_id,
            "server": server,
            "tool": tool,
            "arguments": argument_sizes(arguments),
            "outcome": outcome,
            "duration_ms": round(duration * 1000, 3),
        }
        if detail is not None:
            record["detail"] = detail
        return json.dumps(record, ensure_ascii=False)

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

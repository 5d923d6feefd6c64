"""Bounded capture of one execution's output, with the full text spilled to a host file.

Memory stays bounded whatever the sandbox prints (10 MB, 200k lines): each stream keeps at most
``cap`` characters of head and ``cap`` characters of tail. While the total is at most ``cap`` the
chunks are also kept in arrival order; the moment it exceeds ``cap`` they are written to a host
temp file and from then on every chunk is appended there (buffered, flushed through a worker
thread), up to ``spill_limit`` bytes. After the execution the session copies that file into the
sandbox's /tmp so code can read the full output in its next execution.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections import deque
from pathlib import Path
from typing import BinaryIO

import anyio
from bridge_protocol import Stream

from bridge_core.private_files import private_dir

__all__ = ["OutputCollector", "StreamCapture"]

logger = logging.getLogger("bridge_core.sessions")

FLUSH_BYTES = 256 * 1024
"""Spill writes are batched: one thread hop per 256 KiB, not per frame (200k-line floods)."""


class StreamCapture:
    """Head and tail of one stream; exact while the stream is at most ``2 * keep`` characters."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.chars = 0
        self.lines = 0

    def add(self, text: str) -> None:
        self.chars += len(text)
        self.lines += text.count("\n")
        room = self._keep - self._head_len
        if room > 0:
            part = text[:room]
            self._head.append(part)
            self._head_len += len(part)
            text = text[room:]
        if not text:
            return
        if len(text) >= self._keep:
            self._tail.clear()
            text = text[-self._keep :]
            self._tail_len = 0
        self._tail.append(text)
        self._tail_len += len(text)
        # Trim from the left; only the oldest chunk is ever cut, so this is amortised O(1).
        while self._tail_len > self._keep:
            excess = self._tail_len - self._keep
            oldest = self._tail[0]
            if len(oldest) <= excess:
                self._tail.popleft()
                self._tail_len -= len(oldest)
            else:
                self._tail[0] = oldest[excess:]
                self._tail_len -= excess

    def text(self) -> str:
        """Everything, when nothing was dropped (``chars <= 2 * keep``)."""
        return "".join(self._head) + "".join(self._tail)

    def head(self, n: int) -> str:
        return "".join(self._head)[:n]

    def tail(self, n: int) -> str:
        return "".join(self._tail)[-n:] if n > 0 else ""


class OutputCollector:
    """stdout and stderr of one execution, capped at ``cap`` characters in total."""

    def __init__(self, cap: int, spill_dir: Path, *, spill_limit: int) -> None:
        self.cap = cap
        self.streams: dict[Stream, StreamCapture] = {
            "stdout": StreamCapture(cap),
            "stderr": StreamCapture(cap),
        }
        self.spill_dir = spill_dir
        self._spill_limit = spill_limit
        self._ordered: list[str] | None = []
        """Arrival-ordered chunks while the total is within the cap (None once spilled)."""
        self._spill: BinaryIO | None = None
        self._spill_buffer: list[bytes] = []
        self._spill_buffered = 0
        self.spill_path: Path | None = None
        self.spilled_bytes = 0
        self.spill_incomplete = False
        """True when the file holds only the start of the output (limit reached, or an error)."""
        self.spill_error: str | None = None
        """Why the host could not keep the full output, if it could not."""

    @property
    def chars(self) -> int:
        return sum(capture.chars for capture in self.streams.values())

    @property
    def lines(self) -> int:
        return sum(capture.lines for capture in self.streams.values())

    @property
    def truncated(self) -> bool:
        return self.chars > self.cap

    async def add(self, stream: Stream, text: str) -> None:
        """Record a chunk (in arrival order across both streams)."""
        self.streams[stream].add(text)
        if self._ordered is not None:
            self._ordered.append(text)
            if not self.truncated:
                return
            # Crossing the cap: from now on the full text lives in a file, not in memory.
            pending, self._ordered = self._ordered, None
            try:
                self._spill = await anyio.to_thread.run_sync(self._open_spill)
            except OSError as exc:
                self._give_up(exc)
                return
            for chunk in pending:
                await self._write(chunk)
            return
        await self._write(text)

    def _open_spill(self) -> BinaryIO:
        private_dir(self.spill_dir)  # mkstemp makes the file 0600; the directory is ours too
        fd, name = tempfile.mkstemp(prefix="output-", suffix=".txt", dir=self.spill_dir)
        self.spill_path = Path(name)
        return os.fdopen(fd, "w+b")

    def _give_up(self, exc: OSError) -> None:
        # A full or read-only host disk must not end the execution: only the full copy is lost.
        logger.warning("cannot keep the full output on the host: %s", exc)
        self.spill_error = f"the bridge could not store it ({exc.strerror or exc})"
        self.spill_incomplete = True
        self._spill_buffer.clear()

    async def _write(self, text: str) -> None:
        if self.spill_incomplete:
            return
        data = text.encode("utf-8", "surrogatepass")
        room = self._spill_limit - self.spilled_bytes
        if len(data) > room:
            data = data[:room]
            self.spill_incomplete = True
        self._spill_buffer.append(data)
        self._spill_buffered += len(data)
        self.spilled_bytes += len(data)
        if self._spill_buffered >= FLUSH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        """Write buffered spill bytes to the host file."""
        if self._spill is None or not self._spill_buffer:
            return
        data = b"".join(self._spill_buffer)
        self._spill_buffer.clear()
        self._spill_buffered = 0
        try:
            await anyio.to_thread.run_sync(self._spill.write, data)
        except OSError as exc:
            self._give_up(exc)

    async def read_spill(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the spilled output from ``offset`` (flushes first)."""
        await self.flush()
        spill = self._spill
        if spill is None:
            return b""

        def read() -> bytes:
            spill.flush()
            spill.seek(offset)
            return spill.read(size)

        return await anyio.to_thread.run_sync(read)

    def render(self, marker: str) -> tuple[str, str]:
        """(stdout, stderr) as returned to the caller; ``marker`` is formatted per stream with
        ``omitted``, ``total`` and ``lines`` when that stream had to be cut."""
        out, err = self.streams["stdout"], self.streams["stderr"]
        if not self.truncated:
            return out.text(), err.text()
        half = self.cap // 2
        if out.chars <= half:
            budgets = (out.chars, self.cap - out.chars)
        elif err.chars <= half:
            budgets = (self.cap - err.chars, err.chars)
        else:
            budgets = (half, self.cap - half)
        rendered: list[str] = []
        for capture, budget in zip((out, err), budgets, strict=True):
            if capture.chars <= budget:
                rendered.append(capture.text())
                continue
            head_n = budget // 2
            tail_n = budget - head_n
            note = marker.format(
                omitted=f"{capture.chars - head_n - tail_n:,}",
                total=f"{capture.chars:,}",
                lines=f"{capture.lines:,}",
            )
            rendered.append(capture.head(head_n) + note + capture.tail(tail_n))
        return rendered[0], rendered[1]

    async def aclose(self) -> None:
        """Close and delete the host spill file (its content is in the sandbox by now)."""
        spill, self._spill = self._spill, None
        self._spill_buffer.clear()
        if spill is None:
            return
        path = self.spill_path

        def close() -> None:
            spill.close()
            if path is not None:
                path.unlink(missing_ok=True)

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close)

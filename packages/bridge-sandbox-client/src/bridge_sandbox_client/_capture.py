"""File-descriptor level capture of stdout and stderr, streamed as ``Output`` frames.

fds 1 and 2 are replaced by pipes (``dup2``), so output of subprocesses and of ``os.write(1, …)``
is captured exactly like ``print``. One thread per stream reads its pipe, decodes UTF-8
incrementally (a character split across two reads is not mangled) and coalesces small writes for
up to :data:`COALESCE_SECONDS` or :data:`COALESCE_CHARS`, so a loop of 200k tiny prints does not
become 200k frames.

Attribution: text goes to the execution that is running when it is flushed. Text produced
between executions (a thread left running) is held, bounded, and sent with the next execution.
"""

from __future__ import annotations

import codecs
import io
import os
import select
import sys
import threading
import time
from collections.abc import Callable

from bridge_protocol import Output, Stream

__all__ = ["COALESCE_CHARS", "COALESCE_SECONDS", "OutputCapture"]

COALESCE_SECONDS = 0.02
"""How long a chunk may wait for more text: short enough to feel live, long enough to batch."""
COALESCE_CHARS = 16 * 1024
"""Flush as soon as this much text is pending."""
_READ_SIZE = 64 * 1024
_MAX_ORPHAN_CHARS = 64 * 1024
"""Text written between executions that is kept for the next one (the tail is kept)."""

Send = Callable[[Output], None]


class _StreamPump:
    """One captured fd: its pipe, decoder, pending text and reader thread."""

    def __init__(self, stream: Stream, fd: int, capture: OutputCapture) -> None:
        self.stream: Stream = stream
        self._capture = capture
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.dup2(write_fd, fd)
        self.fd = fd
        # Kept to repair fd 1/2 if user code closes or redirects them (see OutputCapture.begin).
        self.write_fd = write_fd
        self._read_fd = read_fd
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._pending_chars = 0
        self._since: float | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"bridge-capture-{stream}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._pump()
        except OSError:
            pass  # our pipe was closed under us (user code closing every fd): stop capturing

    def _pump(self) -> None:
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        while True:
            timeout_ms: float | None = None
            with self._capture.lock:
                if self._since is not None:
                    left = self._since + COALESCE_SECONDS - time.monotonic()
                    timeout_ms = max(0.0, left * 1000)
            events = poller.poll(timeout_ms)
            with self._capture.lock:
                if events:
                    self.read_available()
                if self._since is not None and (
                    self._pending_chars >= COALESCE_CHARS
                    or time.monotonic() - self._since >= COALESCE_SECONDS
                ):
                    self.flush()

    def read_available(self, *, final: bool = False) -> None:
        """Read what the pipe holds without blocking (caller holds the capture lock)."""
        while True:
            try:
                data = os.read(self._read_fd, _READ_SIZE)
            except BlockingIOError:
                data = b""
            text = self._decoder.decode(data, final=final and not data)
            if text:
                self._pending.append(text)
                self._pending_chars += len(text)
                if self._since is None:
                    self._since = time.monotonic()
                if self._pending_chars >= COALESCE_CHARS:
                    self.flush()
            if not data:
                return

    def flush(self) -> None:
        """Send pending text (caller holds the capture lock)."""
        if not self._pending:
            self._since = None
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_chars = 0
        self._since = None
        self._capture.emit(self.stream, text)


class OutputCapture:
    """Redirect fds 1 and 2 into pipes and stream what is written to them."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.lock = threading.Lock()
        self._execution_id: str | None = None
        self._orphans: list[tuple[Stream, str]] = []
        self._orphan_chars = 0
        self._pumps: list[_StreamPump] = []
        self._stdout: io.TextIOWrapper | None = None
        self._stderr: io.TextIOWrapper | None = None
        self.original_stderr_fd = -1

    def install(self) -> None:
        """Swap fds 1 and 2 for pipes and point ``sys.stdout``/``sys.stderr`` at them.

        A duplicate of the original fd 2 is kept in :attr:`original_stderr_fd` for the client's
        own diagnostics (container logs), which must never reach the host as user output.
        """
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        self.original_stderr_fd = os.dup(2)
        self._pumps = [_StreamPump("stdout", 1, self), _StreamPump("stderr", 2, self)]
        # Line buffered like a terminal, so prints stream while code runs; stderr unbuffered.
        self._stdout = sys.stdout = io.TextIOWrapper(
            open(1, "wb", closefd=False),  # noqa: SIM115 - lives as long as the process
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        self._stderr = sys.stderr = io.TextIOWrapper(
            open(2, "wb", buffering=0, closefd=False),  # noqa: SIM115
            encoding="utf-8",
            errors="backslashreplace",
            write_through=True,
        )
        for pump in self._pumps:
            pump.start()

    def begin(self, execution_id: str) -> None:
        """Attribute output to ``execution_id`` from now on (held orphan text goes first).

        Also undoes what earlier user code may have done to the streams (``sys.stdout``
        replaced, fd 1 closed or redirected), so every execution starts captured.
        """
        for pump in self._pumps:
            os.dup2(pump.write_fd, pump.fd)
        if self._stdout is not None and self._stderr is not None:
            sys.stdout, sys.stderr = self._stdout, self._stderr
        with self.lock:
            self._execution_id = execution_id
            orphans, self._orphans = self._orphans, []
            self._orphan_chars = 0
            for stream, text in orphans:
                self._send_output(stream, text)

    def end(self) -> None:
        """Deliver everything written so far to the current execution, then detach from it.

        Called before the ``Result`` frame so every byte the execution wrote precedes it.
        """
        self._flush_streams()
        # A flush that failed on a closed fd 1 or 2 keeps its text buffered: repair the fds and
        # flush again, so that text is this execution's output, not the next one's.
        for pump in self._pumps:
            os.dup2(pump.write_fd, pump.fd)
        self._flush_streams()
        with self.lock:
            for pump in self._pumps:
                try:
                    pump.read_available(final=True)
                except OSError:
                    pass  # the pipe was closed under us; what was read is still flushed
                pump.flush()
            self._execution_id = None

    def _flush_streams(self) -> None:
        for stream in (self._stdout, self._stderr, sys.stdout, sys.stderr):
            try:
                stream.flush()  # type: ignore[union-attr]
            except Exception:
                # User code may have closed the stream or replaced it with None or any object
                # (`sys.stdout = None`): that must never take the client down, and fd-level
                # capture still delivers whatever reached fds 1 and 2.
                pass

    def emit(self, stream: Stream, text: str) -> None:
        """Send ``text`` for the current execution, or hold it (caller holds :attr:`lock`)."""
        if self._execution_id is None:
            self._orphans.append((stream, text))
            self._orphan_chars += len(text)
            while self._orphan_chars > _MAX_ORPHAN_CHARS and self._orphans:
                _, dropped = self._orphans.pop(0)
                self._orphan_chars -= len(dropped)
            return
        self._send_output(stream, text)

    def _send_output(self, stream: Stream, text: str) -> None:
        assert self._execution_id is not None
        try:
            self._send(Output(execution_id=self._execution_id, stream=stream, text=text))
        except (OSError, ValueError):
            pass  # the channel is gone; the client is shutting down

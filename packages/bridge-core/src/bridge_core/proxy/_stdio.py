"""The stdio transport to an upstream MCP server: ours, because the SDK's cannot be bounded.

What it replaces, and why (the SDK gaps; mcp 2.3, ``mcp/client/stdio.py``):

- **Unbounded, quadratic reading.** The SDK's ``stdio_client`` decodes stdout as text and
  re-splits its whole buffer on every chunk (``(buffer + chunk).split("\\n")``), with no limit:
  a 120 MB line without a newline grew the bridge by 118 MB and burned 26 s of CPU after the
  call had timed out, and the server was left running. Here lines are split by
  :mod:`bridge_core.jsonlines` (each byte scanned once), and a line past ``max_message_bytes``
  cuts the connection (:attr:`StdioServer.cut`).
- **No process access.** The SDK keeps the child process to itself (we used to walk the frame
  locals of its async generator to find it), so its exit status and pid depended on SDK
  internals. Here the process is ours.
- **No containment beyond the process group.** The SDK kills the server's group; a daemon the
  server started in a session of its own survived the bridge. Here the server runs under a
  supervisor (``_supervisor.py``, Linux) and in a cgroup where the host allows
  (``_cgroup.py``).
- **Parse errors as exceptions with tracebacks.** Junk lines are logged (the first few) and
  skipped here.

What it keeps from the SDK's transport: the server's environment (the SDK's safe default set
plus the server's ``env``), its own session, one line handed over at a time (no read-ahead while
a delivery waits), the writer's JSON form, and the MCP shutdown sequence (close stdin, wait,
SIGTERM, wait, SIGKILL) inside a shielded scope where every wait is bounded. It hands the SDK's
:class:`~mcp.ClientSession` a pair of memory object streams, the transport interface the SDK
documents, so nothing here depends on SDK internals.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.abc import Process
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs this one below Python 3.12

from bridge_core._ownership import current_owner
from bridge_core.jsonlines import OVERLONG, LineSplitter
from bridge_core.servers import ServerSpec

from . import _cgroup
from ._handoff import handed_over, taken
from ._leftovers import forget_group, record_group
from ._toollist import ToolListLimits
from .errors import validation_summary

__all__ = ["StdioServer", "open_stdio"]

logger = logging.getLogger("bridge_core.proxy")

SUPERVISOR = Path(__file__).with_name("_supervisor.py")
_SUPERVISED = sys.platform == "linux"
"""The supervisor needs ``prctl`` (child subreaper, parent-death signal): Linux only."""

_READ_CHUNK = 64 * 1024
PROCESS_TERMINATION_TIMEOUT = 2.0
"""Grace for the server to exit on its own once its stdin is closed (the SDK's value)."""
_SUPERVISOR_GRACE = 2.0 + 1.0
"""After SIGTERM: the supervisor's own grace for the server, plus a second to sweep."""
_KILL_REAP_TIMEOUT = 2.0
"""Time for the event loop to see a SIGKILLed process exit; only an unkillable one runs it out."""
_WRITER_FLUSH_TIMEOUT = 0.5
"""Time for the writer to flush accepted messages before stdin closes (the SDK's value)."""
_EXIT_POLL_INTERVAL = 0.01
_LOGGED_JUNK_LINES = 5
"""Junk lines on stdout logged per server; a server printing junk forever must not flood logs."""
_TRACKED_REQUESTS = 10_000
"""Bound on the requests remembered as awaiting an answer (the oldest is forgotten first)."""
_MIN_TOOL_BYTES = 12
"""No tool fits in fewer bytes of JSON (``{"name":"a"}``): a shorter answer cannot hold more
tools than the bound, and is not counted."""
_serials = itertools.count()


@with_config(ConfigDict(extra="ignore"))
class _Tools(TypedDict, total=False):
    pass


@with_config(ConfigDict(extra="ignore"))
class _ListResult(TypedDict, total=False):
    tools: list[_Tools]


@with_config(ConfigDict(extra="ignore"))
class _Answer(TypedDict, total=False):
    id: int | str
    result: _ListResult


# Validating into these reads an answer's id and counts its tools without building a Python
# object per value (pydantic still parses the whole text, at about four times its size).
_answer_head = TypeAdapter(_Answer)


@with_config(ConfigDict(extra="ignore"))
class _Head(TypedDict, total=False):
    id: int | str
    method: object


_message_head = TypeAdapter(_Head)
_ANSWER_ARMS = ("JSONRPCResponse", "JSONRPCError")
"""Where the SDK's message union reports what is wrong with an answer (its first ``loc``)."""
_SHOWN_ERROR_CHARS = 300


class StdioServer:
    """A started stdio server: the streams to hand to ``ClientSession``, its process, and why
    the bridge cut the connection (None unless it did)."""

    def __init__(
        self, name: str, process: Process, max_message_bytes: int, limits: ToolListLimits
    ) -> None:
        self.name = name
        self.process = process
        self.cut: str | None = None
        self._max_message = max_message_bytes
        self._limits = limits
        self._deliver, self.read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write, self._outbox = anyio.create_memory_object_stream[SessionMessage](0)
        self._writer_done = anyio.Event()
        self._requests: dict[types.RequestId, str] = {}
        """Our requests awaiting an answer: id → method."""
        self._junk_lines = 0
        self._stopping = False

    @property
    def pid(self) -> int:
        return self.process.pid

    # -- reading ------------------------------------------------------------------------------

    async def read_stdout(self) -> None:
        """Split stdout into lines and hand each over, parsed; ends at EOF, a cut or teardown."""
        stdout = self.process.stdout
        assert stdout is not None
        lines = LineSplitter(self._max_message)
        try:
            async with self._deliver:
                while True:
                    lines.feed(await stdout.receive(_READ_CHUNK))
                    while (line := lines.next()) is not None:
                        if line is OVERLONG:
                            self._cut_connection()
                            return
                        if not await self._hand_over(line):
                            return
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except OSError as exc:
            if not self._stopping:
                logger.warning("reading from MCP server %r failed: %s", self.name, exc)
        finally:
            if self.cut is None:
                await self._drain(stdout)

    def _cut_connection(self) -> None:
        self.cut = (
            f"MCP server {self.name!r} sent a JSON-RPC message longer than "
            f"{_mib(self._max_message)} (the bridge's fixed bound): the bridge cut the "
            "connection and stopped the server"
        )
        logger.warning("%s", self.cut)

    async def _drain(self, stdout: Any) -> None:
        # A server flushing output on its way out must not block on a full pipe; bytes are
        # discarded, so this holds no memory. Ends at EOF, or when teardown cancels it.
        try:
            while True:
                await stdout.receive(_READ_CHUNK)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def _hand_over(self, line: bytes | bytearray) -> bool:
        """Parse and deliver one line; False once the session is gone."""
        message = self._parse(line)
        if message is None:
            return True
        try:
            await handed_over(self._deliver, message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def _parse(self, line: bytes | bytearray) -> SessionMessage | None:
        if not line or line.isspace():
            return None
        listing = self._awaited_listing()
        if listing is not None:
            refused = self._refuse_listing(line, listing)
            if refused is not None:
                return SessionMessage(refused)
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            unreadable = self._unreadable_answer(line, exc)
            if unreadable is not None:
                return SessionMessage(unreadable)
            self._junk(line, exc)
            return None
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._requests.pop(message.id, None)  # type: ignore[arg-type]
        return SessionMessage(message)

    def _awaited_listing(self) -> types.RequestId | None:
        """The id of our tools/list request when it is the only request awaiting an answer:
        then a line past the tool-list bound can only be its answer (or something just as
        abnormal), and is refused before anything parses it. With a call in flight too, the
        line could be the call's large result: it is parsed, and bounded after parsing."""
        if len(self._requests) != 1:
            return None
        ((request_id, method),) = self._requests.items()
        return request_id if method == "tools/list" else None

    def _refuse_listing(
        self, line: bytes | bytearray, listing: types.RequestId
    ) -> types.JSONRPCError | None:
        """An error answer in place of the answer to ``listing`` when that answer is past a
        bound, decided before it is parsed; None to parse the line as usual."""
        reason = self._limits.too_large(len(line))
        if reason is None and len(line) > self._limits.max_tools * _MIN_TOOL_BYTES:
            try:
                head = _answer_head.validate_json(line)
            except ValueError:
                return None  # not an answer we can read: the full parse reports it
            if head.get("id") != listing:
                return None
            reason = self._limits.too_many(len(head.get("result", {}).get("tools", [])))
        if reason is None:
            return None
        del self._requests[listing]
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=listing,
            error=types.ErrorData(code=types.INTERNAL_ERROR, message=reason),
        )

    def _unreadable_answer(
        self, line: bytes | bytearray, error: ValueError
    ) -> types.JSONRPCError | None:
        """An error answer in place of an answer to one of our requests that is not a valid
        JSON-RPC response (a ``result`` that is not an object, a malformed ``error``): its
        caller fails at once, naming what was wrong, instead of waiting out its timeout.
        None when the line answers nothing we asked (it is junk)."""
        try:
            head = _message_head.validate_json(line)
        except ValueError:
            return None
        request_id = head.get("id")
        if request_id is None or "method" in head or request_id not in self._requests:
            return None
        method = self._requests.pop(request_id)
        # An answer (an id, no method): what the request and notification arms say is noise.
        if isinstance(error, ValidationError):
            shown = validation_summary(error, arms=_ANSWER_ARMS)
        else:
            shown = str(error)
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the answer to {method} is not a valid JSON-RPC response: "
                f"{shown[:_SHOWN_ERROR_CHARS]}",
            ),
        )

    def _junk(self, line: bytes | bytearray, error: ValueError) -> None:
        self._junk_lines += 1
        if self._junk_lines <= _LOGGED_JUNK_LINES:
            logger.warning(
                "MCP server %r wrote a line that is not JSON-RPC (%d bytes, skipped): %.200r",
                self.name,
                len(line),
                bytes(line[:200]),
            )
            logger.debug("the parse error", exc_info=error)
        elif self._junk_lines == _LOGGED_JUNK_LINES + 1:
            logger.warning("MCP server %r: further junk lines are skipped silently", self.name)

    # -- writing ------------------------------------------------------------------------------

    async def write_stdin(self) -> None:
        """Send each message the session writes as one line."""
        stdin = self.process.stdin
        assert stdin is not None
        try:
            async with self._outbox:
                while True:
                    try:
                        session_message = await taken(self._outbox)
                    except anyio.EndOfStream:
                        break
                    message = session_message.message
                    self._note(message)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: end the read side so that the session sees the
            # connection end instead of a request waiting forever.
            await self._deliver.aclose()
        finally:
            self._writer_done.set()

    def _note(self, message: Any) -> None:
        """Track our requests awaiting an answer, so that a tools/list answer can be bounded
        before it is parsed."""
        if isinstance(message, types.JSONRPCRequest):
            self._requests[message.id] = message.method
            while len(self._requests) > _TRACKED_REQUESTS:
                del self._requests[next(iter(self._requests))]
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and message.params
        ):
            self._requests.pop(message.params.get("requestId"), None)  # type: ignore[arg-type]

    # -- stopping -----------------------------------------------------------------------------

    async def shutdown(self, cgroup: Path | None) -> None:
        """Stop traffic, flush, stop the server and everything it started. Call shielded."""
        self._stopping = True
        self.read.close()  # a delivery blocked on a gone session returns; the reader drains
        self.write.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT):
            await self._writer_done.wait()
        process = self.process
        if self.cut is None:
            await _close(process.stdin)
            if await _exited(process, PROCESS_TERMINATION_TIMEOUT):
                return
        _signal(process.pid, signal.SIGTERM, whole_group=not _SUPERVISED)
        if await _exited(process, _SUPERVISOR_GRACE):
            return
        await end_processes(process.pid, cgroup)
        if not await _exited(process, _KILL_REAP_TIMEOUT):
            logger.warning("MCP server %r (pid %d) survived SIGKILL", self.name, process.pid)


@asynccontextmanager
async def open_stdio(
    spec: ServerSpec,
    *,
    stderr: IO[str],
    max_message_bytes: int,
    limits: ToolListLimits,
    process_dir: Path | None,
) -> AsyncIterator[StdioServer]:
    """Start the server; yield it while it serves; stop it and everything it started."""
    if sys.platform == "win32":  # pragma: no cover - the bridge does not run on Windows yet
        raise OSError("stdio MCP servers need a POSIX host (Linux or macOS)")
    env = get_default_environment() | dict(spec.env)
    _check_command(spec.command or "", env, spec.cwd)
    argv = [spec.command or "", *spec.args]
    cgroup: Path | None = None
    if _SUPERVISED:
        owner = current_owner()
        cgroup = await anyio.to_thread.run_sync(
            _cgroup.make, f"{owner.pid}-{owner.start_time}", next(_serials)
        )
        # -I -S: no site packages and no PYTHON* variables; it starts in milliseconds.
        supervisor = [sys.executable, "-I", "-S", str(SUPERVISOR), "--parent", str(os.getpid())]
        if cgroup is not None:
            supervisor += ["--cgroup", str(cgroup)]
        if "LC_CTYPE" not in env:  # the supervisor's Python may add it (PEP 538)
            supervisor += ["--unset", "LC_CTYPE"]
        argv = [*supervisor, "--", *argv]
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=spec.cwd,
            env=env,
            start_new_session=True,
        )
    except BaseException:
        if cgroup is not None:
            await anyio.to_thread.run_sync(_cgroup.remove, cgroup)
        raise
    # Synchronous on purpose: one tiny file, and it must exist before any await.
    record = record_group(process_dir, process.pid, cgroup)
    server = StdioServer(spec.name, process, max_message_bytes, limits)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.read_stdout)
            tg.start_soon(server.write_stdin)
            try:
                yield server
            finally:
                with anyio.CancelScope(shield=True):
                    await server.shutdown(cgroup)
                tg.cancel_scope.cancel()  # the reader may drain a pipe a survivor holds open
    finally:
        with anyio.CancelScope(shield=True):
            # Whatever is left (a clean exit can leave children too) ends with the server.
            await end_processes(process.pid, cgroup, remove=True)
            if process.returncode is not None:
                await process.aclose()  # closes the pipes; the process is gone, so no wait
            else:  # it survived SIGKILL (uninterruptible sleep): do not wait for it
                await _close(process.stdin)
                await _close(process.stdout)
            forget_group(record)


async def end_processes(pgid: int, cgroup: Path | None, *, remove: bool = False) -> None:
    """SIGKILL the server's process group and cgroup (and remove the cgroup if asked)."""
    _signal(pgid, signal.SIGKILL, whole_group=True)
    if cgroup is not None:
        await anyio.to_thread.run_sync(_cgroup.kill, cgroup)
        if remove:
            await anyio.to_thread.run_sync(_cgroup.remove, cgroup)


def _signal(pid: int, number: int, *, whole_group: bool) -> None:
    try:
        if whole_group:
            os.killpg(pid, number)
        else:
            os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


async def _close(stream: Any) -> None:
    try:
        await stream.aclose()
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process exited within ``seconds``. Polls ``returncode`` like the SDK: on
    asyncio before Python 3.13.x (gh-119710) and older anyio, ``wait()`` also waits for pipes
    that a surviving descendant holds open."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no event exists to wait on
            await anyio.sleep(_EXIT_POLL_INTERVAL)
    return process.returncode is not None


def _check_command(command: str, env: dict[str, str], cwd: str | Path | None) -> None:
    """Fail before spawning when the command cannot be found: the message names it."""
    if not command:
        raise ValueError("no command")
    if os.sep in command:
        path = Path(cwd or ".") / command
        if path.is_file() and os.access(path, os.X_OK):
            return
    elif shutil.which(command, path=env.get("PATH", os.defpath)) is not None:
        return
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


def _mib(count: int) -> str:
    return f"{count / (1024 * 1024):.0f} MiB"

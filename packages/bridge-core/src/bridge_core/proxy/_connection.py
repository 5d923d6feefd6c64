"""One live connection to one upstream MCP server, run start to end inside one supervisor task.

The transport and :class:`~mcp.ClientSession` context managers are entered and exited by
:meth:`Connection.run` only, which the pool starts in its own long-lived task group: an MCP
request handler never enters them (cancel scopes entered in one task and exited in another is
how an existing tool in this field crashes). Callers only *send requests* on the live session,
which the SDK's dispatcher supports from any task.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from anyio.abc import ObjectSendStream
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

# The SDK's own HTTP transports build their client with this (default MCP timeouts); the
# streamable HTTP client takes headers only through a client passed in.
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from bridge_core.proxy.errors import UpstreamCrashed, UpstreamUnavailable
from bridge_core.proxy.options import ProxyOptions
from bridge_core.redaction import Redactor
from bridge_core.servers import ServerSpec

from ._leftovers import forget_group, record_group
from ._stderr import StderrTail

__all__ = ["Connection"]

logger = logging.getLogger("bridge_core.proxy")

_STDERR_EOF_GRACE = 1.0
"""After the transport closed (the child is reaped), how long to keep reading stderr: a crash
message is usually the last thing written, but a surviving grandchild can hold the pipe open."""
_MAX_TOOL_PAGES = 100
"""A server whose tools/list never stops paginating cannot hang start-up."""

Transport = tuple[Any, Any]
"""The (read, write) stream pair an SDK transport yields (the SDK's alias for it is private)."""


class Connection:
    """A started server: its session and tool list while :attr:`ready`, its failure once
    :attr:`ended`."""

    def __init__(
        self,
        spec: ServerSpec,
        options: ProxyOptions,
        on_tools: Callable[[list[types.Tool]], Awaitable[None]],
        on_end: Callable[[Connection], None],
        redactor: Redactor | None = None,
    ) -> None:
        self.spec = spec
        self._redactor = redactor or Redactor.for_servers([spec])
        self._options = options
        self._on_tools = on_tools
        self._on_end = on_end
        self.session: ClientSession | None = None
        self.tools: list[types.Tool] = []
        self.ready = anyio.Event()
        """Set once start-up finished, successfully (``session`` set) or not (``failure`` set)."""
        self.ended = anyio.Event()
        """Set once the transport is closed and the child is gone; ``failure`` says why."""
        self.failure: UpstreamUnavailable | None = None
        self.lost = False
        self._stopping = False
        self._wake = anyio.Event()
        self._tools_dirty = anyio.Event()
        self._process: Any = None
        self._tail: StderrTail | None = None
        self._scope = anyio.CancelScope()

    @property
    def alive(self) -> bool:
        return self.session is not None and not self.ended.is_set() and not self._wake.is_set()

    @property
    def pid(self) -> int | None:
        """The stdio child's pid (diagnostics and tests), ``None`` for HTTP servers."""
        pid = getattr(self._process, "pid", None)
        return pid if isinstance(pid, int) else None

    def stop(self) -> None:
        """Ask :meth:`run` to close the session and stop the server (returns at once)."""
        self._stopping = True
        self._wake.set()
        if not self.ready.is_set():
            self._scope.cancel()  # still starting: nobody is waiting on it any more

    async def run(self) -> None:
        """Start, serve until stopped or lost, tear down. Never raises (except cancellation)."""
        name = self.spec.name
        error: BaseException | None = None
        try:
            with self._scope:
                await self._serve()
        except Exception as exc:  # supervisor boundary: any start/serve failure becomes `failure`
            error = exc
        finally:
            self.session = None
            status = getattr(self._process, "returncode", None)
            tail = self._tail.tail() if self._tail is not None else ""
            if self.failure is None:
                self.failure = self._describe_end(error, status, tail)
            if error is not None:
                logger.debug("MCP server %r ended with an error", name, exc_info=error)
            # Synchronously, before anyone waiting on `ready`/`ended` runs: the owner's restart
            # bookkeeping must be in place when they look again.
            self._on_end(self)
            self.ready.set()
            self.ended.set()

    def _describe_end(
        self, error: BaseException | None, status: int | None, tail: str
    ) -> UpstreamUnavailable:
        """Why the connection ended, with the server's secrets masked (an error or URL may quote
        them; the stderr tail is masked already)."""
        name, mask = self.spec.name, self._redactor.text
        if self.spec.transport == "stdio":
            who = f"MCP server {name!r}"
            stderr = f"; stderr tail:\n{tail}" if tail else "; it wrote nothing to stderr"
            ended = _exit_phrase(status)
        else:
            who = f"MCP server {name!r} at {mask(_safe_url(self.spec.url or ''))}"
            stderr = ""
            ended = "closed the connection"
        if self._stopping and not self.lost:
            return UpstreamUnavailable(name, f"{who} was stopped (the bridge is shutting down)")
        if not self.ready.is_set() and error is not None and not self.lost:
            # Spawn error or no answer in time: the error says more than the exit status of a
            # process we stopped ourselves.
            return UpstreamUnavailable(
                name, f"{who} failed to start: {mask(_error_phrase(error))}{stderr}"
            )
        prefix = "failed to start: it " if not self.ready.is_set() else ""
        return UpstreamCrashed(
            name, f"{who} {prefix}{ended}{stderr}", exit_status=status, stderr_tail=tail
        )

    async def _serve(self) -> None:
        if self.spec.transport == "stdio":
            self._tail = StderrTail(self.spec.name, self._options.stderr_tail_bytes, self._redactor)
        async with anyio.create_task_group() as outer:
            if self._tail is not None:
                outer.start_soon(self._tail.pump)
            try:
                async with self._open_transport() as (read, write):
                    if self._tail is not None:
                        self._tail.close_writer()
                    await self._run_session(read, write)
            finally:
                if self._tail is not None:
                    self._tail.close_writer()  # spawn failed: our copy is the only writer
                    with anyio.move_on_after(_STDERR_EOF_GRACE, shield=True):
                        await self._tail.eof.wait()
                outer.cancel_scope.cancel()

    async def _run_session(self, read: Any, write: Any) -> None:
        # The session reads through a relay so that the end of the server's output (the
        # server exited or closed stdout) wakes this supervisor even when no call is in flight.
        relay_send, relay_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._relay, read, relay_send)
            async with ClientSession(
                relay_recv, write, message_handler=self._on_message
            ) as session:
                try:
                    with anyio.fail_after(self._options.start_timeout):
                        await session.initialize()
                        self.tools = await list_all_tools(session)
                except TimeoutError:
                    limit = self._options.start_timeout
                    raise TimeoutError(f"no answer to initialize within {limit:g}s") from None
                self.session = session
                self.ready.set()
                tg.start_soon(self._announce_tools, self.tools)
                tg.start_soon(self._refresh_on_change, session)
                await self._wake.wait()
            tg.cancel_scope.cancel()

    def _open_transport(self) -> AbstractAsyncContextManager[Transport]:
        spec = self.spec
        if spec.transport == "stdio":
            if not spec.command:
                raise ValueError(f"MCP server {spec.name!r} has no command")
            assert self._tail is not None
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env), cwd=spec.cwd
            )
            return self._stdio(params, self._tail)
        if not spec.url:
            raise ValueError(f"MCP server {spec.name!r} has no url")
        if spec.transport == "sse":
            return sse_client(spec.url, headers=dict(spec.headers))
        return _streamable_http(spec.url, dict(spec.headers))

    @asynccontextmanager
    async def _stdio(
        self, params: StdioServerParameters, tail: StderrTail
    ) -> AsyncIterator[Transport]:
        transport = stdio_client(params, errlog=tail.writer)
        record: Path | None = None
        try:
            async with transport as streams:
                self._process = _spawned_process(transport)
                # Synchronous on purpose: one tiny file, and it must exist before any await.
                record = record_group(self._options.process_dir, self.pid)
                yield streams
        finally:
            _kill_leftovers(self.pid)
            forget_group(record)

    async def _relay(
        self,
        source: AsyncIterable[SessionMessage | Exception],
        sink: ObjectSendStream[SessionMessage | Exception],
    ) -> None:
        # `lost` only when the server's side ended (EOF); a sink closed by our own teardown or a
        # cancel is not a loss.
        try:
            async with sink:
                async for item in source:
                    await sink.send(item)
                if not self._stopping:
                    self.lost = True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._wake.set()

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        # Runs on the dispatcher's read path: only flag work here, never await session I/O.
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_dirty.set()
        elif isinstance(message, Exception):
            # Junk on a stdio server's stdout, or an HTTP stream failure: the session goes on;
            # a real loss shows up as the end of the stream.
            # The junk is the server's (hostile) output: the log formatter masks and caps it.
            logger.warning("transport error from MCP server %r: %s", self.spec.name, message)

    async def _refresh_on_change(self, session: ClientSession) -> None:
        while True:
            await self._tools_dirty.wait()
            self._tools_dirty = anyio.Event()
            try:
                with anyio.fail_after(self._options.start_timeout):
                    tools = await list_all_tools(session)
            except Exception:
                logger.warning(
                    "refreshing the tool list of %r failed", self.spec.name, exc_info=True
                )
                continue
            self.tools = tools
            await self._announce_tools(tools)

    async def _announce_tools(self, tools: list[types.Tool]) -> None:
        try:
            await self._on_tools(tools)
        except Exception:  # a listener's failure (e.g. the cache) must not end the connection
            logger.warning("tool-list listener failed for %r", self.spec.name, exc_info=True)


async def list_all_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of ``tools/list``."""
    result = await session.list_tools()
    tools = list(result.tools)
    for _ in range(_MAX_TOOL_PAGES):
        if not result.next_cursor:
            break
        result = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=result.next_cursor)
        )
        tools.extend(result.tools)
    return tools


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Transport]:
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=client)
        )
        yield read, write


def _spawned_process(transport: Any) -> Any:
    """The child process of an entered ``stdio_client``, for its exit status and pid.

    Why the frame walk: the SDK's ``stdio_client`` does not expose its process, and re-writing the
    transport (its careful shielded shutdown included) to get one integer would be worse. The
    generator is suspended at its ``yield``, so its locals are stable; any other SDK shape just
    yields ``None`` and crash reports say "exit status unknown".
    """
    frame = getattr(getattr(transport, "gen", None), "ag_frame", None)
    process = frame.f_locals.get("process") if frame is not None else None
    return process if hasattr(process, "returncode") else None


def _kill_leftovers(pid: int | None) -> None:
    """SIGKILL whatever is left in the server's process group once the server itself is gone.

    The SDK starts the server as a session (and group) leader and kills the group only when the
    server does not exit on its own; a server that exits cleanly can still leave children behind
    (a detached helper, an ``npx`` grandchild), which would outlive the bridge.
    """
    if pid is None or sys.platform == "win32":
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _safe_url(url: str) -> str:
    """The URL without credentials or query (either may hold a token) for error messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _exit_phrase(status: int | None) -> str:
    if status is None:
        return "closed its connection (exit status unknown)"
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _error_phrase(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__

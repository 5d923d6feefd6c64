"""One live connection to one upstream MCP server, run start to end inside one supervisor task.

The transport and :class:`~mcp.ClientSession` context managers are entered and exited by
:meth:`Connection.run` only, which the pool starts in its own long-lived task group: an MCP
request handler never enters them (cancel scopes entered in one task and exited in another is
how an existing tool in this field crashes). Callers only *send requests* on the live session,
which the SDK's dispatcher supports from any task.
"""

from __future__ import annotations

import logging
import re
import signal
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from bridge_core.proxy.errors import UpstreamCrashed, UpstreamUnavailable
from bridge_core.proxy.options import ProxyOptions
from bridge_core.redaction import COOKIELESS_PATH, Redactor
from bridge_core.servers import ServerSpec

from ._handoff import EagerSend, handed_over, items
from ._output_schema import UpstreamSession
from ._relay import ClientRelay
from ._stderr import StderrTail
from ._stdio import StdioServer, open_stdio
from ._toollist import ToolListLimits, ToolListTooLarge, list_all_tools

__all__ = ["Connection"]

logger = logging.getLogger("bridge_core.proxy")

_STDERR_EOF_GRACE = 1.0
"""After the transport closed (the child is reaped), how long to keep reading stderr: a crash
message is usually the last thing written, but a surviving grandchild can hold the pipe open."""
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's defaults for its own HTTP transports: 30 s to connect and write, 5 minutes between
reads (a server may hold a response stream open)."""
_RELIST_INTERVAL = 1.0
"""Seconds between two relistings of one server's tools after its ``list_changed``: the first
change is listed at once, the ones that follow within the interval in one relisting at its end.
A server flapping its list (hundreds of ``list_changed`` a second) otherwise cost a relisting,
a catalog rebuild, a cache write and a ``list_changed`` to every direct client per flap."""

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
        *,
        relay: ClientRelay | None = None,
    ) -> None:
        self.spec = spec
        self._relay_to_client = relay
        self._redactor = redactor or Redactor.for_servers([spec])
        self._options = options
        self._on_tools = on_tools
        self._on_end = on_end
        self.session: ClientSession | None = None
        self._tools: list[types.Tool] = []
        self.tools_by_name: dict[str, types.Tool] = {}
        """:attr:`tools` by name (the first of a name a server lists twice): built once per
        list, so that a call finds its tool without scanning the list."""
        self.ready = anyio.Event()
        """Set once start-up finished, successfully (``session`` set) or not (``failure`` set)."""
        self.ended = anyio.Event()
        """Set once the transport is closed and the child is gone; ``failure`` says why."""
        self.failure: UpstreamUnavailable | None = None
        self.lost = False
        self._stopping = False
        self._wake = anyio.Event()
        self._tools_dirty = anyio.Event()
        self._relisting = False
        self._stdio: StdioServer | None = None
        self._limits = ToolListLimits(options.max_tools, options.max_tool_list_bytes)
        self._tail: StderrTail | None = None
        self._scope = anyio.CancelScope()

    @property
    def tools(self) -> list[types.Tool]:
        """The server's tool list, from its start or its last ``list_changed``."""
        return self._tools

    @tools.setter
    def tools(self, tools: list[types.Tool]) -> None:
        self._tools = tools
        self.tools_by_name = {tool.name: tool for tool in reversed(tools)}

    def _output_schema(self, name: str) -> dict[str, Any] | None:
        """The output schema ``name`` declared in the server's last listing, if any."""
        tool = self.tools_by_name.get(name)
        return None if tool is None else tool.output_schema

    @property
    def alive(self) -> bool:
        return self.session is not None and not self.ended.is_set() and not self._wake.is_set()

    @property
    def tools_current(self) -> bool:
        """Whether :attr:`tools` is the server's list as it stands: alive, and no change
        announced (``list_changed``) that a relisting has not brought in yet."""
        return self.alive and not self._relisting and not self._tools_dirty.is_set()

    @property
    def pid(self) -> int | None:
        """The stdio child's pid (its supervisor's on Linux; diagnostics and tests), ``None``
        for HTTP servers."""
        return self._stdio.pid if self._stdio is not None else None

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
            status = self._stdio.process.returncode if self._stdio is not None else None
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
        cut = self._stdio.cut if self._stdio is not None else None
        if cut is not None:
            return UpstreamCrashed(name, f"{cut}{stderr}", exit_status=status, stderr_tail=tail)
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
                        self._tail.close_writer()  # the child holds it now
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
            relay = self._relay_to_client
            # With a relay the bridge declares sampling, elicitation and roots, and answers them
            # through the client whose call is running (servers may offer more tools to such a
            # client: server-everything adds its trigger-* tools).
            callbacks: dict[str, Any] = (
                {}
                if relay is None
                else {
                    "sampling_callback": relay.on_sampling,
                    "elicitation_callback": relay.on_elicit,
                    "list_roots_callback": relay.on_list_roots,
                    "logging_callback": relay.on_log,
                }
            )
            if isinstance(write, MemoryObjectSendStream):
                write = EagerSend(write)
            async with UpstreamSession(
                relay_recv,
                write,
                message_handler=self._on_message,
                output_schemas=self._output_schema,
                **callbacks,
            ) as session:
                try:
                    with anyio.fail_after(self._options.start_timeout):
                        await session.initialize()
                        self.tools = await list_all_tools(session, self._limits)
                except TimeoutError:
                    limit = self._options.start_timeout
                    raise TimeoutError(f"no answer to initialize within {limit:g}s") from None
                self.session = session
                # The catalog (and its cache on disk) learns the list before the first call is
                # answered: announced from a task of its own, a bridge that closed right after
                # that call could cancel it before it ran, and the next start would find no
                # cache (the server started again just to be searched).
                await self._announce_tools(self.tools)
                self.ready.set()
                tg.start_soon(self._refresh_on_change, session)
                await self._wake.wait()
            tg.cancel_scope.cancel()

    def _open_transport(self) -> AbstractAsyncContextManager[Transport]:
        spec = self.spec
        if spec.transport == "stdio":
            if not spec.command:
                raise ValueError(f"MCP server {spec.name!r} has no command")
            assert self._tail is not None
            return self._open_stdio(self._tail)
        if not spec.url:
            raise ValueError(f"MCP server {spec.name!r} has no url")
        if spec.transport == "sse":
            return sse_client(spec.url, headers=dict(spec.headers))
        return _streamable_http(spec.url, dict(spec.headers))

    @asynccontextmanager
    async def _open_stdio(self, tail: StderrTail) -> AsyncIterator[Transport]:
        async with open_stdio(
            self.spec,
            stderr=tail.writer,
            max_message_bytes=self._options.max_message_bytes,
            limits=self._limits,
            process_dir=self._options.process_dir,
        ) as server:
            self._stdio = server
            yield server.read, server.write

    async def _relay(
        self,
        source: AsyncIterable[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        # `lost` only when the server's side ended (EOF); a sink closed by our own teardown or a
        # cancel is not a loss.
        try:
            async with sink:
                async for item in items(source):
                    await handed_over(sink, item)
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
            # An HTTP stream failure (junk on a stdio server's stdout is skipped by our
            # transport): the session goes on; a real loss shows up as the end of the stream.
            # The text is the server's (hostile) output: the log formatter masks and caps it.
            logger.warning("transport error from MCP server %r: %s", self.spec.name, message)

    async def _refresh_on_change(self, session: ClientSession) -> None:
        while True:
            await self._tools_dirty.wait()
            self._tools_dirty = anyio.Event()
            self._relisting = True
            try:
                with anyio.fail_after(self._options.start_timeout):
                    tools = await list_all_tools(session, self._limits)
            except (ToolListTooLarge, MCPError) as exc:
                logger.warning(
                    "refreshing the tool list of %r failed, the previous list stays: %s",
                    self.spec.name,
                    exc,
                )
            except Exception:
                logger.warning(
                    "refreshing the tool list of %r failed", self.spec.name, exc_info=True
                )
            else:
                self.tools = tools
                await self._announce_tools(tools)
            finally:
                self._relisting = False
            # Changes meanwhile (and failures: each is a log line) make one relisting after it.
            await anyio.sleep(_RELIST_INTERVAL)

    async def _announce_tools(self, tools: list[types.Tool]) -> None:
        try:
            await self._on_tools(tools)
        except Exception:  # a listener's failure (e.g. the cache) must not end the connection
            logger.warning("tool-list listener failed for %r", self.spec.name, exc_info=True)


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Transport]:
    # The SDK's streamable HTTP client takes headers only through a client passed in; it is
    # built here from httpx2's public API (the SDK's own factory is in a private module).
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT)
        )
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=client)
        )
        yield read, write


def _safe_url(url: str) -> str:
    """The URL without credentials, path parameters, query or fragment (each may hold a token:
    ``/app;jsessionid=<token>``, also percent-encoded, or ASP.NET's ``/(S(<token>))/``) for
    error messages. Never raises: a URL with a port that is no number is an error to describe,
    not a second one."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a URL that does not parse)"
    host = parts.netloc.rpartition("@")[2]  # host and port as written, without the userinfo
    if not _HOST_AND_PORT.fullmatch(host) or ("@" in url and "@" not in parts.netloc):
        # A password holding an unencoded / ? or # ends the netloc early: what looks like a host
        # (and a port that is no number) is then part of the userinfo. Show no host at all.
        host = "(…)"
    return f"{parts.scheme}://{host}" + "/".join(map(_safe_segment, parts.path.split("/")))


_HOST_AND_PORT = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(:[0-9]*)?")
"""A host (or a bracketed IPv6 address) and a port of digits, if any."""


def _safe_segment(segment: str) -> str:
    decoded = segment
    for _ in range(3):  # %3B, %253B...: as many decodings as a server might apply
        decoded = unquote(decoded)
    if COOKIELESS_PATH.fullmatch(decoded):
        return "(…)"
    return segment if ";" not in decoded else decoded.partition(";")[0]


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

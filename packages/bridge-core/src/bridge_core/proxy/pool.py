"""Supervised upstream MCP clients: one per configured server, started lazily, kept warm.

Concurrency model: every :class:`~bridge_core.proxy._connection.Connection` runs in a task of the
pool's own task group (``async with UpstreamPool(...) as pool``), which enters and exits the
transport and session. Callers (one task per sandbox call) wait for the connection to be ready,
then send their request on the shared session: the SDK multiplexes requests by id, so many calls
to one server are in flight at once, and a caller's cancellation (an interrupted execution)
cancels its request and sends ``notifications/cancelled`` upstream.

Failures: a server that exits fails its in-flight calls with :class:`UpstreamCrashed` (exit
status and stderr tail). The next call restarts it after a backoff that doubles per failure;
after ``max_failures`` in a row, calls fail fast with the last error until ``cooldown`` passes.
A successful request resets the count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, AsyncExitStack, ExitStack, contextmanager
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from bridge_protocol import JSONValue
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from bridge_core.catalog import closest_names
from bridge_core.client_link import ClientLink
from bridge_core.proxy import _resources as resources
from bridge_core.proxy._connection import Connection
from bridge_core.proxy._leftovers import kill_dead_owners_groups
from bridge_core.proxy._relay import ClientRelay
from bridge_core.proxy.errors import (
    UnknownServer,
    UpstreamRPCError,
    UpstreamTimeout,
    UpstreamUnavailable,
    validation_summary,
)
from bridge_core.proxy.options import ProxyOptions
from bridge_core.redaction import Redactor
from bridge_core.servers import ServerSpec

__all__ = ["UpstreamPool", "ToolsListener"]

ToolsListener = Callable[[ServerSpec, list[types.Tool]], Awaitable[None]]
"""Awaited with a server's full tool list when it starts and after each ``list_changed`` (in the
connection's task: it should be quick; a failure is logged, not raised)."""

_CLOSE_TIMEOUT = 12.0
"""Bound on aclose(): the SDK's stdio shutdown takes at most ~6.5 s (stdin close, SIGTERM, SIGKILL
waits) plus our 1 s stderr drain; past this the task group is cancelled anyway."""
_SHOWN_ERROR_CHARS = 300
_CRASH_REPORT_WAIT = 10.0
"""How long a failed call waits for the supervisor to reap the child and read its exit status."""


def _requires_task(conn: Connection, tool: str) -> bool:
    """Whether ``tool`` only runs as a task (2025-11-25 Tasks, ``execution.taskSupport``) on a
    server that declared task-augmented tool calls."""
    caps = conn.session.server_capabilities if conn.session is not None else None
    tasks = caps.tasks if caps is not None else None
    if tasks is None or tasks.requests is None or tasks.requests.tools is None:
        return False
    for described in conn.tools or ():
        if described.name == tool:
            execution = described.execution
            return execution is not None and execution.task_support == "required"
    return False


async def _call_as_task(
    session: ClientSession, tool: str, arguments: Mapping[str, Any] | None, limit: float
) -> types.CallToolResult:
    """Call a tool that runs only as a task: create it, then wait for its result
    (``tasks/result`` answers once the task ends); a call given up on cancels the task."""
    ttl = int(limit * 1000) + _TASK_TTL_MARGIN_MS
    params = types.CallToolRequestParams(
        name=tool, arguments=dict(arguments or {}), task=types.TaskMetadata(ttl=ttl)
    )
    # The SDK's session validates every tools/call result of a 2025-11-25 connection as a
    # CallToolResult, so the CreateTaskResult a task-augmented call answers with is refused
    # there (docs/sdk-upstream.md): this one request goes through its dispatcher, raw.
    raw = await session._dispatcher.send_raw_request(
        "tools/call", params.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    created = types.CreateTaskResult.model_validate(raw)
    task_id = created.task.task_id
    try:
        return await session.send_request(
            types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
            types.CallToolResult,
        )
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_TASK_CANCEL_WAIT):
            try:
                await session.send_request(
                    types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                    types.CancelTaskResult,
                )
            except Exception:  # the server may have ended it already: the call failed anyway
                pass
        raise


_TASK_TTL_MARGIN_MS = 60_000
"""The upstream keeps a task's result this long past the call's own limit."""
_TASK_CANCEL_WAIT = 2.0
"""Seconds a given-up call waits for the upstream to acknowledge its task's cancel."""


class _Upstream:
    """Restart bookkeeping of one server; at most one connection (starting or live) at a time."""

    def __init__(self, pool: UpstreamPool, spec: ServerSpec) -> None:
        self.pool = pool
        self.spec = spec
        self.conn: Connection | None = None
        self.tools: list[types.Tool] | None = None
        self.failures = 0
        self.last_error: UpstreamUnavailable | None = None
        self.retry_at = 0.0
        self.relay = ClientRelay(spec.name, pool.redactor, pool.options.call_timeout)

    async def session(self) -> tuple[Connection, ClientSession]:
        """The live connection, starting it (after any backoff) when there is none."""
        options = self.pool.options
        while True:
            conn = self.conn
            if conn is None:
                self.pool.check_open(self.spec.name)
                wait = self.retry_at - options.clock()
                if self.failures >= options.max_failures and wait > 0:
                    assert self.last_error is not None
                    raise UpstreamUnavailable(
                        self.spec.name,
                        f"{self.last_error} -- {self.failures} failures in a row; calls to "
                        f"{self.spec.name!r} fail fast for another {wait:.0f}s",
                    )
                if self.failures and wait > 0:
                    await anyio.sleep(wait)
                    continue
                conn = self._start()
            was_ready = conn.ready.is_set()
            if not was_ready:  # waiting on a set event would still yield a loop turn
                await conn.ready.wait()
            session = conn.session
            if session is not None and conn.alive:
                return conn, session
            if was_ready:
                # It was serving and has just died: let the supervisor record it, then restart.
                with anyio.move_on_after(_CRASH_REPORT_WAIT):
                    await conn.ended.wait()
                continue
            assert conn.failure is not None
            raise conn.failure

    def _start(self) -> Connection:
        conn = Connection(
            self.spec,
            self.pool.options,
            self._tools_changed,
            self._ended,
            self.pool.redactor,
            relay=self.relay,
        )
        self.conn = conn
        self.pool.task_group.start_soon(conn.run, name=f"mcp-upstream:{self.spec.name}")
        return conn

    def _ended(self, conn: Connection) -> None:
        if self.conn is conn:
            self.conn = None
        if self.pool.closing:
            return
        # A clean start then stop never happens outside aclose(), so any end here is a failure.
        options = self.pool.options
        self.failures += 1
        self.last_error = conn.failure
        if self.failures >= options.max_failures:
            delay = options.cooldown
        else:
            delay = min(options.backoff_initial * 2 ** (self.failures - 1), options.backoff_max)
        self.retry_at = options.clock() + delay

    async def _tools_changed(self, tools: list[types.Tool]) -> None:
        self.tools = tools
        if self.pool.on_tools is not None:
            await self.pool.on_tools(self.spec, tools)

    def succeeded(self) -> None:
        self.failures = 0


class UpstreamPool:
    """All configured upstream servers. Use as ``async with UpstreamPool(specs) as pool``."""

    def __init__(
        self,
        servers: Iterable[ServerSpec],
        options: ProxyOptions | None = None,
        *,
        on_tools: ToolsListener | None = None,
    ) -> None:
        self.options = options or ProxyOptions()
        self.on_tools = on_tools
        specs = list(servers)
        self.redactor = Redactor.for_servers(specs)
        """Masks every configured secret of every server (see :mod:`bridge_core.redaction`)."""
        self._upstreams: dict[str, _Upstream] = {}
        for spec in specs:
            if spec.name in self._upstreams:
                raise ValueError(f"two MCP servers are named {spec.name!r}")
            self._upstreams[spec.name] = _Upstream(self, spec)
        self._tg: TaskGroup | None = None
        self._exit: AsyncExitStack | None = None
        """Owns the task group and the stop of every server; unwound by ``__aexit__``."""
        self.closing = False

    async def __aenter__(self) -> UpstreamPool:
        await anyio.to_thread.run_sync(kill_dead_owners_groups, self.options.process_dir)
        async with AsyncExitStack() as stack:
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            # Unwound first on exit: stop every server, then the group waits for its tasks.
            stack.push_async_callback(self.aclose)
            self._exit = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._exit is None:
            raise RuntimeError("the upstream pool was not entered")
        # The body's exception goes into the task group with whatever a supervisor raised while
        # stopping, so neither is lost. Supervisors are built never to raise: a group of one is
        # the body's own error (or a lone supervisor bug), and comes out as itself.
        try:
            return bool(await self._exit.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            if len(group.exceptions) != 1:
                raise
            sole = group.exceptions[0]
        raise sole  # outside the except clause, so it keeps its own context

    async def aclose(self) -> None:
        """Stop every server and wait (bounded, shielded) until each child is gone."""
        if self.closing:
            return
        self.closing = True
        conns = [up.conn for up in self._upstreams.values() if up.conn is not None]
        for conn in conns:
            conn.stop()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
            for conn in conns:
                await conn.ended.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    @property
    def task_group(self) -> TaskGroup:
        if self._tg is None:
            raise RuntimeError("UpstreamPool must be used as `async with UpstreamPool(...)`")
        return self._tg

    def check_open(self, server: str) -> None:
        if self.closing:
            raise UpstreamUnavailable(
                server, f"MCP server {server!r} is unavailable: the bridge is shutting down"
            )

    @property
    def specs(self) -> list[ServerSpec]:
        """Configured servers, in configuration order."""
        return [up.spec for up in self._upstreams.values()]

    def spec(self, server: str) -> ServerSpec:
        """The spec of ``server``; raises :class:`UnknownServer` with close names."""
        return self._upstream(server).spec

    def cached_tools(self, server: str) -> list[types.Tool] | None:
        """The tool list seen on the live (or last) connection, without starting anything."""
        return self._upstream(server).tools

    def tools_current(self, server: str) -> bool:
        """Whether :meth:`cached_tools` is the running server's list as it stands now (no
        announced change still to be listed); False for a server that is not running."""
        conn = self._upstream(server).conn
        return conn is not None and conn.tools_current

    def failed_to_start(self, server: str) -> bool:
        """Whether the server's last start failed and it is not running (it may start again)."""
        upstream = self._upstream(server)
        return upstream.failures > 0 and not (upstream.conn is not None and upstream.conn.alive)

    def is_running(self, server: str) -> bool:
        conn = self._upstream(server).conn
        return conn is not None and conn.alive

    def pid(self, server: str) -> int | None:
        """The stdio child's pid while it runs (diagnostics)."""
        conn = self._upstream(server).conn
        return conn.pid if conn is not None else None

    def serving(self, server: str, client: ClientLink | None) -> AbstractContextManager[None]:
        """While the block runs, what ``server`` asks of its client (elicitation, sampling,
        roots, logging) may be relayed to ``client`` (see :mod:`bridge_core.proxy._relay`).
        Raises :class:`UnknownServer`."""
        return self._upstream(server).relay.serving(client)

    @contextmanager
    def serving_all(self, client: ClientLink | None) -> Iterator[None]:
        """:meth:`serving` for every server: a discovery request may start any of them, and a
        server asks for roots as it starts."""
        with ExitStack() as stack:
            if client is not None:
                for up in self._upstreams.values():
                    stack.enter_context(up.relay.serving(client))
            yield

    async def list_tools(self, server: str) -> list[types.Tool]:
        """The server's tools, starting it if needed (refreshed on ``list_changed``)."""
        return (await self._live(server)).tools

    async def tools_by_name(self, server: str) -> Mapping[str, types.Tool]:
        """:meth:`list_tools` by name (built once per list, not per call)."""
        return (await self._live(server)).tools_by_name

    async def _live(self, server: str) -> Connection:
        up = self._upstream(server)
        conn, _ = await up.session()
        up.tools = conn.tools
        up.succeeded()
        return conn

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_timeout: float | None = None,
        client: ClientLink | None = None,
    ) -> dict[str, Any]:
        """Call ``tool`` on ``server``: the ``CallToolResult`` as a JSON object (as the SDK's
        session validated it, against the tool's output schema too); an ``isError`` result is
        returned, not raised.

        Raises :class:`UnknownServer`, :class:`UpstreamUnavailable` (start failure, crash,
        cooldown, shutdown), :class:`UpstreamTimeout` (past ``call_timeout`` or the pool's
        ``call_timeout``; a cancel is sent upstream) or :class:`UpstreamRPCError` (an error
        answer, or a result that is not a ``CallToolResult``).
        """
        up = self._upstream(server)
        limit = call_timeout if call_timeout is not None else self.options.call_timeout
        conn, session = await up.session()
        # With a client to tell, the call asks for the server's progress (a token).
        progress = None if client is None else up.relay.progress_to(client, tool)
        try:
            # The limit is ours alone, counted from the call's start: the SDK's own clock
            # starts once its writer took the request, so a call queued behind a write the
            # server does not read would wait for the server. Cancelled here, the SDK still
            # sends the courtesy cancel upstream (bounded). With no SDK timeout, a
            # REQUEST_TIMEOUT error is always the server's own answer (its backend timed out).
            with anyio.fail_after(limit):
                if _requires_task(conn, tool):
                    answer = await _call_as_task(session, tool, arguments, limit)
                else:
                    answer = await session.call_tool(
                        tool, dict(arguments or {}), progress_callback=progress
                    )
        except TimeoutError:
            raise UpstreamTimeout(server, tool, limit) from None
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED and not conn.alive:
                # The connection ended under the call: wait for the supervisor's report (exit
                # status, stderr). A live server's error answer may carry the same code (-32000
                # is also JSON-RPC's generic "server error"): that is the server's error, below.
                with anyio.move_on_after(_CRASH_REPORT_WAIT):
                    await conn.ended.wait()
                failure = conn.failure or UpstreamUnavailable(
                    server, f"MCP server {server!r} closed its connection during {tool!r}"
                )
                raise failure from None
            raise UpstreamRPCError(server, tool, exc.code, exc.message, exc.data) from None
        except (ValidationError, RuntimeError) as exc:
            # A result that is not a CallToolResult (malformed, off its output schema, or an
            # input-required round the sandbox cannot answer): the server is alive, the call
            # failed, and the message names the field, never the server's value.
            raise UpstreamRPCError(
                server, tool, types.INTERNAL_ERROR, f"invalid tools/call result: {_why(exc)}"
            ) from None
        up.succeeded()
        # What the server sent, as validated (defaults it left out are not added, nulls dropped).
        return answer.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude_none=True)

    async def resource_request(
        self, server: str, method: str, params: Mapping[str, Any]
    ) -> JSONValue:
        """Answer a resource or prompt request of sandbox code (:mod:`._resources`) on
        ``server``, starting it if needed, within the call timeout.

        Raises what :meth:`call_tool` raises (``tool`` names the method), and
        :class:`~bridge_core.gateway.CallFailed` for invalid parameters.
        """
        up = self._upstream(server)
        limit = self.options.call_timeout
        conn, session = await up.session()
        try:
            with anyio.fail_after(limit):
                answer = await resources.answer(session, method, params)
        except TimeoutError:
            raise UpstreamTimeout(server, method, limit) from None
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED and not conn.alive:
                raise conn.failure or UpstreamUnavailable(server, "connection closed") from None
            raise UpstreamRPCError(server, method, exc.code, exc.message, exc.data) from None
        except (ValidationError, RuntimeError) as exc:
            raise UpstreamRPCError(
                server, method, types.INTERNAL_ERROR, f"invalid {method} result: {_why(exc)}"
            ) from None
        up.succeeded()
        return answer

    def _upstream(self, server: str) -> _Upstream:
        up = self._upstreams.get(server)
        if up is None:
            raise UnknownServer(server, closest_names(server, self._upstreams))
        return up


def _why(error: ValidationError | RuntimeError) -> str:
    """What was wrong with a result, bounded (the SDK's text for an input-required round or an
    output-schema mismatch; the failed fields of a model)."""
    if isinstance(error, ValidationError):
        return validation_summary(error)
    return str(error)[:_SHOWN_ERROR_CHARS]

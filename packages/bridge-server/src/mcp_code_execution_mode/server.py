"""The MCP server: one ``run_python`` tool, a capability resource and a workflow prompt.

Long-lived resources (the session manager, the upstream pool) are entered once in the server's
lifespan through an :data:`ExecutorFactory`; request handlers only borrow them. That is what
keeps an upstream client's task group out of a request handler's cancel scope.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from bridge_core import tracing
from bridge_core.sessions import MAX_PROGRESS_MESSAGE as MAX_USER_PROGRESS_MESSAGE
from bridge_core.sessions import visible_head
from mcp.server import InitializationOptions, NotificationOptions, Server
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_code_execution_mode import __version__
from mcp_code_execution_mode._apps import UI_SCHEME, list_ui_resources, read_ui_resource
from mcp_code_execution_mode._client_link import RequestLink
from mcp_code_execution_mode._clients import request_client
from mcp_code_execution_mode._direct import MODES, DirectTools, lists_code, lists_direct
from mcp_code_execution_mode._executor import BridgeState, Executor, ExecutorFactory
from mcp_code_execution_mode._guides import (
    CAPABILITIES_TEXT,
    CAPABILITIES_URI,
    WORKFLOW_PROMPT_DESCRIPTION,
    WORKFLOW_PROMPT_NAME,
    WORKFLOW_PROMPT_TEXT,
)
from mcp_code_execution_mode._run_calls import (
    answered_run,
    cancel_run,
    capabilities_of,
    wait_and_answer,
)
from mcp_code_execution_mode._run_registry import RunLimitExceeded, Runs, UnknownRun
from mcp_code_execution_mode._runs import AnswerRefused
from mcp_code_execution_mode._tasks import serve_tasks
from mcp_code_execution_mode.rendering import OutputMode, error_result
from mcp_code_execution_mode.settings import Settings
from mcp_code_execution_mode.tool import (
    TOOL_NAME,
    InvalidArguments,
    parse_arguments,
    run_python_tool,
)

if TYPE_CHECKING:  # the protocol and the session types load with the executor, in the background
    from bridge_core.sessions.types import ExecutionListener, ExecutionResult
    from bridge_protocol import Stream

__all__ = [
    "SERVER_NAME",
    "BridgeState",
    "Executor",
    "ExecutorFactory",
    "RunPythonHandler",
    "create_server",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "mcp-code-execution-mode"

MAX_STREAMED_LINES = 500
"""stdout lines relayed as progress per call; past it the rest only arrives in the result (a
program printing a million lines must not flood the client with notifications)."""
MAX_PROGRESS_MESSAGE = 500
"""Characters of one stdout line kept in a progress message."""
REQUEST_STATE_TTL = 900.0
"""Seconds a sealed ``requestState`` stays valid (longer than an approval question waits)."""


def _shown(text: str, limit: int) -> str:
    """Code output or a code-chosen message made visible, on one line, in ``limit`` characters."""
    return visible_head(text, limit, single_line=True)[0]


class _ProgressRelay:
    """Turns live output and ``runtime.progress`` calls into ``notifications/progress``.

    Progress values must increase (MCP spec), so stdout lines count up from 1 until user code
    reports its own progress; from then on only the code's own values are sent, and lines are
    no longer relayed (they still arrive in the result).
    """

    def __init__(
        self, ctx: ServerRequestContext[BridgeState], client: RequestLink | None = None
    ) -> None:
        self._ctx = ctx
        self.client = client
        """The client to ask for approvals and to relay upstream requests to (see
        :class:`bridge_core.sessions.types.ExecutionListener`)."""
        self._partial = ""
        self._lines = 0
        self._user_reported = False
        self._broken = False

    async def on_output(self, stream: Stream, text: str) -> None:
        if stream != "stdout" or self._user_reported or self._lines >= MAX_STREAMED_LINES:
            return
        *complete, partial = (self._partial + text).split("\n")
        # A line that never ends must not grow without bound: only its head is ever sent.
        self._partial = partial[:MAX_PROGRESS_MESSAGE]
        for line in complete:
            if self._lines >= MAX_STREAMED_LINES:
                return
            self._lines += 1
            await self._send(self._lines, None, _shown(line, MAX_PROGRESS_MESSAGE))

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._user_reported = True
        shown = None if message is None else _shown(message, MAX_USER_PROGRESS_MESSAGE)
        await self._send(progress, total, shown)

    async def _send(self, progress: float, total: float | None, message: str | None) -> None:
        if self._broken:
            return
        try:
            # A no-op when the client sent no progress token.
            await self._ctx.session.report_progress(progress, total, message)
        except Exception as exc:  # the client went away: the execution itself must go on
            self._broken = True
            logger.debug("progress notifications stopped: %r", exc)


class RunPythonHandler:
    """The ``tools/call`` handler, as the SDK's server loop calls it on every transport."""

    def __init__(self, max_timeout: float, mode: OutputMode) -> None:
        self._max_timeout = max_timeout
        self._mode: OutputMode = mode

    async def __call__(
        self, ctx: ServerRequestContext[BridgeState], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The result of one call (or its task, its yield, its questions); every failure is an
        ``isError`` result."""
        if params.name != TOOL_NAME:
            return error_result(f"unknown tool {params.name!r}: this server has only {TOOL_NAME}")
        try:
            args = parse_arguments(params.arguments, max_timeout=self._max_timeout)
        except InvalidArguments as exc:
            return error_result(str(exc))
        client = None  # stdio: the bridge's only client
        if ctx.request is not None:  # streamable HTTP: sessions belong to the client that asks
            client = request_client(ctx.request.scope, ctx.request.headers)
            if client is None:
                return error_result(
                    "this HTTP request has no MCP session and no authentication, so no session "
                    "can belong to it: connect with the initialize handshake, or use a token"
                )
        executor = ctx.lifespan_context.executor
        runs = ctx.lifespan_context.runs
        # An OpeningExecutor's wait_open, looked up: a Protocol's isinstance costs ~10 us a call
        # on Python 3.11.
        wait_open = getattr(executor, "wait_open", None)
        if wait_open is not None:
            # Before the span: tracing is switched on while the bridge opens, and a span begun
            # earlier would not record (nor would the nested calls' spans under it).
            await wait_open()
        link = RequestLink(ctx, client)
        try:
            if params.request_state is not None:  # the retry of an input_required answer
                run = answered_run(runs, params, client)
                addressed = args.yield_after is not None
            elif args.cancel is not None:
                run = runs.get(args.cancel, client)
                if not run.yielded:
                    raise UnknownRun(f"unknown run {args.cancel[:40]!r}: it is not a yielded run")
                return await cancel_run(run, self._mode)
            elif args.resume is not None:
                run = runs.get(args.resume, client)
                if not run.yielded:  # a task is its client's, collected with tasks/get
                    raise UnknownRun(f"unknown run {args.resume[:40]!r}: it is not a yielded run")
                addressed = True
            else:
                assert args.code is not None
                code, session = args.code, args.session

                async def execution(listener: ExecutionListener) -> ExecutionResult:
                    return await tracing.traced_execution(
                        executor.execute(
                            code,
                            session=session,
                            timeout=args.timeout,
                            reset=args.reset,
                            listener=listener,
                            client=client,
                        ),
                        session=session,
                        carrier=params.meta,
                    )

                run = runs.start(client, capabilities_of(ctx), execution)
                addressed = args.yield_after is not None
        except (UnknownRun, RunLimitExceeded, AnswerRefused) as exc:
            return error_result(str(exc), kind=type(exc).__name__)
        return await wait_and_answer(
            ctx,
            run,
            _ProgressRelay(ctx, link),
            link,
            mode=self._mode,
            yield_after=args.yield_after,
            addressed=addressed,
            new=args.code is not None and params.request_state is None,
        )


async def _direct_call(
    ctx: ServerRequestContext[BridgeState],
    params: types.CallToolRequestParams,
    direct: DirectTools,
    mode: OutputMode,
) -> types.CallToolResult | types.InputRequiredResult:
    """A direct tool's call, as a run: its approval reaches a 2026-07-28 client as
    ``input_required`` like a nested call's (the call never becomes a task or yields)."""
    client = _client_of(ctx)
    runs = ctx.lifespan_context.runs
    try:
        if params.request_state is not None:
            run = answered_run(runs, params, client)
        else:
            name, arguments = params.name, params.arguments

            async def call(listener: ExecutionListener) -> types.CallToolResult:
                link = getattr(listener, "client", None)
                return await direct.call(
                    name, arguments, client=link, client_key=client, carrier=params.meta
                )

            run = runs.start(client, capabilities_of(ctx), call)
    except (UnknownRun, RunLimitExceeded, AnswerRefused) as exc:
        return error_result(str(exc), kind=type(exc).__name__)
    link = RequestLink(ctx, client)
    return await wait_and_answer(
        ctx, run, _ProgressRelay(ctx, link), link,
        mode=mode, yield_after=None, addressed=False, new=False,
    )  # fmt: skip


def tools_mode(ctx: ServerRequestContext[BridgeState], default: str) -> str:
    """The tools this request's client is given: the endpoint URL's ``?tools=`` over HTTP (each
    client chooses), else ``[tools] mode``."""
    if ctx.request is None:
        return default
    chosen: str | None = ctx.request.query_params.get("tools")
    if chosen is None:
        return default
    if chosen not in MODES:
        raise MCPError(
            types.INVALID_PARAMS,
            f"?tools={chosen[:40]!r} in the endpoint URL: it must be one of {', '.join(MODES)}",
        )
    return chosen


async def _open_gateway(
    ctx: ServerRequestContext[BridgeState], direct: DirectTools, *, wait: bool = True
) -> None:
    """Give ``direct`` the open bridge's gateway (the one nested calls go through); without
    ``wait``, only if the bridge is open already."""
    executor = ctx.lifespan_context.executor
    wait_open = getattr(executor, "wait_open", None)
    if wait and wait_open is not None:
        await wait_open()
    gateway = getattr(executor, "gateway", None)
    if gateway is not None:
        await direct.attach(gateway)


def _connection_key(ctx: ServerRequestContext[BridgeState]) -> str | None:
    """Which client connection a request came on, to tell it of list changes later: the one
    stdio client, or the HTTP request's MCP session (none for a stateless request)."""
    if ctx.request is None:
        return "stdio"
    session_id: str | None = ctx.request.headers.get("mcp-session-id")
    return None if session_id is None else "http:" + session_id


class _ListenStreams:
    """The 2026-07-28 clients' ``subscriptions/listen`` streams, as one listener of list changes:
    that era has no standing stream per connection, so a change is published once, to every
    stream that asked for tool list changes (the SDK's listen handler filters and stamps)."""

    def __init__(self, bus: InMemorySubscriptionBus) -> None:
        self._bus = bus

    async def send_tool_list_changed(self) -> None:
        await self._bus.publish(ToolsListChanged())


def _listener(
    ctx: ServerRequestContext[BridgeState], streams: _ListenStreams
) -> tuple[Any, str | None]:
    """Who to tell of this client's list changes, and its key: the 2026-07-28 listen streams,
    or the connection the request came on (2025-11-25)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return streams, "subscriptions/listen"
    return ctx.session, _connection_key(ctx)


def _client_of(ctx: ServerRequestContext[BridgeState]) -> str | None:
    if ctx.request is None:
        return None
    return request_client(ctx.request.scope, ctx.request.headers)


class _BridgeServer(Server[BridgeState]):
    """The SDK's server, declaring ``tools.listChanged`` on every transport (stdio's loop and
    the HTTP session manager both ask this method): direct and MCP App tools follow the
    upstream servers' lists, and clients are told when those change."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def create_server(settings: Settings, executor_factory: ExecutorFactory) -> Server[BridgeState]:
    """Build the MCP server. ``executor_factory`` is entered once, in the lifespan."""

    direct = DirectTools(settings.output_cap)
    bus = InMemorySubscriptionBus()
    streams = _ListenStreams(bus)

    async def attach_when_open(executor: Executor) -> None:
        # Code-mode clients may list before the bridge opens (stdio answers first): once it is
        # open, App tools known from the cache are announced to them (DirectTools.attach).
        wait_open = getattr(executor, "wait_open", None)
        if wait_open is not None:
            await wait_open()
        gateway = getattr(executor, "gateway", None)
        if gateway is not None:
            await direct.attach(gateway)

    @asynccontextmanager
    async def lifespan(_server: Server[BridgeState]) -> AsyncIterator[BridgeState]:
        async with (
            executor_factory() as executor,
            Runs.open() as runs,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(attach_when_open, executor)
            yield BridgeState(executor=executor, settings=settings, runs=runs)
            tg.cancel_scope.cancel()

    tool = run_python_tool()
    mode: OutputMode = "toon" if settings.output_mode == "toon" else "compact"

    async def list_tools(
        ctx: ServerRequestContext[BridgeState], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        chosen = tools_mode(ctx, settings.tools)
        # Code mode: run_python and the MCP App tools known now; the listing neither waits for
        # the bridge to open nor starts a server.
        await _open_gateway(ctx, direct, wait=lists_direct(chosen))
        return types.ListToolsResult(
            tools=await direct.listing(chosen, tool, *_listener(ctx, streams))
        )

    run_python = RunPythonHandler(settings.max_timeout, mode)

    async def call_tool(
        ctx: ServerRequestContext[BridgeState], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        chosen = tools_mode(ctx, settings.tools)
        if params.name == TOOL_NAME and lists_code(chosen):
            await _open_gateway(ctx, direct, wait=False)  # App tools its calls reveal are heard
            result = await run_python(ctx, params)
            await _open_gateway(ctx, direct, wait=False)
            return result
        if not lists_direct(chosen):
            await _open_gateway(ctx, direct, wait=False)
            if params.name not in await direct.known_apps():
                return await run_python(ctx, params)  # its unknown-tool answer
        await _open_gateway(ctx, direct)
        return await _direct_call(ctx, params, direct, mode)

    async def list_resources(
        ctx: ServerRequestContext[BridgeState], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await _open_gateway(ctx, direct, wait=False)
        client = _client_of(ctx)
        apps = await list_ui_resources(direct, RequestLink(ctx, client), client)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="capabilities",
                    title="What run_python offers",
                    uri=CAPABILITIES_URI,
                    mime_type="text/markdown",
                    description="One-page summary of the sandbox and the in-sandbox mcp API.",
                ),
                *apps,
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[BridgeState], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if str(params.uri).startswith(UI_SCHEME):
            await _open_gateway(ctx, direct, wait=False)
            client = _client_of(ctx)
            return await read_ui_resource(direct, str(params.uri), RequestLink(ctx, client), client)
        if str(params.uri) != CAPABILITIES_URI:
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {params.uri}")
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=CAPABILITIES_URI, mime_type="text/markdown", text=CAPABILITIES_TEXT
                )
            ]
        )

    async def list_prompts(
        ctx: ServerRequestContext[BridgeState], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name=WORKFLOW_PROMPT_NAME, description=WORKFLOW_PROMPT_DESCRIPTION)
            ]
        )

    async def get_prompt(
        ctx: ServerRequestContext[BridgeState], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != WORKFLOW_PROMPT_NAME:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        return types.GetPromptResult(
            description=WORKFLOW_PROMPT_DESCRIPTION,
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=WORKFLOW_PROMPT_TEXT)
                )
            ],
        )

    server = _BridgeServer(
        SERVER_NAME,
        version=__version__,
        instructions="Use run_python; discover servers and tools from inside the code.",
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_subscriptions_listen=ListenHandler(bus),
    )
    # The SDK's default OpenTelemetry middleware opens a span per message even with no exporter
    # installed; measured ~3 ms of a ~10 ms stdio round trip on a loaded 2-core host. The
    # requestState boundary seals the run ids that input_required answers carry.
    server.middleware = [sealed_request_state()]
    serve_tasks(server)
    return server


def sealed_request_state() -> RequestStateBoundary:
    """The SDK's ``requestState`` boundary: what an ``input_required`` answer asks the client
    to send back is sealed (AES-GCM under a key of this process), bound to the call's tool and
    arguments and to the client, and expires with the approval question it carries."""
    security = RequestStateSecurity.ephemeral(ttl=REQUEST_STATE_TTL)
    security.bind_principal = _client_of
    return RequestStateBoundary(security, default_audience=SERVER_NAME)

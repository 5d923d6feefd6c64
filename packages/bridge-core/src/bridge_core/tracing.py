"""Spans of ``run_python`` executions and of the nested calls their code makes (OpenTelemetry).

The bridge instruments through the OpenTelemetry API only; whoever runs it decides where spans go
by calling :func:`enable` with a tracer provider (``mcp-code-execution-mode`` builds one from the
standard ``OTEL_*`` variables). Until then every function here returns at its first test: no
OpenTelemetry object is made, and an execution or a call costs one read of a global.

What a span may hold is decided here and nowhere else (``docs/observability.md``):

- an execution span: the session name, the outcome, the error's type name when it is a built-in
  exception type (a class sandbox code defines is :data:`UNKNOWN`: its name is sandbox text);
- a nested call span: the server and tool names when they resolve to a configured server and a
  tool it listed (asked of the gateway through :func:`naming`), else :data:`UNKNOWN`; a
  request's method when it is one the bridge answers, else :data:`UNKNOWN`; the status, the
  duration, and the sizes in bytes of the frames that carried the arguments and the result.

Never an argument or result value, never an error message (an upstream's error text can quote its
arguments or its credentials), never the code or its output, never a name sandbox code made up
(a hand-built tool name or exception class can carry a whole record).

Parenting goes through this module's own context variable, not OpenTelemetry's current context:
nested calls run in the sandbox's task group, not in the request handler's task (so the parent is
captured on the execution, see :func:`current_execution`), and the MCP SDK writes the current
OpenTelemetry context into the ``_meta`` of every request it sends — upstream servers get no trace
context of ours. The other way, an execution span continues the MCP client's trace when the
``run_python`` request carries a W3C ``traceparent`` in its ``_meta`` (MCP SEP-414).
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from bridge_core.audit import MAX_NAME_CHARS

if TYPE_CHECKING:
    from bridge_protocol import Call, Reply, Request
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "CallSpan",
    "current_execution",
    "disable",
    "enable",
    "enabled",
    "naming",
    "nested_call",
    "refused_call",
    "traced_execution",
]

logger = logging.getLogger(__name__)

INSTRUMENTATION_NAME = "mcp_code_execution_mode.bridge"
"""The instrumentation scope of every span the bridge makes."""

_tracer: Tracer | None = None
_execution: ContextVar[Span | None] = ContextVar("mcp_bridge_execution_span", default=None)

T = TypeVar("T")

UNKNOWN = "(unknown)"
"""What a span holds instead of a name that does not resolve (made up by sandbox code)."""
KNOWN_METHODS = frozenset(
    {
        "discovered_servers",
        "list_tools",
        "query_tool_docs",
        "search_tool_docs",
        "list_resources",
        "read_resource",
        "list_prompts",
        "get_prompt",
        "fork_session",
        "checkpoint",
        "restore_checkpoint",
        "list_checkpoints",
    }
)
"""The requests the bridge answers (a test checks this against the gateway and sessions)."""
_KNOWN_ERRORS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
) | {
    # The bridge's own (host) and the sandbox client's (a test checks these against its module):
    # fixed names, whoever raises them.
    "SandboxCrashed",
    "SandboxUnavailable",
    "CancelledError",
    "ToolError",
    "ToolTimeout",
    "PolicyDenied",
    "ApprovalDeclined",
    "UpstreamUnavailable",
    "UnknownServer",
    "UnknownTool",
    "InvalidArguments",
    "ToolCancelled",
    "TooManyCalls",
    "BridgeDisconnected",
}
_names: Callable[[str, str], bool] | None = None


@contextmanager
def naming(known: Callable[[str, str], bool]) -> Iterator[None]:
    """While in the block, ``known(server, tool)`` says whether a nested call's names resolve to
    a configured server and a tool it listed (the gateway's answer; without one, no call's names
    are recorded)."""
    global _names
    previous, _names = _names, known
    try:
        yield
    finally:
        _names = previous


def error_type(name: str) -> str:
    """``name`` if it names a built-in exception type (or one of the bridge's and the sandbox
    client's own), else :data:`UNKNOWN`."""
    return name if name in _KNOWN_ERRORS else UNKNOWN


def enable(provider: TracerProvider) -> None:
    """Record spans through ``provider`` from now on (its processors decide where they go)."""
    global _tracer
    _tracer = provider.get_tracer(INSTRUMENTATION_NAME)


def disable() -> None:
    """Stop recording spans (spans already started still end)."""
    global _tracer
    _tracer = None


def enabled() -> bool:
    return _tracer is not None


def _cut(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


# --- the execution span -------------------------------------------------------------------------


async def traced_execution(
    execution: Awaitable[T], *, session: str | None, carrier: Mapping[str, Any] | None = None
) -> T:
    """Await ``execution`` (a ``run_python`` execution, returning an
    :class:`~bridge_core.sessions.types.ExecutionResult`) inside its span.

    ``carrier``: the request's ``_meta``; a W3C ``traceparent`` there (MCP SEP-414: a client's
    own trace) makes the span its child, else the span starts a trace.

    The span ends however the await ends: a result (its status and error type are recorded), an
    exception (its type name) or a cancellation (status ``cancelled``).
    """
    tracer = _tracer
    if tracer is None:
        return await execution
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "run_python",
    }
    if session is not None:
        attributes["mcp_bridge.session"] = _cut(session)
    span = tracer.start_span(
        "tools/call run_python",
        context=_remote_parent(carrier),
        kind=SpanKind.SERVER,
        attributes=attributes,
    )
    token = _execution.set(span)
    try:
        result = await execution
    except anyio.get_cancelled_exc_class():
        # The client cancelled the request or went away; the bridge is shutting down.
        _ended(span, "cancelled", "cancelled")
        raise
    except BaseException as exc:
        # Refused before running (invalid code, session limit) or a failure of the bridge.
        _ended(span, "bridge_error", type(exc).__name__)
        raise
    else:
        status = str(getattr(result, "status", "ok"))
        error = getattr(result, "error", None)
        # The error's type is the name of the sandbox code's exception class: sandbox text.
        kind = error_type(str(getattr(error, "type", None))) if error is not None else status
        _ended(span, status, None if status == "ok" and error is None else kind)
        return result
    finally:
        _execution.reset(token)
        span.end()


async def traced_direct_call(
    call: Awaitable[dict[str, Any]],
    *,
    server: str,
    tool: str,
    carrier: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Await a direct tool call (a client calling ``server__tool`` itself, no sandbox) inside a
    SERVER span of its own, a child of the client's trace when ``carrier`` has one. The span is
    named after the tool only once the names resolve to a configured server's tool, as a nested
    call's; its status is ``ok``, ``tool_error``, the refusal's type or ``cancelled``."""
    tracer = _tracer
    if tracer is None:
        return await call
    from opentelemetry.trace import SpanKind

    span = tracer.start_span(
        f"tools/call {UNKNOWN}",
        context=_remote_parent(carrier),
        kind=SpanKind.SERVER,
        attributes={
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": UNKNOWN,
            "mcp_bridge.server": UNKNOWN,
            "mcp_bridge.call.direct": True,
        },
    )
    started = time.monotonic()
    status = "cancelled"
    try:
        result = await call
        status = "tool_error" if result.get("isError") is True else "ok"
        return result
    except anyio.get_cancelled_exc_class():
        raise
    except BaseException as exc:
        status = _refusal(exc)
        raise
    finally:
        attributes: dict[str, Any] = {
            "mcp_bridge.call.duration_s": time.monotonic() - started,
            "mcp_bridge.call.status": status,
        }
        if _resolves(server, tool):
            attributes.update({"gen_ai.tool.name": _cut(tool), "mcp_bridge.server": _cut(server)})
            span.update_name(f"tools/call {_cut(tool)}")
        if status != "ok":
            _failed(span, attributes, status)
        span.set_attributes(attributes)
        span.end()


def _refusal(exc: BaseException) -> str:
    """A failed direct call's status: the bridge's error code (``policy_denied``…), else the
    exception's type as :func:`error_type` shows it."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        from bridge_protocol import ErrorCode

        try:
            return ErrorCode(code).name.lower()
        except ValueError:
            pass
    return error_type(type(exc).__name__)


MAX_TRACESTATE_CHARS = 512
"""The W3C recommendation for ``tracestate``; a longer one from the client is dropped."""


def _remote_parent(carrier: Mapping[str, Any] | None) -> Context | None:
    """The client's trace context from a request's ``_meta`` (None if absent or malformed)."""
    if not carrier or not isinstance(carrier.get("traceparent"), str):
        return None
    from opentelemetry.trace import get_current_span
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    headers = {"traceparent": carrier["traceparent"][:MAX_TRACESTATE_CHARS]}
    state = carrier.get("tracestate")
    if isinstance(state, str) and len(state) <= MAX_TRACESTATE_CHARS:
        headers["tracestate"] = state
    # Only the W3C trace context, never baggage (the client's key-values are not ours to record).
    context = TraceContextTextMapPropagator().extract(headers)
    return context if get_current_span(context).get_span_context().is_valid else None


def current_execution() -> Span | None:
    """The span of the execution being started in this task (None when tracing is off): an
    execution keeps it as the parent of the nested calls its code makes."""
    return _execution.get()


def _ended(span: Span, status: str, error_type: str | None) -> None:
    attributes: dict[str, Any] = {"mcp_bridge.execution.status": status}
    if error_type is not None:
        _failed(span, attributes, error_type)
    span.set_attributes(attributes)


def _failed(span: Span, attributes: dict[str, Any], error_type: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    attributes["error.type"] = error_type
    # No description: the span says which failure by type, never by a message.
    span.set_status(Status(StatusCode.ERROR))


# --- nested call spans --------------------------------------------------------------------------


class CallSpan:
    """The span of one nested call or request, ended by :meth:`end` (cancelled unless
    :meth:`replied` was called first)."""

    __slots__ = ("_call", "_result_bytes", "_span", "_started", "_status")

    def __init__(self, span: Span | None, call: tuple[str, str] | None = None) -> None:
        self._span = span
        self._call = call
        self._started = time.monotonic()
        self._status = "cancelled"
        self._result_bytes: int | None = None

    def replied(self, reply: Reply, size: int | None) -> None:
        """The host answers with ``reply``, a frame of ``size`` bytes (None: not measured)."""
        if self._span is None:
            return
        self._result_bytes = size
        if reply.fault is not None:
            try:
                from bridge_protocol import ErrorCode  # loaded by then: a reply was decoded

                self._status = ErrorCode(reply.fault.code).name.lower()
            except ValueError:
                self._status = "error"
        elif isinstance(reply.value, dict) and reply.value.get("isError") is True:
            self._status = "tool_error"
        else:
            self._status = "ok"

    def end(self) -> None:
        """End the span (idempotent)."""
        span, self._span = self._span, None
        if span is None:
            return
        attributes: dict[str, Any] = {
            "mcp_bridge.call.duration_s": time.monotonic() - self._started,
            "mcp_bridge.call.status": self._status,
        }
        if self._result_bytes is not None:
            attributes["mcp_bridge.call.result_bytes"] = self._result_bytes
        if self._call is not None and _resolves(*self._call):
            # Asked at the end: by then a first call has started its server and listed its tools.
            server, tool = self._call
            attributes.update({"gen_ai.tool.name": _cut(tool), "mcp_bridge.server": _cut(server)})
            span.update_name(f"tools/call {_cut(tool)}")
        if self._status != "ok":
            _failed(span, attributes, self._status)
        span.set_attributes(attributes)  # one call: the SDK takes a lock per call
        span.end()


_NO_SPAN = CallSpan(None)


def nested_call(parent: Span | None, message: Call | Request, size: int) -> CallSpan:
    """Start the span of a call (or request) from sandbox code in the execution whose span is
    ``parent``; ``size``: bytes of the frame that carried it. A no-op span when tracing is off."""
    tracer = _tracer
    if tracer is None or parent is None:
        return _NO_SPAN
    from opentelemetry.trace import SpanKind, set_span_in_context

    attributes: dict[str, Any] = {"mcp_bridge.call.arguments_bytes": size}
    from bridge_protocol import Call  # loaded by then: the message was decoded

    call: tuple[str, str] | None = None
    if isinstance(message, Call):
        # The names are sandbox text until the gateway says they resolve (at the span's end).
        call = (message.server, message.tool)
        name = f"tools/call {UNKNOWN}"
        attributes.update({
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": UNKNOWN,
            "mcp_bridge.server": UNKNOWN,
        })  # fmt: skip
    else:
        method = message.method if message.method in KNOWN_METHODS else UNKNOWN
        name = f"runtime.{method}"
        attributes["mcp_bridge.request.method"] = method
    try:
        span = tracer.start_span(
            name, context=set_span_in_context(parent), kind=SpanKind.CLIENT, attributes=attributes
        )
    except Exception:  # a broken tracer provider must not cost the call (or its budget)
        logger.exception("tracing: cannot start the span of a nested call")
        return _NO_SPAN
    return CallSpan(span, call)


def _resolves(server: str, tool: str) -> bool:
    known = _names
    if known is None:
        return False
    try:
        return known(server, tool)
    except Exception:  # a lookup failure records no name, and never costs the call
        logger.exception("tracing: cannot resolve the names of a nested call")
        return False


def refused_call(parent: Span | None, message: Call | Request, size: int, reply: Reply) -> None:
    """Record a call the host refused at once (``reply``, before anything was forwarded)."""
    span = nested_call(parent, message, size)
    span.replied(reply, None)
    span.end()

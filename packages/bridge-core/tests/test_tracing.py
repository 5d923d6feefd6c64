"""Spans through the real OpenTelemetry SDK (its in-memory exporter): what each span holds, and
that every path ends it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from bridge_core import tracing
from bridge_core.sessions.types import ExecutionResult
from bridge_protocol import Call, ErrorCode, ErrorInfo, Fault, Reply, Request
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

VALUE = "a-value-that-must-never-be-in-a-span"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()


def _result(status: str = "ok", error: ErrorInfo | None = None) -> ExecutionResult:
    return ExecutionResult(
        status=status,  # type: ignore[arg-type]
        session="s",
        stdout=VALUE,
        error=error,
    )


def _only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def _everything(exporter: InMemorySpanExporter) -> str:
    finished = exporter.get_finished_spans()
    return repr([(s.name, dict(s.attributes or {}), s.status) for s in finished])


async def test_without_a_provider_nothing_is_traced_and_calls_get_the_no_op_span() -> None:
    async def execution() -> str:
        assert tracing.current_execution() is None
        span = tracing.nested_call(None, Call(1, "e", "s", "t", {}), 10)
        span.replied(Reply(1, value={}), 5)
        span.end()
        return "done"

    assert not tracing.enabled()
    assert await tracing.traced_execution(execution(), session=None) == "done"


def _files(server: str, tool: str) -> bool:
    return server == "files" and tool in ("read", "write", "rm")


async def test_nested_calls_are_children_with_sizes_and_status_never_values(
    spans: InMemorySpanExporter,
) -> None:
    async def execution() -> ExecutionResult:
        parent = tracing.current_execution()
        ok = tracing.nested_call(parent, Call(1, "e", "files", "read", {"path": VALUE}), 120)
        ok.replied(Reply(1, value={"content": [{"type": "text", "text": VALUE}]}), 300)
        ok.end()
        failed = tracing.nested_call(parent, Call(2, "e", "files", "write", {"x": VALUE}), 80)
        failed.replied(Reply(2, value={"isError": True, "content": []}), 40)
        failed.end()
        denied = tracing.nested_call(parent, Call(3, "e", "files", "rm", {}), 20)
        denied.replied(Reply(3, fault=Fault(int(ErrorCode.POLICY_DENIED), VALUE)), 90)
        denied.end()
        search = tracing.nested_call(parent, Request(4, "e", "search_tool_docs", {"q": VALUE}), 50)
        search.end()  # cancelled: never replied
        return _result()

    with tracing.naming(_files):
        await tracing.traced_execution(execution(), session="work")
    execution_span = _only(spans, "tools/call run_python")
    assert execution_span.attributes == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "run_python",
        "mcp_bridge.session": "work",
        "mcp_bridge.execution.status": "ok",
    }
    read = _only(spans, "tools/call read")
    assert read.parent is not None
    assert read.parent.span_id == execution_span.context.span_id
    assert read.attributes is not None
    assert read.attributes["mcp_bridge.server"] == "files"
    assert read.attributes["mcp_bridge.call.arguments_bytes"] == 120
    assert read.attributes["mcp_bridge.call.result_bytes"] == 300
    assert read.attributes["mcp_bridge.call.status"] == "ok"
    assert read.status.status_code is StatusCode.UNSET
    statuses = {
        name: (_only(spans, name).attributes or {}).get("error.type")
        for name in ("tools/call write", "tools/call rm", "runtime.search_tool_docs")
    }
    assert statuses == {
        "tools/call write": "tool_error",
        "tools/call rm": "policy_denied",
        "runtime.search_tool_docs": "cancelled",
    }
    assert VALUE not in _everything(spans)


async def test_a_failed_execution_records_the_error_type_not_its_message(
    spans: InMemorySpanExporter,
) -> None:
    async def execution() -> ExecutionResult:
        return _result("error", ErrorInfo("KeyError", VALUE, f"Traceback ... {VALUE}"))

    await tracing.traced_execution(execution(), session=None)
    span = _only(spans, "tools/call run_python")
    assert span.attributes is not None
    assert span.attributes["mcp_bridge.execution.status"] == "error"
    assert span.attributes["error.type"] == "KeyError"
    assert span.status.status_code is StatusCode.ERROR
    assert VALUE not in _everything(spans)


async def test_a_cancelled_execution_and_a_bridge_failure_still_end_their_spans(
    spans: InMemorySpanExporter,
) -> None:
    started = anyio.Event()

    async def hangs() -> Any:
        started.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: tracing.traced_execution(hangs(), session="a"))
        await started.wait()
        tg.cancel_scope.cancel()

    async def fails() -> Any:
        raise ValueError(VALUE)

    with pytest.raises(ValueError):
        await tracing.traced_execution(fails(), session="b")
    cancelled, failed = spans.get_finished_spans()
    assert cancelled.attributes is not None
    assert failed.attributes is not None
    assert cancelled.attributes["mcp_bridge.execution.status"] == "cancelled"
    assert failed.attributes["mcp_bridge.execution.status"] == "bridge_error"
    assert failed.attributes["error.type"] == "ValueError"
    assert VALUE not in _everything(spans)


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("meta", "joined"),
    [
        ({"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "k=v"}, True),
        ({"traceparent": "00-not-a-trace-context-01"}, False),
        ({"traceparent": 42}, False),
        ({"progressToken": 1}, False),
        (None, False),
    ],
)
async def test_an_execution_continues_the_clients_trace_when_its_request_carries_one(
    spans: InMemorySpanExporter, meta: dict[str, Any] | None, joined: bool
) -> None:
    async def execution() -> ExecutionResult:
        return _result()

    await tracing.traced_execution(execution(), session=None, carrier=meta)
    span = _only(spans, "tools/call run_python")
    if joined:
        assert span.parent is not None
        assert span.parent.is_remote
        assert f"{span.context.trace_id:032x}" == TRACE_ID
        assert f"{span.parent.span_id:016x}" == PARENT_ID
    else:
        assert span.parent is None


async def test_names_made_up_by_sandbox_code_never_reach_a_span(
    spans: InMemorySpanExporter,
) -> None:
    # A hand-built tool or server name, a request method and an exception class name can each
    # carry a whole record: only names the gateway resolves, the bridge's methods and built-in
    # exception types are recorded; anything else is the fixed placeholder.
    record = "alice@example.com;diagnosis=" + VALUE

    async def execution() -> ExecutionResult:
        parent = tracing.current_execution()
        for message in (
            Call(1, "e", "files", record, {}),
            Call(2, "e", record, "read", {}),
            Request(3, "e", record, {}),
            Call(4, "e", "files", "read", {}),
        ):
            span = tracing.nested_call(parent, message, 9)
            span.replied(Reply(message.call_id, value={}), 5)
            span.end()
        return _result("error", ErrorInfo(f"Leak_{record}", "m", "tb"))

    with tracing.naming(_files):
        await tracing.traced_execution(execution(), session=None)
    assert record not in _everything(spans)
    assert VALUE not in _everything(spans)
    names = sorted(s.name for s in spans.get_finished_spans())
    assert names == [
        "runtime.(unknown)",
        "tools/call (unknown)",
        "tools/call (unknown)",
        "tools/call read",
        "tools/call run_python",
    ]
    execution_span = _only(spans, "tools/call run_python")
    assert (execution_span.attributes or {})["error.type"] == tracing.UNKNOWN


async def test_without_a_gateway_to_resolve_them_no_call_names_are_recorded(
    spans: InMemorySpanExporter,
) -> None:
    async def execution() -> ExecutionResult:
        span = tracing.nested_call(tracing.current_execution(), Call(1, "e", "s", "t", {}), 9)
        span.end()
        return _result()

    await tracing.traced_execution(execution(), session=None)
    call = _only(spans, "tools/call (unknown)")
    assert (call.attributes or {})["mcp_bridge.server"] == tracing.UNKNOWN


def test_the_known_methods_and_error_names_are_the_products_own() -> None:
    import bridge_sandbox_client.errors as sandbox_errors
    from bridge_core.proxy._resources import RESOURCE_METHODS
    from bridge_core.sessions._checkpoints import METHODS as CHECKPOINT_METHODS
    from bridge_core.sessions._durable import FORK_METHOD

    catalog = {"discovered_servers", "list_tools", "query_tool_docs", "search_tool_docs"}
    known = RESOURCE_METHODS | {FORK_METHOD} | CHECKPOINT_METHODS | catalog
    assert known == tracing.KNOWN_METHODS
    for name, value in vars(sandbox_errors).items():
        if isinstance(value, type) and issubclass(value, Exception) and not name.startswith("_"):
            assert tracing.error_type(name) == name
    assert tracing.error_type("KeyError") == "KeyError"
    assert tracing.error_type("MyError") == tracing.UNKNOWN

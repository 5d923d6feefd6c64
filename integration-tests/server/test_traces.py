"""Traces: the real bridge, driven by a real MCP client, exports its spans over OTLP/HTTP to a real
receiver (the wire format decoded by ``opentelemetry-proto``), and a collector that is down or
stuck costs the calls nothing."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from .conftest import bridge_text, code_text, open_bridge, open_http_bridge
from .otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
SERVERS = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
ARGUMENT = "argument-value-never-exported-7f3a"
HEADER_SECRET = "otlp-header-secret-9c1d2e4b"
CODE = f"""
from mcp import mcp_servers
probe = mcp_servers["probe"]
echoed = await probe.echo(text="{ARGUMENT}")
try:
    await probe.fail_is_error()
except Exception as exc:
    failure = type(exc).__name__
print("calls made")
"""
CLIENT_TRACE, CLIENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
SPAN_KIND_SERVER, SPAN_KIND_CLIENT = 2, 3
STATUS_ERROR = 2
WAIT = 60.0


def _named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def _has_session(session: str) -> Callable[[list[ReceivedSpan]], bool]:
    def found(spans: list[ReceivedSpan]) -> bool:
        return any(s.attributes.get("mcp_bridge.session") == session for s in spans)

    return found


async def _wait_for_spans(receiver: OtlpReceiver, *names: str) -> list[ReceivedSpan]:
    def found(spans: list[ReceivedSpan]) -> bool:
        return all(_named(spans, name) for name in names)

    assert await anyio.to_thread.run_sync(receiver.wait_for, found, WAIT), [
        s.name for s in receiver.spans
    ]
    return list(receiver.spans)


async def test_run_python_and_its_nested_calls_reach_a_real_otlp_receiver_without_values(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{HEADER_SECRET}",
            "OTEL_BSP_SCHEDULE_DELAY": "50",  # export within the test, not only at exit
        }
        async with open_bridge(tmp_path, servers=SERVERS, env=env) as bridge:
            # The client's own trace context (MCP SEP-414): the bridge's spans join its trace.
            result = await bridge.session.call_tool(  # type: ignore[call-overload]
                "run_python",
                {"code": CODE, "session": "traced"},
                read_timeout_seconds=120,
                meta={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"},
            )
            assert code_text(result) == "calls made", bridge_text(result)
            spans = await _wait_for_spans(
                receiver, "tools/call run_python", "tools/call echo", "tools/call fail_is_error"
            )

    [execution] = _named(spans, "tools/call run_python")
    assert execution.kind == SPAN_KIND_SERVER
    assert (execution.trace_id.hex(), execution.parent_span_id.hex()) == (CLIENT_TRACE, CLIENT_SPAN)
    assert execution.attributes["mcp_bridge.session"] == "traced"
    assert execution.attributes["mcp_bridge.execution.status"] == "ok"
    assert execution.resource["service.name"] == "mcp-code-execution-mode"

    [echo] = _named(spans, "tools/call echo")
    assert (echo.trace_id, echo.parent_span_id) == (execution.trace_id, execution.span_id)
    assert echo.kind == SPAN_KIND_CLIENT
    assert echo.attributes["mcp_bridge.server"] == "probe"
    assert echo.attributes["gen_ai.tool.name"] == "echo"
    assert echo.attributes["mcp_bridge.call.status"] == "ok"
    assert echo.attributes["mcp_bridge.call.arguments_bytes"] > len(ARGUMENT)
    assert echo.attributes["mcp_bridge.call.result_bytes"] > len(ARGUMENT)
    assert echo.attributes["mcp_bridge.call.duration_s"] > 0
    assert "error.type" not in echo.attributes

    [failed] = _named(spans, "tools/call fail_is_error")
    assert failed.parent_span_id == execution.span_id
    assert failed.attributes["mcp_bridge.call.status"] == "tool_error"
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status_code == STATUS_ERROR

    # Nothing of the arguments, the results or the code reached the collector, in any request.
    everything = b"".join(receiver.bodies)
    for value in (ARGUMENT, "calls made", "mcp_servers"):
        assert value.encode() not in everything
    # The configured headers were sent, and never logged.
    assert all(h.get("authorization") == f"Bearer {HEADER_SECRET}" for h in receiver.headers)
    log = (bridge.state_dir / "logs" / "bridge.log").read_text(encoding="utf-8")
    assert "traces: exported over OTLP/HTTP (endpoint from OTEL_EXPORTER_OTLP_ENDPOINT)" in log
    assert HEADER_SECRET not in log


async def test_a_direct_call_is_a_server_span_in_the_clients_trace_without_values(
    tmp_path: Path, sandbox_image: str
) -> None:
    with otlp_receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        async with open_bridge(
            tmp_path, servers=SERVERS, env=env, args=("--tools", "direct")
        ) as bridge:
            result = await bridge.session.call_tool(  # type: ignore[call-overload]
                "probe__echo",
                {"text": ARGUMENT},
                read_timeout_seconds=120,
                meta={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"},
            )
            failed = await bridge.session.call_tool("probe__fail_is_error", {})
            assert not result.is_error
            assert failed.is_error
            spans = await _wait_for_spans(receiver, "tools/call echo", "tools/call fail_is_error")
    [echo] = _named(spans, "tools/call echo")
    assert echo.kind == SPAN_KIND_SERVER
    assert (echo.trace_id.hex(), echo.parent_span_id.hex()) == (CLIENT_TRACE, CLIENT_SPAN)
    assert echo.attributes["mcp_bridge.server"] == "probe"
    assert echo.attributes["mcp_bridge.call.direct"] is True
    assert echo.attributes["mcp_bridge.call.status"] == "ok"
    [fail] = _named(spans, "tools/call fail_is_error")
    assert fail.attributes["mcp_bridge.call.status"] == "tool_error"
    assert fail.status_code == STATUS_ERROR
    assert ARGUMENT.encode() not in b"".join(receiver.bodies)


RECORD = "alice.smith@example.org|diagnosis:F32.1|salary:84200"
SMUGGLING = f"""
from bridge_sandbox_client._calls import CallRegistry
from mcp import mcp_servers, UnknownTool
probe = mcp_servers["probe"]
# A call frame with a hand-built tool name, past the client's own lookup.
try:
    await CallRegistry.wait(probe.echo._registry.call("probe", {RECORD!r}, {{}}))
except UnknownTool:
    pass
await probe.echo(text="x")
class Leak(Exception):
    pass
raise type({RECORD.replace(".", "_").replace("|", "_").replace(":", "_")!r}, (Leak,), {{}})()
"""


async def test_names_made_up_by_sandbox_code_never_reach_the_receiver(tmp_path: Path) -> None:
    # A hand-built tool name and an exception class name each carry a record: the spans hold
    # the fixed placeholder instead, and the names that resolve (probe, echo) as before.
    with otlp_receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        async with open_bridge(tmp_path, servers=SERVERS, env=env) as bridge:
            result = await bridge.run(SMUGGLING)
            assert result.is_error, bridge_text(result)
            spans = await _wait_for_spans(
                receiver, "tools/call run_python", "tools/call echo", "tools/call (unknown)"
            )
    everything = b"".join(receiver.bodies)
    for part in ("alice", "diagnosis", "84200"):
        assert part.encode() not in everything, part
    [execution] = _named(spans, "tools/call run_python")
    assert execution.attributes["error.type"] == "(unknown)"
    [unknown] = _named(spans, "tools/call (unknown)")
    assert unknown.attributes["mcp_bridge.server"] == "(unknown)"
    assert unknown.attributes["mcp_bridge.call.status"] == "unknown_tool"


async def test_a_collector_that_never_answers_neither_holds_calls_nor_the_bridge_exit(
    tmp_path: Path,
) -> None:
    with otlp_receiver(hold=True) as collector:
        env = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{collector.url}/v1/traces",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            # Far longer than open_http_bridge waits for the bridge to exit (30 s).
            "OTEL_EXPORTER_OTLP_TIMEOUT": "300",
        }
        async with (
            open_http_bridge(tmp_path, env=env, servers=SERVERS) as bridge,
            bridge.session() as client,
        ):
            first = await client.run("print('first')")
            assert code_text(first) == "first"
            assert await anyio.to_thread.run_sync(collector.held.wait, WAIT)
            # The exporter now waits for an answer that never comes; calls go on regardless.
            second = await client.run(CODE)
            assert code_text(second) == "calls made", bridge_text(second)
            assert not collector._release.is_set()
            assert collector.spans == []
    log = (bridge.state_dir / "logs" / "bridge.log").read_text(encoding="utf-8")
    assert "traces: the spans still queued were not exported within 1 s of shutdown" in log


async def test_a_collector_that_is_down_is_reported_once_and_its_return_once(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on (yet)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }
    async with (
        open_http_bridge(tmp_path, env=env, servers=SERVERS) as bridge,
        bridge.session() as client,
    ):
        for n in range(3):
            result = await client.run(f"print({n})")
            assert code_text(result) == f"{n}"
        down = await bridge.stderr.wait_for("traces: the OTLP endpoint", within=WAIT)
        with otlp_receiver(port=port) as receiver:
            await client.run("print('back')", session="back")
            await bridge.stderr.wait_for("takes spans again", start=down, within=WAIT)
            # The spans are sent in order: once this one is in, nothing older is left to send.
            assert await anyio.to_thread.run_sync(receiver.wait_for, _has_session("back"), WAIT)
    said = bridge.stderr.text
    assert said.count("did not take") == 1
    assert said.count("takes spans again") == 1


async def test_an_endpoint_that_is_no_url_is_refused_naming_the_variable_never_its_value(
    tmp_path: Path,
) -> None:
    secret = "pw-never-shown-5e6f7a"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"collector:{secret}@4318"}
    async with open_bridge(tmp_path, env=env) as bridge:
        result = await bridge.run("print(1)")
    assert result.is_error is True
    text = bridge_text(result)
    assert "OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or https:// URL" in text
    assert secret not in text

"""ProxyGateway: policy, catalog, error shapes, secrets and audit, with the probe server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.audit import AuditLog
from bridge_core.catalog import ToolCache
from bridge_core.gateway import CallContext, CallFailed
from bridge_core.policy import Policy
from bridge_core.proxy import ProxyOptions, open_proxy
from bridge_protocol import ErrorCode

from .conftest import ProbeFactory

CTX = CallContext(session="s1", execution_id="e1")


async def test_call_returns_the_camelcase_call_tool_result(probe: ProbeFactory) -> None:
    async with open_proxy([probe()]) as gateway:
        echo = await gateway.call_tool(CTX, "probe", "echo", {"text": "hi"})
        slept = await gateway.call_tool(CTX, "probe", "sleep", {"seconds": 0})
    assert echo["content"] == [{"type": "text", "text": "hi"}]
    assert echo.get("isError") in (None, False)
    assert set(slept["structuredContent"]) == {"started", "ended"}


async def test_is_error_result_is_returned_and_jsonrpc_error_raises_tool_error(
    probe: ProbeFactory,
) -> None:
    async with open_proxy([probe()]) as gateway:
        result = await gateway.call_tool(CTX, "probe", "fail_is_error", {})
        with pytest.raises(CallFailed) as caught:
            await gateway.call_tool(CTX, "probe", "fail_rpc", {})
    assert result["isError"] is True
    assert caught.value.code == ErrorCode.TOOL_ERROR
    assert caught.value.data == {
        "server": "probe",
        "tool": "fail_rpc",
        "code": -32603,
        "message": "the tool raised on purpose",
    }


async def test_unknown_tool_is_refused_with_close_names(probe: ProbeFactory) -> None:
    async with open_proxy([probe()]) as gateway:
        with pytest.raises(CallFailed) as caught:
            await gateway.call_tool(CTX, "probe", "ecko", {"text": "x"})
    assert caught.value.code == ErrorCode.UNKNOWN_TOOL
    assert isinstance(caught.value.data, dict)
    assert caught.value.data["suggestions"][0] == "echo"


async def test_unknown_server_is_refused_with_close_names_and_starts_nothing(
    probe: ProbeFactory,
) -> None:
    async with open_proxy([probe(name="filesystem")]) as gateway:
        with pytest.raises(CallFailed) as caught:
            await gateway.call_tool(CTX, "filesytem", "read_file", {})
        assert not gateway.pool.is_running("filesystem")
    assert caught.value.code == ErrorCode.UNKNOWN_SERVER
    assert "filesystem" in caught.value.message


async def test_policy_denial_names_the_rule_and_starts_nothing(probe: ProbeFactory) -> None:
    policy = Policy.from_settings(deny_tools="probe.crash")
    async with open_proxy([probe()], policy=policy) as gateway:
        with pytest.raises(CallFailed) as caught:
            await gateway.call_tool(CTX, "probe", "crash", {"status": 1})
        assert not gateway.pool.is_running("probe")
        names = await gateway.request(CTX, "list_tools", {"server": "probe"})
    assert caught.value.code == ErrorCode.POLICY_DENIED
    assert "[policy] deny_tools=probe.crash" in caught.value.message
    assert isinstance(names, list)
    assert "crash" not in names
    assert "echo" in names


async def test_slow_call_fails_with_call_timeout(probe: ProbeFactory) -> None:
    async with open_proxy([probe()], options=ProxyOptions(call_timeout=0.2)) as gateway:
        with pytest.raises(CallFailed) as caught:
            await gateway.call_tool(CTX, "probe", "sleep", {"seconds": 30})
    assert caught.value.code == ErrorCode.CALL_TIMEOUT
    assert "[servers] call_timeout" in caught.value.message


async def test_crash_report_reaches_the_sandbox_with_the_servers_secrets_masked(
    probe: ProbeFactory,
) -> None:
    secret = "hunter2-very-secret"
    async with open_proxy([probe(env={"PROBE_TOKEN": secret})]) as gateway:
        with pytest.raises(CallFailed) as caught:
            await gateway.call_tool(
                CTX, "probe", "crash", {"status": 4, "message": f"bad token {secret}"}
            )
    assert caught.value.code == ErrorCode.UPSTREAM_UNAVAILABLE
    assert secret not in caught.value.message
    assert secret not in json.dumps(caught.value.data)
    assert "bad token ***" in caught.value.message
    assert isinstance(caught.value.data, dict)
    assert caught.value.data["exit_status"] == 4


async def test_audit_log_records_argument_sizes_and_outcomes_never_values(
    probe: ProbeFactory, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    policy = Policy.from_settings(deny_tools="hang")
    async with open_proxy([probe()], policy=policy, audit=AuditLog(log)) as gateway:
        await gateway.call_tool(CTX, "probe", "echo", {"text": "classified-value"})
        with pytest.raises(CallFailed):
            await gateway.call_tool(CTX, "probe", "hang", {})
    text = log.read_text()
    assert "classified-value" not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["arguments"] == {"text": len(json.dumps("classified-value"))}
    assert (first["session"], first["execution"], first["server"], first["tool"]) == (
        "s1",
        "e1",
        "probe",
        "echo",
    )
    assert (first["outcome"], second["outcome"]) == ("ok", "denied")
    assert "[policy] deny_tools=hang" in second["detail"]


async def test_search_answers_from_the_persisted_cache_without_starting_the_server(
    probe: ProbeFactory, tmp_path: Path
) -> None:
    cache = ToolCache(tmp_path)
    async with open_proxy([probe()], cache=cache) as gateway:
        await gateway.call_tool(CTX, "probe", "echo", {"text": "warm"})  # lists and caches tools
    async with open_proxy([probe()], cache=cache) as gateway:
        hits: Any = await gateway.request(
            CTX, "search_tool_docs", {"query": "echo text", "limit": 3}
        )
        servers: Any = await gateway.request(CTX, "discovered_servers", {"detailed": True})
        assert not gateway.pool.is_running("probe")
    assert hits[0]["server"] == "probe"
    assert hits[0]["tool"] == "echo"
    assert servers[0]["tool_count"] == 12


async def test_tools_list_changed_reaches_the_catalog(probe: ProbeFactory) -> None:
    async with open_proxy([probe()]) as gateway:
        await gateway.call_tool(CTX, "probe", "echo", {"text": "start"})
        updated = anyio.Event()
        set_tools = gateway.catalog.set_tools

        async def spy(server: str, tools: Any, **kwargs: Any) -> None:
            await set_tools(server, tools, **kwargs)
            if any(t.name == "late_tool" for t in tools):
                updated.set()

        gateway.catalog.set_tools = spy  # type: ignore[method-assign]
        await gateway.call_tool(CTX, "probe", "add_tool", {"name": "late_tool"})
        with anyio.fail_after(10):
            await updated.wait()
        docs: Any = await gateway.request(
            CTX, "query_tool_docs", {"server": "probe", "tool": "late_tool"}
        )
        called = await gateway.call_tool(CTX, "probe", "late_tool", {})
    assert docs["tools"][0]["name"] == "late_tool"
    assert called["content"][0]["text"] == "late_tool ran"


async def test_arguments_json_cannot_carry_are_refused_as_invalid(probe: ProbeFactory) -> None:
    async with open_proxy([probe()]) as gateway:
        for bad in ({"text": b"\xff"}, {"text": float("nan")}, {"text": {1, 2}}):
            with pytest.raises(CallFailed) as caught:
                await gateway.call_tool(CTX, "probe", "echo", bad)
            assert caught.value.code == ErrorCode.INVALID_ARGUMENTS
        assert not gateway.pool.is_running("probe")


async def test_a_lookup_and_a_forged_call_get_the_same_decision(probe: ProbeFactory) -> None:
    policy = Policy.from_settings(deny_tools="probe.crash")
    async with open_proxy([probe()], policy=policy) as gateway:
        answers = []
        for tool in ("ech", "crash"):
            with pytest.raises(CallFailed) as looked_up:
                await gateway.request(
                    CTX, "query_tool_docs", {"server": "probe", "tool": tool, "detail": "summary"}
                )
            with pytest.raises(CallFailed) as called:
                await gateway.call_tool(CTX, "probe", tool, {})
            answers.append((looked_up.value, called.value))
    (unknown_lookup, unknown_call), (denied_lookup, denied_call) = answers
    assert unknown_lookup.code == unknown_call.code == ErrorCode.UNKNOWN_TOOL
    assert unknown_lookup.message == unknown_call.message
    assert unknown_call.message == "server 'probe' has no tool 'ech': did you mean 'echo'?"
    assert unknown_lookup.data == unknown_call.data == {"suggestions": ["echo"]}
    assert denied_lookup.code == denied_call.code == ErrorCode.POLICY_DENIED
    assert denied_lookup.message == denied_call.message
    assert denied_call.data == {"rule": "[policy] deny_tools=probe.crash"}


async def test_successful_results_of_a_tool_without_a_schema_give_it_an_observed_shape(
    probe: ProbeFactory,
) -> None:
    async with open_proxy([probe()]) as gateway:
        await gateway.call_tool(CTX, "probe", "sleep", {"seconds": 0})
        await gateway.call_tool(CTX, "probe", "sleep", {"seconds": 0})
        await gateway.call_tool(CTX, "probe", "echo", {"text": "prose"})
        await gateway.call_tool(CTX, "probe", "fail_is_error", {})
        docs: Any = await gateway.request(
            CTX, "query_tool_docs", {"server": "probe", "tool": "sleep", "detail": "stub"}
        )
        shape = await gateway.catalog.result_shape("probe", "sleep")
        assert await gateway.catalog.result_shape("probe", "echo") is None
        assert await gateway.catalog.result_shape("probe", "fail_is_error") is None
    assert shape is not None
    schema, kind = shape
    assert kind == "observed"
    assert schema["properties"] == {"started": {"type": "number"}, "ended": {"type": "number"}}
    stub = docs["tools"][0]["stub"]
    assert "# SleepResult: observed (from 2 results); the tool declares no schema" in stub
    assert "class SleepResult(TypedDict):\n    started: float\n    ended: float" in stub

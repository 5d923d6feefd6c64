"""Workflow requests as the gateways answer them: routing, principals, search, audit, check."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.audit import AuditLog
from bridge_core.gateway import CallContext, CallFailed, NullGateway
from bridge_core.workflows import WorkflowService, WorkflowStore
from bridge_protocol import ErrorCode

REPORT = (
    "async def monthly_sales_report(month):\n"
    '    """Summarise the revenue of one month from the sales CSV."""\n'
    "    text = await mcp_servers['filesystem'].read_text_file(path='/data/sales.csv')\n"
    "    return text\n"
)
CLEAN = (
    "def tidy_notes():\n    '''Remove duplicate entities from the memory graph.'''\n    return 1\n"
)
ALICE = 'principal:["alice", null, "alice"]'


def ctx(client: str | None = None) -> CallContext:
    return CallContext("default", "e1", client_key=client)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[WorkflowService]:
    store = WorkflowStore(tmp_path / "workflows")
    store.open()
    yield WorkflowService(store, AuditLog(tmp_path / "audit.jsonl"))
    store.close()


async def save(gateway: NullGateway, source: str, name: str, client: str | None = None) -> object:
    params = {"name": name, "source": source, "description": None}
    return await gateway.request(ctx(client), "save_workflow", params)


async def test_a_gateway_with_no_servers_saves_lists_loads_and_deletes(
    service: WorkflowService,
) -> None:
    gateway = NullGateway(service)
    assert await save(gateway, REPORT, "monthly_sales_report") == {
        "name": "monthly_sales_report",
        "version": 1,
    }
    (listed,) = await gateway.request(ctx(), "list_workflows", {})
    assert listed["tools"] == ["filesystem.read_text_file"]
    assert listed["signature"] == "monthly_sales_report(month)"
    loaded = await gateway.request(ctx(), "get_workflow", {"name": "monthly_sales_report"})
    assert isinstance(loaded, dict)
    assert (loaded["source"], loaded["function"]) == (REPORT, "monthly_sales_report")
    deleted = await gateway.request(ctx(), "delete_workflow", {"name": "monthly_sales_report"})
    assert deleted == {"name": "monthly_sales_report", "deleted": [1]}
    assert await gateway.request(ctx(), "list_workflows", {}) == []


async def test_a_gateway_without_workflows_says_so() -> None:
    with pytest.raises(CallFailed) as refused:
        await NullGateway().request(ctx(), "list_workflows", {})
    assert refused.value.code == ErrorCode.UNKNOWN_METHOD


async def test_a_paraphrased_query_finds_the_workflow_and_search_tool_docs_marks_it(
    service: WorkflowService,
) -> None:
    gateway = NullGateway(service)
    await save(gateway, REPORT, "monthly_sales_report")
    await save(gateway, CLEAN, "tidy_notes")
    hits = await gateway.request(
        ctx(), "search_workflows", {"query": "summary of revenue per month", "limit": 5}
    )
    assert isinstance(hits, list)
    assert [h["name"] for h in hits][:1] == ["monthly_sales_report"]
    merged = await gateway.request(
        ctx(), "search_tool_docs", {"query": "monthly revenue summary", "limit": 3}
    )
    assert isinstance(merged, list)
    assert merged[0]["kind"] == "workflow"
    assert merged[0]["name"] == "monthly_sales_report"


async def test_tool_hits_keep_their_keys_and_are_marked_as_tools(service: WorkflowService) -> None:
    await save(NullGateway(service), REPORT, "monthly_sales_report")
    tools = [{"server": "time", "tool": "now", "description": "d", "score": 99.0}]
    merged = await service.add_to_search(ctx(), {"query": "sales month", "limit": 5}, tools)
    assert isinstance(merged, list)
    assert merged[0] == {**tools[0], "kind": "tool"}
    assert [h["kind"] for h in merged] == ["tool", "workflow"]


async def test_tool_hits_come_first_even_when_a_workflow_scores_higher(
    service: WorkflowService,
) -> None:
    # Code written for tool hits reads matches[0]["server"]: a workflow never takes that place.
    await save(NullGateway(service), REPORT, "monthly_sales_report")
    tools = [{"server": "time", "tool": "now", "description": "d", "score": 1.0}]
    merged = await service.add_to_search(
        ctx(), {"query": "monthly sales report", "limit": 1}, tools
    )
    assert isinstance(merged, list)
    assert merged[0]["server"] == "time"
    assert [h["kind"] for h in merged] == ["tool", "workflow"]


async def test_another_principal_finds_loads_and_deletes_nothing(service: WorkflowService) -> None:
    gateway = NullGateway(service)
    await save(gateway, REPORT, "monthly_sales_report", ALICE)
    assert await gateway.request(ctx(), "list_workflows", {}) == []
    found = await gateway.request(ctx(), "search_workflows", {"query": "monthly sales", "limit": 5})
    assert found == []
    for method in ("get_workflow", "delete_workflow"):
        with pytest.raises(CallFailed) as refused:
            await gateway.request(ctx(), method, {"name": "monthly_sales_report"})
        assert refused.value.code == ErrorCode.UNKNOWN_TOOL


@pytest.mark.parametrize(
    "params",
    [
        {"name": "../x", "source": CLEAN},
        {"name": ["a"], "source": CLEAN},
        {"name": "a", "source": 3},
        {"name": "a", "source": CLEAN, "description": {"x": 1}},
        {"name": "a", "source": CLEAN, "description": "d" * 1001},
        {"name": "a", "source": "def a():\n    return '" + "x" * 70_000 + "'\n"},
        {"name": "a", "source": "import os\nos.system('x')\n"},
        {"source": CLEAN},
    ],
)
async def test_hostile_save_params_are_refused_as_invalid_arguments(
    service: WorkflowService, params: dict[str, object]
) -> None:
    with pytest.raises(CallFailed) as refused:
        await NullGateway(service).request(ctx(), "save_workflow", params)
    assert refused.value.code == ErrorCode.INVALID_ARGUMENTS
    assert await service.request(ctx(), "list_workflows", {}) == []


async def test_saves_and_deletes_are_audited_without_the_source(
    service: WorkflowService, tmp_path: Path
) -> None:
    gateway = NullGateway(service)
    await save(gateway, REPORT, "monthly_sales_report", ALICE)
    await gateway.request(ctx(ALICE), "delete_workflow", {"name": "monthly_sales_report"})
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["event"], r["principal"], r["workflow"], r["versions"]) for r in records] == [
        ("workflow_saved", "token:alice", "monthly_sales_report", [1]),
        ("workflow_deleted", "token:alice", "monthly_sales_report", [1]),
    ]
    assert records[0]["source_bytes"] == len(REPORT)
    assert "read_text_file" not in lines[0]


async def test_a_workflow_that_fails_the_check_before_running_is_not_loaded(
    service: WorkflowService,
) -> None:
    async def check(source: str) -> str | None:
        return "line 3: unknown tool filesystem.read_text_file" if "read_text" in source else None

    service.check = check
    gateway = NullGateway(service)
    await save(gateway, REPORT, "monthly_sales_report")
    with pytest.raises(CallFailed) as refused:
        await gateway.request(ctx(), "get_workflow", {"name": "monthly_sales_report"})
    assert refused.value.code == ErrorCode.INVALID_ARGUMENTS
    assert "unknown tool filesystem.read_text_file" in refused.value.message

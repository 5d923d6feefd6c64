"""What the catalog knows of a server's tools without starting it, and what a cached list keeps
of each tool (``_meta``, annotations, ``execution``, icons: direct and MCP App tools are shown
from it, and must read as the live list does)."""

from __future__ import annotations

import json
from pathlib import Path

from bridge_core.catalog import Catalog, ToolCache, ToolDoc
from bridge_core.policy import Policy
from bridge_core.servers import ServerSpec
from mcp.types import Icon, Tool, ToolAnnotations, ToolExecution

SPEC = ServerSpec(name="apps", transport="stdio", command="apps-server", args=())
CHART = Tool(
    name="chart",
    input_schema={"type": "object"},
    annotations=ToolAnnotations(read_only_hint=True),
    _meta={"ui": {"resourceUri": "ui://apps/chart.html"}},
)
ERASE = Tool(name="erase", input_schema={"type": "object"})
RESEARCH = Tool(
    name="research",
    input_schema={"type": "object"},
    execution=ToolExecution(task_support="required"),
    icons=[Icon(src="https://example.test/r.png", mime_type="image/png", sizes=["48x48"])],
)


def test_a_cached_tool_keeps_its_meta_and_annotations(tmp_path: Path) -> None:
    doc = ToolDoc.from_tool("apps", CHART)
    ToolCache(tmp_path).store(SPEC, [doc])
    loaded = ToolCache(tmp_path).load(SPEC)
    assert loaded is not None
    (back,) = loaded.tools
    assert back.meta == {"ui": {"resourceUri": "ui://apps/chart.html"}}
    assert back.annotations == {"readOnlyHint": True}
    assert Tool.model_validate(back.to_json()) == CHART


def test_a_cached_tool_keeps_its_execution_and_icons_so_it_reads_back_as_listed(
    tmp_path: Path,
) -> None:
    ToolCache(tmp_path).store(SPEC, [ToolDoc.from_tool("apps", RESEARCH)])
    loaded = ToolCache(tmp_path).load(SPEC)
    assert loaded is not None
    (back,) = loaded.tools
    assert Tool.model_validate(back.to_json()) == RESEARCH


def test_a_cache_file_written_before_execution_and_icons_were_kept_still_loads(
    tmp_path: Path,
) -> None:
    cache = ToolCache(tmp_path)
    cache.directory.mkdir(parents=True)
    older = {"format": 1, "server": "apps", "saved_at": 1.0, "description": "",
             "tools": [{"name": "research", "inputSchema": {"type": "object"}}]}  # fmt: skip
    (cache.directory / f"{SPEC.cache_key()}.json").write_text(json.dumps(older))
    loaded = cache.load(SPEC)
    assert loaded is not None
    (back,) = loaded.tools
    assert (back.name, back.execution, back.icons) == ("research", None, None)


async def test_known_tools_come_from_the_cache_and_never_start_the_server(tmp_path: Path) -> None:
    ToolCache(tmp_path).store(SPEC, [ToolDoc.from_tool("apps", t) for t in (CHART, ERASE)])
    started: list[str] = []

    async def list_tools(server: str) -> list[Tool]:
        started.append(server)
        return []

    policy = Policy.from_settings(deny_tools=("apps.erase",))
    catalog = Catalog(
        {"apps": SPEC}, list_tools=list_tools, policy=policy, cache=ToolCache(tmp_path)
    )
    assert [d.name for d in await catalog.known_tools("apps")] == ["chart"]
    assert started == []


async def test_a_server_never_listed_has_no_known_tools(tmp_path: Path) -> None:
    async def list_tools(server: str) -> list[Tool]:
        raise AssertionError("known_tools must not start a server")

    catalog = Catalog({"apps": SPEC}, list_tools=list_tools, cache=ToolCache(tmp_path))
    assert await catalog.known_tools("apps") == []
    denied = Catalog(
        {"apps": SPEC},
        list_tools=list_tools,
        policy=Policy.from_settings(deny_servers=("apps",)),
        cache=ToolCache(tmp_path),
    )
    assert await denied.known_tools("apps") == []

"""What the catalog knows of a server's tools without starting it, and the ``_meta`` and
annotations a cached list keeps (direct and MCP App tools are shown from it)."""

from __future__ import annotations

from pathlib import Path

from bridge_core.catalog import Catalog, ToolCache, ToolDoc
from bridge_core.policy import Policy
from bridge_core.servers import ServerSpec
from mcp.types import Tool, ToolAnnotations

SPEC = ServerSpec(name="apps", transport="stdio", command="apps-server", args=())
CHART = Tool(
    name="chart",
    input_schema={"type": "object"},
    annotations=ToolAnnotations(read_only_hint=True),
    _meta={"ui": {"resourceUri": "ui://apps/chart.html"}},
)
ERASE = Tool(name="erase", input_schema={"type": "object"})


def test_a_cached_tool_keeps_its_meta_and_annotations(tmp_path: Path) -> None:
    doc = ToolDoc.from_tool("apps", CHART)
    ToolCache(tmp_path).store(SPEC, [doc])
    loaded = ToolCache(tmp_path).load(SPEC)
    assert loaded is not None
    (back,) = loaded.tools
    assert back.meta == {"ui": {"resourceUri": "ui://apps/chart.html"}}
    assert back.annotations == {"readOnlyHint": True}
    assert Tool.model_validate(back.to_json()) == CHART


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

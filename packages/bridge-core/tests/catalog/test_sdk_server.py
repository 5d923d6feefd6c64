"""The catalog fed by a real MCP server through the real SDK client (in memory): the tool list
the SDK generates from typed Python functions comes back as docs, stubs and search hits."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import anyio
import mcp
from bridge_core.catalog import Catalog, ToolCache
from bridge_core.servers import ServerSpec
from mcp.server.mcpserver import MCPServer
from mcp.types import Tool
from pydantic import BaseModel


class Forecast(BaseModel):
    city: str
    celsius: float
    summary: str


def weather_server() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def get_forecast(
        city: str, days: int = 3, units: Literal["metric", "imperial"] = "metric"
    ) -> Forecast:
        """Weather forecast for a city over the next days."""
        return Forecast(city=city, celsius=21.5, summary="sunny")

    @server.tool()
    def list_stations(countries: list[str], active_only: bool | None = None) -> list[str]:
        """Weather stations of some countries."""
        return []

    return server


async def list_from_real_server(server_name: str) -> list[Tool]:
    with anyio.fail_after(10):
        async with mcp.Client(weather_server(), mode="legacy") as client:
            return list((await client.list_tools()).tools)


async def test_tools_listed_by_the_sdk_render_as_typed_stubs_and_are_searchable(
    tmp_path: Path,
) -> None:
    spec = ServerSpec(name="weather", transport="stdio", command="weather-mcp")
    catalog = Catalog(
        {"weather": spec}, list_tools=list_from_real_server, cache=ToolCache(tmp_path)
    )

    hits = await catalog.search("wether forcast")
    assert [(h.server, h.tool) for h in hits][:1] == [("weather", "get_forecast")]

    docs = await catalog.query_tool_docs("weather", detail="stub")
    stubs = {t["name"]: t["stub"] for t in docs["tools"]}
    assert stubs["get_forecast"].splitlines()[0] == (
        "async def get_forecast(*, city: str, days: int = 3, "
        'units: Literal["metric", "imperial"] = "metric") -> GetForecastResult:'
    )
    assert (
        "class GetForecastResult(TypedDict):\n    city: str\n    celsius: float\n    summary: str"
        in stubs["get_forecast"]
    )
    assert stubs["list_stations"].splitlines()[0] == (
        "async def list_stations(*, countries: list[str], active_only: bool | None = None) "
        "-> ListStationsResult:"
    )
    full = await catalog.query_tool_docs("weather", "get_forecast", "full")
    assert full["tools"][0]["inputSchema"]["required"] == ["city"]

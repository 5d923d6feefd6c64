"""One tool's documentation, independent of the SDK types it was built from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.types import Tool

__all__ = ["Detail", "ToolDoc"]

Detail = Literal["summary", "full", "stub"]


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """A tool of one server: what search indexes and ``query_tool_docs`` renders."""

    server: str
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None
    annotations: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None
    """The tool's ``_meta`` (e.g. an MCP App's ``ui.resourceUri``): kept so that a cached list
    can be shown as the server gave it (direct and App tools), never searched."""
    execution: Mapping[str, Any] | None = None
    """The tool's ``execution`` (``taskSupport``), kept for the same reason as ``meta``."""
    icons: tuple[Mapping[str, Any], ...] | None = None
    """The tool's ``icons``, kept for the same reason: a direct listing from the cache that
    lacked them would differ from the live one, and every start would tell direct clients
    ``list_changed`` once the server ran. Upstream data, shown only through the direct
    listing's masking (``shown_tools``), never searched."""

    @classmethod
    def from_tool(cls, server: str, tool: Tool) -> ToolDoc:
        """Build from an SDK ``Tool`` (snake_case attributes in SDK 2.x)."""
        return cls.from_json(server, tool.model_dump(by_alias=True, mode="json", exclude_none=True))

    @classmethod
    def from_json(cls, server: str, data: Mapping[str, Any]) -> ToolDoc:
        """Build from a tool's wire JSON (camelCase), e.g. a cached ``tools/list`` entry.

        Raises ``ValueError`` when ``data`` is not tool-shaped (no string ``name``).
        """
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("a tool needs a non-empty string 'name'")
        description = data.get("description")
        input_schema = data.get("inputSchema")
        output_schema = data.get("outputSchema")
        title = data.get("title")
        annotations = data.get("annotations")
        meta = data.get("_meta")
        execution = data.get("execution")
        icons = data.get("icons")
        return cls(
            server=server,
            name=name,
            description=description if isinstance(description, str) else "",
            input_schema=input_schema if isinstance(input_schema, dict) else {},
            output_schema=output_schema if isinstance(output_schema, dict) else None,
            title=title if isinstance(title, str) else None,
            annotations=annotations if isinstance(annotations, dict) else None,
            meta=meta if isinstance(meta, dict) else None,
            execution=execution if isinstance(execution, dict) else None,
            icons=_icons(icons),
        )

    def to_json(self) -> dict[str, Any]:
        """The tool's wire JSON (camelCase, the shape :meth:`from_json` reads back)."""
        data: dict[str, Any] = {"name": self.name, "inputSchema": dict(self.input_schema)}
        if self.description:
            data["description"] = self.description
        if self.output_schema is not None:
            data["outputSchema"] = dict(self.output_schema)
        if self.title:
            data["title"] = self.title
        if self.annotations is not None:
            data["annotations"] = dict(self.annotations)
        if self.meta is not None:
            data["_meta"] = dict(self.meta)
        if self.execution is not None:
            data["execution"] = dict(self.execution)
        if self.icons is not None:
            data["icons"] = [dict(icon) for icon in self.icons]
        return data

    def summary(self) -> dict[str, Any]:
        """``{"name", "description"}``: what a listing needs."""
        return {"name": self.name, "description": self.description}

    def full(self) -> dict[str, Any]:
        """The summary plus ``inputSchema`` and (when the tool has one) ``outputSchema``."""
        data = self.summary()
        data["inputSchema"] = dict(self.input_schema)
        if self.output_schema is not None:
            data["outputSchema"] = dict(self.output_schema)
        return data


def _icons(value: object) -> tuple[Mapping[str, Any], ...] | None:
    """A tool's ``icons`` when they are a list of objects (the SDK validates the rest when the
    tool is shown), else None."""
    if not isinstance(value, list) or not all(isinstance(icon, dict) for icon in value):
        return None
    return tuple(value)

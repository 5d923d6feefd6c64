"""Result shapes observed from a tool's successful results, for tools that declare none.

A tool without an ``outputSchema`` still answers with objects of a regular shape; after a call or
two the host knows their keys, and the stubs can show them (marked "observed"). What is kept is
a JSON Schema skeleton: key names and JSON types, merged across results (a key seen in only some
results is optional), never a value.

The results come from upstream servers, which may be hostile: what one tool's shape may hold is
bounded (depth, keys per object, nodes in all, characters per key), so is the work one result may
cost (values visited, items of a list looked at, characters of a text parsed), and so is the
number of tools with a shape (the least recently observed is forgotten first). Key names are
kept as sent; whoever shows them escapes them (:mod:`bridge_core.catalog._typed`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

__all__ = ["Observed", "ObservedShapes", "observable_value", "observed_from"]

MAX_TOOLS = 256
"""Tools with a shape kept; a busy bridge has a few dozen, the bound is for a churning upstream."""
MAX_DEPTH = 4
"""Nesting levels kept below the result (as the stubs' types); deeper values are just "object"."""
MAX_KEYS = 40
"""Keys kept per object: more is a map keyed by data (file names, ids), not a record."""
MAX_NODES = 160
"""Keys kept per tool in all levels: with the per-level bounds, at most ~20 KB of key text."""
MAX_KEY_CHARS = 64
"""A longer key is data, not a field name; it is left out (and the object marked open)."""
MAX_ITEMS = 16
"""Items of a list merged into its item shape: the first ones say what the list holds."""
MAX_VISITS = 2000
"""Values one result may visit: merging a huge result costs no more than a small one."""
MAX_TEXT_CHARS = 1 << 20
"""A text result longer than this is not parsed (JSON parsing runs on the event loop)."""


@dataclass(frozen=True, slots=True)
class Observed:
    """A result shape observed from a tool's results (it declares no ``outputSchema``)."""

    schema: dict[str, Any]
    """A JSON Schema of key names and types; its ``description`` is the mark to show."""
    results: int
    """How many results it was merged from."""
    structured: bool
    """Every one was ``structuredContent`` (so the sandbox's one-string-field rule applies)."""


def observable_value(result: Mapping[str, Any]) -> tuple[dict[str, Any], bool] | None:
    """The object a successful ``CallToolResult`` (camelCase JSON) gives sandbox code whose
    shape is worth keeping, and whether it is ``structuredContent``: that when it is an object,
    else the one text content when its text is a JSON object; None for anything else (errors,
    images, prose, several contents)."""
    if result.get("isError"):
        return None
    structured = result.get("structuredContent")
    if structured is not None:
        return (structured, True) if isinstance(structured, dict) else None
    content = result.get("content")
    if not isinstance(content, list) or len(content) != 1:
        return None
    [block] = content
    if not isinstance(block, dict) or block.get("type") != "text":
        return None
    text = block.get("text")
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS or not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return (value, False) if isinstance(value, dict) else None


class _Node:
    """What was seen at one place of the results: JSON types, and for objects their keys (with
    how many of the objects had each), for lists the shape of their items."""

    __slots__ = ("items", "keys", "objects", "open", "types")

    def __init__(self) -> None:
        self.types: set[str] = set()
        self.keys: dict[str, tuple[_Node, int]] = {}
        self.objects = 0
        self.open = False
        """Keys were left out (bounds): the objects may have keys not listed."""
        self.items: _Node | None = None


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


class _Shape:
    __slots__ = ("nodes", "results", "root", "structured")

    def __init__(self) -> None:
        self.root = _Node()
        self.nodes = 0
        self.results = 0
        self.structured = True

    def merge(self, value: dict[str, Any], structured: bool) -> None:
        self.results += 1
        self.structured &= structured
        budget = [MAX_VISITS]
        self._walk(value, self.root, 0, budget)

    def _walk(self, value: object, node: _Node, depth: int, budget: list[int]) -> None:
        budget[0] -= 1
        kind = _json_type(value)
        node.types.add(kind)
        if isinstance(value, dict):
            node.objects += 1
            if depth >= MAX_DEPTH:
                return
            if len(value) > MAX_KEYS:
                node.open = True
            for key, sub in islice(value.items(), MAX_KEYS):
                if budget[0] <= 0:
                    return
                entry = node.keys.get(key)
                if entry is None:
                    if (
                        not isinstance(key, str)
                        or len(key) > MAX_KEY_CHARS
                        or len(node.keys) >= MAX_KEYS
                        or self.nodes >= MAX_NODES
                    ):
                        node.open = True
                        continue
                    self.nodes += 1
                    entry = (_Node(), 0)
                child, seen = entry
                node.keys[key] = (child, seen + 1)
                self._walk(sub, child, depth + 1, budget)
        elif isinstance(value, list) and depth < MAX_DEPTH:
            if node.items is None:
                node.items = _Node()
            for item in islice(value, MAX_ITEMS):
                if budget[0] <= 0:
                    return
                self._walk(item, node.items, depth + 1, budget)


def _schema(node: _Node) -> dict[str, Any]:
    types = set(node.types)
    if {"integer", "number"} <= types:
        types.discard("integer")  # JSON has one number type; 1 and 1.5 in one field are float
    parts: list[dict[str, Any]] = []
    for kind in _ORDER:
        if kind not in types:
            continue
        part: dict[str, Any] = {"type": kind}
        if kind == "object" and node.keys:
            part["properties"] = {key: _schema(child) for key, (child, _) in node.keys.items()}
            required = [key for key, (_, seen) in node.keys.items() if seen == node.objects]
            if required:
                part["required"] = required
        if kind == "object" and node.open:
            part["additionalProperties"] = True
        if kind == "array" and node.items is not None and node.items.types:
            part["items"] = _schema(node.items)
        parts.append(part)
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    if all(len(part) == 1 for part in parts):
        return {"type": [part["type"] for part in parts]}
    return {"anyOf": parts}


_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")


class ObservedShapes:
    """Per tool, the merged shape of its observed results (bounded: module docstring)."""

    def __init__(self, max_tools: int = MAX_TOOLS) -> None:
        self._shapes: OrderedDict[tuple[str, str], _Shape] = OrderedDict()
        self._max_tools = max_tools

    def __len__(self) -> int:
        return len(self._shapes)

    def record(self, server: str, tool: str, value: dict[str, Any], structured: bool) -> None:
        """Merge the keys and types of one result object into the tool's shape
        (``structured``: it was the result's ``structuredContent``)."""
        key = (server, tool)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = _Shape()
            while len(self._shapes) > self._max_tools:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
        shape.merge(value, structured)

    def get(self, server: str, tool: str) -> Observed | None:
        """The tool's observed shape, if any result of it was recorded."""
        shape = self._shapes.get((server, tool))
        if shape is None:
            return None
        schema = {**_schema(shape.root), "description": observed_from(shape.results)}
        return Observed(schema, shape.results, shape.structured)

    def forget(self, server: str, keep: Collection[str] = ()) -> None:
        """Drop the shapes of ``server``'s tools, except those named in ``keep`` (the tools it
        still lists: a tool that went away or came back may answer differently)."""
        for key in [key for key in self._shapes if key[0] == server and key[1] not in keep]:
            del self._shapes[key]


def observed_from(results: int) -> str:
    """The mark an observed shape carries wherever it is shown."""
    return f"observed (from {results} result{'' if results == 1 else 's'})"

"""How a cell's code names servers and tools, read from its syntax tree alone: the names it
binds, what its imports of the ``mcp`` module tree stand for, and which expressions are a server
or a tool written literally (see :mod:`._check` for what is judged and what is left to run time).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from bridge_protocol.names import ALIAS_PREFIX, python_forms

__all__ = ["CellNames", "literal_str", "nodes"]

_MAPPING_ATTRIBUTES = frozenset({"get", "keys", "items", "values"})
"""Attributes of ``mcp_servers`` that are the mapping's own, not servers."""


def nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, without recursion (a deep tree must not exhaust the host's stack)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(ast.iter_child_nodes(node))


_NAMED = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.ExceptHandler,
    ast.MatchAs,
    ast.MatchStar,
)
"""Nodes that bind their ``name`` (when they have one)."""


def _bound_names(tree: ast.AST) -> dict[str, int]:
    """How many times the cell binds each name (assignments, loop and ``with`` targets,
    parameters, definitions, ``except ... as``, imports, ``global``)."""
    counts: dict[str, int] = {}

    def bind(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bind(node.id)
        elif isinstance(node, ast.arg):
            bind(node.arg)
        elif isinstance(node, _NAMED) and node.name:
            bind(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                bind(name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bind(alias.asname or alias.name.partition(".")[0])
    return counts


@dataclass(slots=True)
class _Names:
    """What names of the cell stand for: servers (by the name as written) and tools."""

    servers: dict[str, str] = field(default_factory=dict)
    tools: dict[str, tuple[str, str]] = field(default_factory=dict)
    aliases: set[str] = field(default_factory=set)
    """Names bound by ``import mcp_<alias>``."""
    mappings: set[str] = field(default_factory=set)
    """Names bound to ``mcp_servers`` by ``from mcp import mcp_servers [as ...]``."""
    imported: list[tuple[ast.AST, str, str | None]] = field(default_factory=list)
    """``(import statement, server, tool or None)`` of each server or tool imported."""
    mcp_module: bool = False
    """``import mcp`` binds ``mcp`` to our module."""


def _imports(tree: ast.Module, bound: Mapping[str, int]) -> _Names:
    """Servers and tools bound by the cell's top-level imports of the ``mcp`` module tree."""
    names = _Names()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                local = alias.asname or parts[0]
                if bound.get(local, 0) != 1:
                    continue
                if parts == ["mcp"] and alias.asname is None:
                    names.mcp_module = True
                elif len(parts) == 1 and parts[0].startswith(ALIAS_PREFIX) and not alias.asname:
                    # ``import mcp_foo``: a real package of that name may exist, so it names a
                    # server only when one has that alias (as a bare alias does).
                    names.aliases.add(local)
                elif len(parts) == 3 and parts[:2] == ["mcp", "servers"]:
                    names.imported.append((node, parts[2], None))
                    if alias.asname:
                        names.servers[local] = parts[2]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name == "*" or bound.get(local, 0) != 1:
                    continue
                if parts == ["mcp"] and alias.name == "mcp_servers":
                    names.mappings.add(local)
                elif parts == ["mcp", "servers"] or (
                    parts == ["mcp"] and alias.name.startswith(ALIAS_PREFIX)
                ):
                    names.servers[local] = alias.name
                    names.imported.append((node, alias.name, None))
                elif len(parts) == 3 and parts[:2] == ["mcp", "servers"]:
                    names.tools[local] = (parts[2], alias.name)
                    names.imported.append((node, parts[2], alias.name))
    return names


def literal_str(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class CellNames:
    """The servers and tools a parsed cell writes literally; ``configured``: every configured
    server's name (a bare ``mcp_<alias>`` names a server only when one has that alias)."""

    def __init__(self, tree: ast.Module, configured: Sequence[str]) -> None:
        self.bound = _bound_names(tree)
        self.names = _imports(tree, self.bound)
        self._configured_names = list(configured)

    def _free(self, name: str) -> bool:
        """``name`` is not rebound by the cell (an import of ours binds it once)."""
        return self.bound.get(name, 0) == 0

    # -- what an expression names -------------------------------------------------------------

    def server_written(self, node: ast.AST) -> str | None:
        """The server name as the code writes it, if ``node`` is a server written literally."""
        if isinstance(node, ast.Name):
            if node.id in self.names.servers:
                return self.names.servers[node.id]
            free = self._free(node.id) or node.id in self.names.aliases
            if node.id.startswith(ALIAS_PREFIX) and node.id != "mcp_servers" and free:
                # A bare alias is bound automatically, but it may also be a variable of an
                # earlier cell: it names a server only when one has that alias.
                return node.id if self._configured(node.id) is not None else None
            return None
        if isinstance(node, ast.Subscript) and self._is_servers_mapping(node.value):
            return literal_str(node.slice)
        if isinstance(node, ast.Attribute):
            if self._is_servers_mapping(node.value):
                attr = node.attr
                return None if attr.startswith("_") or attr in _MAPPING_ATTRIBUTES else attr
            if self._is_mcp(node.value) and node.attr.startswith(ALIAS_PREFIX):
                return node.attr
            if (
                isinstance(node.value, ast.Attribute)
                and node.value.attr == "servers"
                and self._is_mcp(node.value.value)
                and not node.attr.startswith("_")
            ):
                return node.attr
        return None

    def _is_servers_mapping(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names.mappings or (
                node.id == "mcp_servers" and self._free(node.id)
            )
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "mcp_servers"
            and self._is_mcp(node.value)
        )

    def _is_mcp(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == "mcp" and self.names.mcp_module

    def tool_written(self, node: ast.AST) -> tuple[ast.AST, str, str] | None:
        """``(node, server, tool)`` as written, if ``node`` is a tool written literally."""
        if isinstance(node, ast.Name) and node.id in self.names.tools:
            return node, *self.names.tools[node.id]
        if isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
            server = self.server_written(node.value)
            return None if server is None else (node, server, node.attr)
        if isinstance(node, ast.Subscript):
            server = self.server_written(node.value)
            tool = literal_str(node.slice)
            return None if server is None or tool is None else (node, server, tool)
        return None

    def _configured(self, written: str) -> str | None:
        configured = self._configured_names
        if written in configured:
            return written
        return next((s for s in configured if written in python_forms(s, server=True)), None)

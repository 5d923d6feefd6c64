"""What a workflow's source is, read with :mod:`ast` only (never compiled to bytecode, run or
imported on the host): one top-level function, its name, signature and docstring, and the tools
and workflows it names.

The source comes from sandbox code (or a file someone imports): every failure is a
:class:`WorkflowError` naming what is wrong, and the work is bounded by the source's size
(:data:`~bridge_core.workflows._limits.WorkflowLimits.max_source_bytes`), checked before parsing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from bridge_protocol import ErrorCode

from bridge_core._visible import visible
from bridge_core.gateway import CallFailed

__all__ = ["FunctionFacts", "WorkflowError", "read_function"]

_MAX_SIGNATURE_CHARS = 1000
_MAX_DOCSTRING_CHARS = 4000
_MAX_NAMED = 100
"""Tools (and workflows) listed per workflow: what search indexes, not a gate."""


class WorkflowError(CallFailed):
    """A workflow request the bridge refuses: bad arguments, a bound reached, unknown name."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENTS) -> None:
        super().__init__(code, message)


@dataclass(frozen=True, slots=True)
class FunctionFacts:
    """What the host reads from a workflow's source."""

    function: str
    is_async: bool
    signature: str
    docstring: str
    tools: tuple[str, ...]
    """``server.tool`` of each tool named literally (in order of first appearance)."""
    workflows: tuple[str, ...]
    """Names given literally to ``runtime.workflow(...)``."""


def _nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node in source order, without recursion (a deep tree must not exhaust the stack)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _refuse_hidden(source: str) -> None:
    """A workflow is reviewed as text (``list_workflows``, an exported file) before it runs: a
    character that shows other than it runs (a lone carriage return that lets a terminal print a
    comment over ``evil()``, bidi and zero-width controls, other control characters) is refused."""
    shown = visible(source)
    if shown == source:
        return
    at = next(i for i, (a, b) in enumerate(zip(source, shown, strict=False)) if a != b)
    line = source.count("\n", 0, at) + 1
    raise WorkflowError(
        f"the source holds a character that displays other than it runs ({visible(source[at])} "
        f"on line {line}): a workflow is reviewed as text, write it as an escape in a string"
    )


def read_function(source: str) -> FunctionFacts:
    """The facts of ``source``, which must be exactly one top-level function definition
    (``def`` or ``async def``, no decorators), optionally after comments and blank lines."""
    _refuse_hidden(source)
    try:
        tree = ast.parse(source, "<workflow>")
    except SyntaxError as exc:
        raise WorkflowError(f"the source does not parse: {exc.msg} (line {exc.lineno})") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise WorkflowError(f"the source does not parse: {type(exc).__name__}") from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef):
        kinds = ", ".join(type(node).__name__ for node in tree.body[:5]) or "nothing"
        raise WorkflowError(
            f"a workflow's source must be exactly one top-level function definition, not {kinds}"
        )
    node = tree.body[0]
    if node.decorator_list:
        raise WorkflowError(f"workflow function {node.name!r} must not have decorators")
    try:
        signature = f"({ast.unparse(node.args)})"
        if node.returns is not None:
            signature += f" -> {ast.unparse(node.returns)}"
    except (RecursionError, ValueError):
        signature = "(...)"
    docstring = ast.get_docstring(node) or ""
    tools, workflows = _named(node)
    return FunctionFacts(
        function=node.name,
        is_async=isinstance(node, ast.AsyncFunctionDef),
        signature=signature[:_MAX_SIGNATURE_CHARS],
        docstring=docstring[:_MAX_DOCSTRING_CHARS],
        tools=tools,
        workflows=workflows,
    )


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_servers(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "mcp_servers"


def _server(node: ast.AST) -> str | None:
    """The server an expression names literally: ``mcp_servers["x"]``, ``mcp_servers.x``,
    ``mcp_x`` (its Python form, as written)."""
    if isinstance(node, ast.Subscript | ast.Attribute) and _is_servers(node.value):
        return _literal(node.slice) if isinstance(node, ast.Subscript) else node.attr
    if isinstance(node, ast.Name) and node.id.startswith("mcp_") and node.id != "mcp_servers":
        return node.id.removeprefix("mcp_")
    return None


def _named(function: ast.AST) -> tuple[tuple[str, ...], tuple[str, ...]]:
    tools: dict[str, None] = {}
    workflows: dict[str, None] = {}
    for node in _nodes(function):
        if len(tools) >= _MAX_NAMED and len(workflows) >= _MAX_NAMED:
            break
        if isinstance(node, ast.Attribute) and (server := _server(node.value)) is not None:
            if node.attr != "sync":
                tools.setdefault(f"{server}.{node.attr}", None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if len(parts) == 3 and parts[:2] == ["mcp", "servers"]:
                for alias in node.names:
                    tools.setdefault(f"{parts[2]}.{alias.name}", None)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "workflow"
            and node.args
            and (name := _literal(node.args[0])) is not None
        ):
            workflows.setdefault(name, None)
    return tuple(list(tools)[:_MAX_NAMED]), tuple(list(workflows)[:_MAX_NAMED])

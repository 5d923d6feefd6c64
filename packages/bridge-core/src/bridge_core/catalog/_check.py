"""The check before running: a cell's literal nested tool calls against the tools' schemas.

Pure static analysis of untrusted code: the code is parsed with :mod:`ast` (never compiled to
bytecode, executed or imported), the tree is walked without recursion, and the work is bounded:
code over :data:`MAX_CHECKED_CHARS` is not checked, and code the parser refuses (a syntax error,
nesting too deep, too large) has no findings — the sandbox reports it as it always did.

Only what is written literally is judged: ``mcp_servers["time"]``, ``mcp_servers.time``,
``mcp_time`` (imported or bound automatically), ``mcp.servers.time``, ``from mcp.servers.time
import get_current_time``, the tool as an attribute or item of the server, and ``.sync``. A name
the cell itself rebinds, a server or tool named by a variable, ``**kwargs``, and a server whose
tool list the bridge does not know yet are left to run time, never guessed. Server and tool names
match as the sandbox matches them (the name, or its Python form: ``get_user_info`` for
``get-user.info``, ``mcp_my_server`` for ``my-server``), and a name the policy refuses is left to
the call, which refuses it naming the rule.

Findings, each of which blocks the cell in mode ``nested``: an unknown server or tool (with the
same did-you-mean as the call would get), an unknown keyword argument, a missing required one, a
literal argument of the wrong JSON type, and a key the tool's ``outputSchema`` does not declare,
read from a result held by a name assigned once in the cell from the call.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bridge_protocol.names import python_forms

from bridge_core.catalog._cell_names import CellNames, literal_str, nodes
from bridge_core.catalog._docs import ToolDoc
from bridge_core.catalog._errors import UnknownServer, UnknownTool, closest_names
from bridge_core.catalog._schema_facts import (
    accepts,
    closed_object,
    literal_type,
    properties_of,
    required_of,
    schema_at,
)

__all__ = [
    "MAX_CHECKED_CHARS",
    "CheckCatalog",
    "Finding",
    "FindingKind",
    "check_cell",
    "describe_findings",
]

MAX_CHECKED_CHARS = 256 * 1024
"""Longer code is not checked: parsing is linear but its tree is ~100 bytes per character, and
a model's cell is a few kilobytes (the check is a help, not a gate anything relies on)."""

FindingKind = Literal[
    "unknown_server",
    "unknown_tool",
    "unknown_argument",
    "missing_argument",
    "wrong_type",
    "unknown_result_key",
    "type_error",
]

_TOOL_KEYWORDS = frozenset({"raw"})
"""Keywords the sandbox's tool object takes for itself (``raw=True``), never sent."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found in a cell, at a 1-based line."""

    line: int
    kind: FindingKind
    message: str
    suggestions: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class CheckCatalog:
    """What the checker knows of the servers, gathered without starting any.

    ``tools`` maps each visible server to its tools (every tool it lists, allowed or not), or
    None when its list is not known yet; ``configured`` are all configured servers, visible or
    not (a denied one is left to the call); ``allowed(server, tool)`` is the policy's answer.
    ``provisional`` are the servers whose list may lack tools they have now (known from the
    cache of an earlier start, or announced as changed and not listed again yet): a tool named
    that their list lacks is left to run time, not reported unknown.
    """

    tools: Mapping[str, Sequence[ToolDoc] | None]
    configured: Sequence[str] = ()
    allowed: Callable[[str, str], bool] = field(default=lambda server, tool: True)
    provisional: Collection[str] = ()


_SHOWN_CHARS = 100


def _shown(name: str) -> str:
    """A name written by the code, cut for a message."""
    return name if len(name) <= _SHOWN_CHARS else name[:_SHOWN_CHARS] + "..."


class _Cell(CellNames):
    """One parsed cell being checked."""

    def __init__(self, tree: ast.Module, catalog: CheckCatalog) -> None:
        super().__init__(tree, list(catalog.configured) or list(catalog.tools))
        self.catalog = catalog
        self.findings: list[Finding] = []
        self._reported: set[tuple[int, str]] = set()

    def report(
        self, node: ast.AST, kind: FindingKind, message: str, hints: Sequence[str] = ()
    ) -> None:
        line = getattr(node, "lineno", 1)
        if (line, message) not in self._reported:
            self._reported.add((line, message))
            self.findings.append(Finding(line, kind, message, tuple(hints)))

    # -- names against the catalog -------------------------------------------------------------

    def server(self, node: ast.AST, written: str) -> str | None:
        """The visible server ``written`` names, or None (reported when it names none)."""
        found = self._configured(written)
        if found is None:
            error = UnknownServer(written, list(self.catalog.tools))
            self.report(node, "unknown_server", error.message, error.suggestions)
            return None
        return found if found in self.catalog.tools else None  # hidden: the call says why

    def tool(self, node: ast.AST, written_server: str, written: str) -> ToolDoc | None:
        """The tool ``written`` names, or None: unknown (reported) or not judged here."""
        server = self.server(node, written_server)
        if server is None:
            return None
        docs = self.catalog.tools[server]
        if docs is None:
            return None  # its list is not known yet: left to run time
        if not self.catalog.allowed(server, written):
            return None  # refused as written: the call names the rule
        by_name = {d.name: d for d in docs}
        matches = (
            [by_name[written]]
            if written in by_name
            else [d for d in docs if written in python_forms(d.name, server=False)]
        )
        allowed = [d for d in matches if self.catalog.allowed(server, d.name)]
        if allowed:
            return allowed[0]
        if not matches and server not in self.catalog.provisional:
            known = [d.name for d in docs if self.catalog.allowed(server, d.name)]
            error = UnknownTool(server, written, known)
            self.report(node, "unknown_tool", error.message, error.suggestions)
        return None


# --- arguments and results ---------------------------------------------------------------------


def _call_arguments(call: ast.Call) -> tuple[dict[str, ast.AST], bool] | None:
    """The arguments as ``{name: value}`` and whether they are all known (no ``**``, no
    non-literal dict); None when the call's form is not one a tool takes (left to run time)."""
    given: dict[str, ast.AST] = {}
    complete = True
    if len(call.args) > 1:
        return None
    if call.args:
        first = call.args[0]
        if isinstance(first, ast.Dict):
            for key, value in zip(first.keys, first.values, strict=True):
                name = literal_str(key) if key is not None else None
                if name is None:
                    complete = False
                else:
                    given[name] = value
        else:
            complete = False
    for keyword in call.keywords:
        if keyword.arg is None:
            complete = False
        elif keyword.arg not in _TOOL_KEYWORDS:
            given[keyword.arg] = keyword.value
    return given, complete


def _check_arguments(cell: _Cell, call: ast.Call, doc: ToolDoc) -> None:
    schema = doc.input_schema
    properties = properties_of(schema)
    found = _call_arguments(call)
    if found is None or properties is None:
        return
    given, complete = found
    label = f"{doc.server}.{doc.name}()"
    missing = [n for n in required_of(schema) if n not in given and n in properties]
    # A schema that declares no argument at all says nothing about them, unless it closes the
    # object explicitly: tools with an empty schema that read whatever they are given exist.
    closed = closed_object(schema) and (
        bool(properties) or schema.get("additionalProperties") is False
    )
    for name, value in given.items():
        if name not in properties:
            if closed:
                # A name no declared one resembles, given where a required one is missing, is
                # most likely that one under another name (``tz=`` for ``timezone``).
                hints = closest_names(name, list(properties)) or missing[:1]
                tail = (
                    "did you mean " + ", ".join(f"`{h}`" for h in hints) + "?"
                    if hints
                    else "its arguments: " + (", ".join(f"`{p}`" for p in properties) or "none")
                )
                cell.report(
                    value,
                    "unknown_argument",
                    f"{label} has no argument `{_shown(name)}`: {tail}",
                    hints,
                )
            continue
        literal = literal_type(value)
        if literal is not None and not accepts(properties[name], schema, *literal):
            wanted = schema_at(properties[name], schema) or {}
            declared = wanted.get("type", "another type")
            shown = declared if isinstance(declared, str) else " or ".join(map(str, declared))
            cell.report(
                value,
                "wrong_type",
                f"argument `{name}` of {label} must be {shown}, not {literal[0]}",
            )
    if complete:
        for name in missing:
            cell.report(call, "missing_argument", f"{label} misses its required argument `{name}`")


def _result_keys(doc: ToolDoc) -> tuple[str, ...] | str | None:
    """The keys a result of ``doc`` can have, when its output schema says so exactly (an
    object with properties and no others); the name of the field when the sandbox hands the
    result over as that field's string (its only property, a required string); else None."""
    output = doc.output_schema
    if output is None:
        return None
    schema = schema_at(output, output)
    if schema is None or schema.get("type", "object") != "object":
        return None
    properties = properties_of(schema)
    if not properties or not closed_object(schema):
        return None
    if any(schema.get(c) for c in ("anyOf", "oneOf", "allOf")):
        return None
    # A string field that may come alone is handed over as that string (the sandbox's rule,
    # as in the typed stubs): such a result may not be a dict at all.
    required = [k for k in required_of(schema) if k in properties]
    alone = list(properties) if len(properties) == 1 else required if len(required) == 1 else []
    for key in alone:
        subschema = schema_at(properties[key], output) or {}
        if subschema.get("type") == "string" and len(properties) == 1 and key in required:
            return key
        if accepts(properties[key], output, "string", "") and not accepts(
            properties[key], output, "object", None
        ):
            return None
    return tuple(properties)


def _unwrap_call(node: ast.AST) -> ast.Call | None:
    if isinstance(node, ast.Await):
        node = node.value
    return node if isinstance(node, ast.Call) else None


def _called_tool(cell: _Cell, call: ast.Call) -> tuple[ast.AST, str, str] | None:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "sync":
        inner = cell.tool_written(func.value)
        if inner is not None:
            return inner
    return cell.tool_written(func)


def _check_results(cell: _Cell, tree: ast.Module, results: dict[str, tuple[ToolDoc, int]]) -> None:
    for node in nodes(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)):
            continue
        if not isinstance(node.value, ast.Name) or node.value.id not in results:
            continue
        key = literal_str(node.slice)
        doc, assigned_at = results[node.value.id]
        keys = _result_keys(doc)
        if key is None or keys is None or node.lineno < assigned_at:
            continue
        if not isinstance(keys, str) and key in keys:
            continue
        label = f"{doc.server}.{doc.name}()"
        if isinstance(keys, str):
            message = (
                f"the result of {label} is a str, not a dict: the text of its only field "
                f"`{keys}` (use it as it is)"
            )
            cell.report(node, "unknown_result_key", message, (keys,) if key == keys else ())
            continue
        hints = closest_names(key, keys)
        listing = ", ".join(f"`{k}`" for k in keys)
        said = f"did you mean {', '.join(f'`{h}`' for h in hints)}? its keys: {listing}"
        cell.report(
            node,
            "unknown_result_key",
            f"the result of {label} has no key `{_shown(key)}` "
            f"({said if hints else 'its keys: ' + listing})",
            hints,
        )


# --- entry point -------------------------------------------------------------------------------


def check_cell(code: str, catalog: CheckCatalog) -> list[Finding]:
    """The findings about the literal nested tool calls of ``code``, in line order.

    Never runs, compiles to bytecode or imports anything of ``code``; code too long to check or
    that does not parse has no findings (the sandbox reports a syntax error as it always did).
    """
    if len(code) > MAX_CHECKED_CHARS:
        return []
    try:
        # ast.parse's own call, plus top-level await (cells use it); only a tree comes back.
        tree = compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return []
    try:
        cell = _Cell(tree, catalog)
        results: dict[str, tuple[ToolDoc, int]] = {}
        checked: set[int] = set()
        for node in nodes(tree):
            if isinstance(node, ast.Call):
                written = _called_tool(cell, node)
                if written is None:
                    continue
                checked.add(id(written[0]))
                doc = cell.tool(*written)
                if doc is not None:
                    _check_arguments(cell, node, doc)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                _remember_result(cell, node, results)
        for node in nodes(tree):  # tools named without a call: ``f = mcp_time.get_time``
            if id(node) not in checked and isinstance(
                node, ast.Attribute | ast.Subscript | ast.Name
            ):
                written = cell.tool_written(node)
                if written is not None:
                    cell.tool(*written)
                elif (server := cell.server_written(node)) is not None:
                    cell.server(node, server)
        for node, server, tool in cell.names.imported:
            if tool is None:
                cell.server(node, server)
            else:
                cell.tool(node, server, tool)
        _check_results(cell, tree, results)
    except RecursionError:
        return []  # a tree too deep for a helper that recurses: no findings, never an error
    return sorted(cell.findings, key=lambda f: f.line)


def _remember_result(
    cell: _Cell, node: ast.Assign | ast.AnnAssign, results: dict[str, tuple[ToolDoc, int]]
) -> None:
    """``r = await server.tool(...)``, ``r`` bound nowhere else: remember which tool made it."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node.value is None:
        return
    name = targets[0].id
    call = _unwrap_call(node.value)
    if call is None or cell.bound.get(name, 0) != 1:
        return
    if any(k.arg == "raw" for k in call.keywords):
        return  # raw=True: the whole CallToolResult, not the structured content
    written = _called_tool(cell, call)
    if written is None:
        return
    doc = cell.tool(*written)
    if doc is not None:
        results[name] = (doc, node.lineno)


MAX_SHOWN_FINDINGS = 10
"""A cell with more findings says how many more: the first ones are what to fix first."""


def describe_findings(findings: Sequence[Finding]) -> str:
    """The message of a blocked cell: each finding with its line, and that nothing ran."""
    shown = "; ".join(str(f) for f in findings[:MAX_SHOWN_FINDINGS])
    more = len(findings) - MAX_SHOWN_FINDINGS
    tail = f"; and {more} more" if more > 0 else ""
    return (
        f"the cell was checked before running and not run (no line ran, no tool was called): "
        f"{shown}{tail}"
    )

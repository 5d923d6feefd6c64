"""Typed Python stubs from JSON Schema: a tool as a signature and docstring, not a schema dump.

A stub is what a model needs to call the tool (names, types, defaults, what each argument means)
in a fraction of the tokens of the JSON. It is documentation, not code to run: types that Python
cannot spell (nested object shapes) are described in the docstring as ``{key: type, key?: type}``.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping
from typing import Any

from bridge_protocol.names import identifier_for

from bridge_core.catalog._docs import ToolDoc

__all__ = ["python_name", "render_stub", "schema_type"]

_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "array": "list",
    "object": "dict",
}
# Schemas can nest without end (and $ref can loop); past this depth a type is just "Any".
_MAX_DEPTH = 4
# Longer enums are a listing, not a type: they read better as the base type.
_MAX_LITERALS = 12
# ASCII only: some Unicode "word" characters are not valid in identifiers.
_IDENTIFIER_JUNK = re.compile(r"[^0-9A-Za-z_]+")

Schema = Mapping[str, Any]


def python_name(name: str) -> str:
    """The identifier a tool or argument name maps to (``get-sum`` → ``get_sum``)."""
    ident = _IDENTIFIER_JUNK.sub("_", name).strip("_") or "_"
    if ident[0].isdigit():
        ident = f"_{ident}"
    return f"{ident}_" if keyword.iskeyword(ident) else ident


def _required(schema: Schema) -> list[str]:
    # Upstream schemas are not validated: "required" may be anything.
    value = schema.get("required")
    return [r for r in value if isinstance(r, str)] if isinstance(value, list) else []


def _literal(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _resolve(schema: Schema, root: Schema) -> Schema | None:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            table = root.get(prefix[2:-1])
            if isinstance(table, Mapping):
                target = table.get(ref[len(prefix) :])
                return target if isinstance(target, Mapping) else None
    return None


def _union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(p for p in parts if p != "None"))
    if "Any" in unique:
        return "Any"
    if len(parts) != len(unique) and "None" in parts:
        unique.append("None")
    return " | ".join(unique) or "Any"


def schema_type(schema: object, root: Schema | None = None, depth: int = 0) -> str:
    """The Python annotation for a JSON Schema: ``str``, ``list[int]``, ``Literal["a", "b"]``..."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return "Any"
    root = schema if root is None else root
    resolved = _resolve(schema, root)
    if resolved is None:
        return "Any"
    schema = resolved
    if "const" in schema:
        return f"Literal[{_literal(schema['const'])}]"
    enum = schema.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= _MAX_LITERALS:
        literals = [v for v in enum if v is not None]
        rendered = f"Literal[{', '.join(_literal(v) for v in literals)}]" if literals else "None"
        return f"{rendered} | None" if literals and None in enum else rendered
    for combiner in ("anyOf", "oneOf"):
        members = schema.get(combiner)
        if isinstance(members, list) and members:
            return _union([schema_type(m, root, depth + 1) for m in members])
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return schema_type(all_of[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([schema_type({**schema, "type": k}, root, depth) for k in kind])
    if kind == "array":
        items = schema.get("items")
        return (
            f"list[{schema_type(items, root, depth + 1)}]" if isinstance(items, Mapping) else "list"
        )
    if kind == "object" or (kind is None and "properties" in schema):
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and not schema.get("properties"):
            return f"dict[str, {schema_type(extra, root, depth + 1)}]"
        return "dict"
    return _SCALARS.get(kind, "Any") if isinstance(kind, str) else "Any"


def _shape(schema: object, root: Schema, depth: int = 0) -> str | None:
    """``{key: type, key?: type}`` for an object (or list of objects) with properties, else None."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    schema = _resolve(schema, root) or {}
    if schema.get("type") == "array":
        inner = _shape(schema.get("items"), root, depth + 1)
        return None if inner is None else f"list[{inner}]"
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = _required(schema)
    fields = []
    for key, sub in properties.items():
        mark = "" if key in required else "?"
        rendered = _shape(sub, root, depth + 1) or schema_type(sub, root, depth + 1)
        fields.append(f"{key}{mark}: {rendered}")
    return "{" + ", ".join(fields) + "}"


def _returns(output: Schema) -> tuple[str, str]:
    """The return annotation and the docstring's ``Returns`` line for an output schema.

    The sandbox gives a structured result that is an object with one field holding a string
    as that string (``{"content": "..."}`` → ``"..."``): a schema whose only property is a
    required string returns ``str``; one where a string field may be alone may return ``str``.
    """
    resolved = _resolve(output, output) or {}
    properties = resolved.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [k for k in _required(resolved) if k in properties]
    alone = list(properties) if len(properties) == 1 else required if len(required) == 1 else []
    lone = next((k for k in alone if schema_type(properties[k], output) == "str"), None)
    shape = _shape(output, output)
    if lone is None:
        return schema_type(output), f"Returns {shape}" if shape else ""
    if len(properties) == 1 and lone in required:
        return "str", f"Returns str: the result's only field, {lone!r}"
    return f"{schema_type(output)} | str", f"Returns {shape}, or str when {lone!r} is alone"


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _docstring_lines(text: str) -> list[str]:
    """Untrusted text made safe inside a docstring, as lines.

    Backslashes and triple quotes must not end or corrupt the docstring; control characters
    (NUL included) have no place in documentation and make the stub unparsable.
    """
    safe = _CONTROL.sub("", text.strip()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return [line.rstrip() for line in safe.splitlines()]


def render_stub(doc: ToolDoc) -> str:
    """The tool as ``async def name(*, arg: type = default, ...) -> type`` plus a docstring."""
    schema = doc.input_schema
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [r for r in _required(schema) if r in properties]
    order = required + [k for k in properties if k not in required]
    params: list[str] = []
    notes: list[str] = []
    awkward: list[str] = []
    for key in order:
        sub = properties[key]
        annotation = schema_type(sub, schema)
        if not key.isidentifier() or keyword.iskeyword(key):
            awkward.append(key)
        elif key in required:
            params.append(f"{key}: {annotation}")
        elif isinstance(sub, Mapping) and "default" in sub:
            params.append(f"{key}: {annotation} = {_literal(sub['default'])}")
        else:
            optional = (
                annotation
                if annotation.endswith("None") or annotation == "Any"
                else f"{annotation} | None"
            )
            params.append(f"{key}: {optional} = None")
        description = sub.get("description") if isinstance(sub, Mapping) else None
        shape = _shape(sub, schema)
        candidates = (description, f"shape {shape}" if shape else None)
        parts = [p for p in candidates if isinstance(p, str) and p.strip()]
        if parts:
            notes.append(f"{key}: {'; '.join(' '.join(p.split()) for p in parts)}")
    if awkward:
        params.append("**kwargs: Any")
        names = ", ".join(repr(k) for k in awkward)
        notes.append(f"**kwargs: arguments whose names are not identifiers: {names}")
    returns = "Any"
    output = doc.output_schema
    if output is not None:
        returns, said = _returns(output)
        if said:
            notes.append(said)
    signature = ", ".join(params)
    # The attribute sandbox code writes (``mcp_x.get_user_info``): the sandbox's own rule.
    func = identifier_for(doc.name)
    # Arguments travel by name (``await server.tool(path=...)``): the signature says so with ``*``.
    keyword_only = "*, " if params and params[0] != "**kwargs: Any" else ""
    head = f"async def {func}({keyword_only}{signature}) -> {returns}:"
    raw = [doc.description.strip()]
    if func != doc.name:
        raw.append(f"(MCP tool name: {doc.name!r})")
    if notes:
        raw += ["", *notes]
    # Escaped once, as a whole: every piece of it comes from the upstream server.
    text = _docstring_lines("\n".join(raw)) or [""]
    lines = [head, '    """' + text[0], *(f"    {line}" if line else "" for line in text[1:])]
    if len(lines) == 2:
        # A description ending in a quote would merge with the closing quotes.
        lines[1] = lines[1][:-1] + '\\"' if text[0].endswith('"') else lines[1]
        lines[1] += '"""'
    else:
        lines.append('    """')
    return "\n".join(lines)

"""JSON Schema as Python annotations: ``str``, ``list[int]``, ``Literal["a", "b"]``, unions.

The part of the stubs every type goes through (parameters in :mod:`._stubs`, results in
:mod:`._typed`). Schemas come from upstream servers: a ``$ref`` may loop and nesting may not
end, so depth is bounded; what cannot be said is ``Any``.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "Schema",
    "literal",
    "python_name",
    "required",
    "resolve",
    "schema_type",
    "union",
]

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
MAX_DEPTH = 4
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


def required(schema: Schema) -> list[str]:
    # Upstream schemas are not validated: "required" may be anything.
    value = schema.get("required")
    return [r for r in value if isinstance(r, str)] if isinstance(value, list) else []


def literal(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def resolve(schema: Schema, root: Schema) -> Schema | None:
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


def union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(p for p in parts if p != "None"))
    if "Any" in unique:
        return "Any"
    if len(parts) != len(unique) and "None" in parts:
        unique.append("None")
    return " | ".join(unique) or "Any"


def schema_type(schema: object, root: Schema | None = None, depth: int = 0) -> str:
    """The Python annotation for a JSON Schema: ``str``, ``list[int]``, ``Literal["a", "b"]``..."""
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return "Any"
    root = schema if root is None else root
    resolved = resolve(schema, root)
    if resolved is None:
        return "Any"
    schema = resolved
    if "const" in schema:
        return f"Literal[{literal(schema['const'])}]"
    enum = schema.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= _MAX_LITERALS:
        literals = [v for v in enum if v is not None]
        rendered = f"Literal[{', '.join(literal(v) for v in literals)}]" if literals else "None"
        return f"{rendered} | None" if literals and None in enum else rendered
    for combiner in ("anyOf", "oneOf"):
        members = schema.get(combiner)
        if isinstance(members, list) and members:
            return union([schema_type(m, root, depth + 1) for m in members])
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return schema_type(all_of[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        return union([schema_type({**schema, "type": k}, root, depth) for k in kind])
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

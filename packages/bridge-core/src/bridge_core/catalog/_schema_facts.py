"""What a tool's JSON Schema says of its arguments, as the check before running reads it.

Upstream schemas are not validated: every reader here is total (a malformed schema means "no
finding", never an error), follows local ``$ref`` a few steps only, and answers True whenever it
is unsure whether a value would match.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

__all__ = [
    "JSON_TYPES",
    "SCHEMA_DEPTH",
    "accepts",
    "closed_object",
    "literal_type",
    "properties_of",
    "required_of",
    "schema_at",
]

JSON_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
SCHEMA_DEPTH = 8
"""Steps of ``$ref`` followed and levels of ``anyOf``/``oneOf``/``allOf`` looked into."""


def schema_at(schema: object, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``schema`` with a local ``$ref`` followed (a few steps), or None when it cannot be."""
    for _ in range(SCHEMA_DEPTH):
        if not isinstance(schema, Mapping):
            return None
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        schema = None
        for prefix in ("#/$defs/", "#/definitions/"):
            table = root.get(prefix[2:-1])
            if ref.startswith(prefix) and isinstance(table, Mapping):
                schema = table.get(ref[len(prefix) :])
    return None


def literal_type(node: ast.AST) -> tuple[str, object] | None:
    """The JSON type of a literal argument (and its value, for scalars), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
        if not (isinstance(node, ast.Constant) and isinstance(node.value, int | float)):
            return None
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return "boolean", value
        if value is None:
            return "null", value
        if isinstance(value, int):
            return "integer", value
        if isinstance(value, float):
            return "number", value
        if isinstance(value, str | bytes):  # bytes travel as base64 text
            return "string", value
        return None
    if isinstance(node, ast.JoinedStr):
        return "string", None
    if isinstance(node, ast.List | ast.Tuple | ast.ListComp):
        return "array", None
    if isinstance(node, ast.Dict | ast.DictComp):
        return "object", None
    return None


def accepts(
    schema: object, root: Mapping[str, Any], kind: str, value: object, depth: int = 0
) -> bool:
    """Whether a JSON value of ``kind`` may match ``schema``; True whenever unsure."""
    resolved = schema_at(schema, root)
    if resolved is None or depth > SCHEMA_DEPTH:
        return True
    for combiner in ("anyOf", "oneOf"):
        members = resolved.get(combiner)
        if (
            isinstance(members, list)
            and members
            and not any(accepts(m, root, kind, value, depth + 1) for m in members)
        ):
            return False
    all_of = resolved.get("allOf")
    if isinstance(all_of, list) and not all(
        accepts(m, root, kind, value, depth + 1) for m in all_of
    ):
        return False
    declared = resolved.get("type")
    types = [declared] if isinstance(declared, str) else declared
    if not isinstance(types, list) or not types:
        return True
    if any(t not in JSON_TYPES for t in types):
        return True  # a type we do not know of: not ours to judge
    if kind in types:
        return True
    if kind == "integer" and "number" in types:
        return True
    # 3.0 is an integer in JSON Schema (a number with a zero fractional part).
    return (
        kind == "number" and "integer" in types and isinstance(value, float) and value.is_integer()
    )


def properties_of(schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else None


def required_of(schema: Mapping[str, Any]) -> list[str]:
    value = schema.get("required")
    return [r for r in value if isinstance(r, str)] if isinstance(value, list) else []


def closed_object(schema: Mapping[str, Any]) -> bool:
    """Whether a key beyond the declared properties is a mistake: unless the schema lets more
    in (``additionalProperties`` true or a schema, ``patternProperties``). An absent
    ``additionalProperties`` allows any key in JSON Schema, but servers' schemas leave it out
    while they drop (Zod, pydantic) or refuse an undeclared argument: a name the tool does not
    declare is a mistake either way."""
    extra = schema.get("additionalProperties")
    return extra in (None, False) and "patternProperties" not in schema

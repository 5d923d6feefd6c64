"""Typed Python stubs from JSON Schema: a tool as a signature and docstring, not a schema dump.

A stub is what a model needs to call the tool (names, types, defaults, what each argument means)
in a fraction of the tokens of the JSON. It is documentation, not code to run: an argument's
nested object shape is described in its docstring line as ``{key: type, key?: type}``; a result
type is a ``TypedDict`` defined after the function (:mod:`._typed`), from the tool's
``outputSchema`` or, for a tool that declares none, from the shape of its results observed so
far (:mod:`._observed`), marked so.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping

from bridge_protocol.names import identifier_for

from bridge_core.catalog._annotations import (
    MAX_DEPTH,
    Schema,
    literal,
    python_name,
    required,
    resolve,
    schema_type,
)
from bridge_core.catalog._docs import ToolDoc
from bridge_core.catalog._observed import Observed, observed_from
from bridge_core.catalog._typed import pascal, result_types

__all__ = ["python_name", "render_stub", "schema_type"]


def _shape(schema: object, root: Schema, depth: int = 0) -> str | None:
    """``{key: type, key?: type}`` for an object (or list of objects) with properties, else None."""
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return None
    schema = resolve(schema, root) or {}
    if schema.get("type") == "array":
        inner = _shape(schema.get("items"), root, depth + 1)
        return None if inner is None else f"list[{inner}]"
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    needed = required(schema)
    fields = []
    for key, sub in properties.items():
        mark = "" if key in needed else "?"
        rendered = _shape(sub, root, depth + 1) or schema_type(sub, root, depth + 1)
        fields.append(f"{key}{mark}: {rendered}")
    return "{" + ", ".join(fields) + "}"


def _returns(output: Schema, base: str, *, lone_rule: bool = True) -> tuple[str, str, list[str]]:
    """The return annotation, the docstring's ``Returns`` line (or "") and the ``TypedDict``
    definitions the annotation names, for a result schema.

    The sandbox gives a structured result that is an object with one field holding a string
    as that string (``{"content": "..."}`` → ``"..."``): a schema whose only property is a
    required string returns ``str``; one where a string field may be alone may return ``str``.
    """
    resolved = resolve(output, output) or {}
    properties = resolved.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    needed = [k for k in required(resolved) if k in properties]
    alone = list(properties) if len(properties) == 1 else needed if len(needed) == 1 else []
    lone = next((k for k in alone if schema_type(properties[k], output) == "str"), None)
    if lone is not None and lone_rule and len(properties) == 1 and lone in needed:
        return "str", f"Returns str: the result's only field, {lone!r}", []
    annotation, classes = result_types(output, base)
    if lone is not None and lone_rule:
        return f"{annotation} | str", f"Returns str when {lone!r} is alone", classes
    return annotation, "", classes


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _docstring_lines(text: str) -> list[str]:
    """Untrusted text made safe inside a docstring, as lines.

    Backslashes and triple quotes must not end or corrupt the docstring; control characters
    (NUL included) have no place in documentation and make the stub unparsable.
    """
    safe = _CONTROL.sub("", text.strip()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return [line.rstrip() for line in safe.splitlines()]


def render_stub(doc: ToolDoc, observed: Observed | None = None) -> str:
    """The tool as ``async def name(*, arg: type = default, ...) -> type`` plus a docstring,
    followed by the ``TypedDict`` definitions of its result: from its ``outputSchema``, else
    from ``observed`` (marked with the number of results it comes from)."""
    schema = doc.input_schema
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    needed = [r for r in required(schema) if r in properties]
    order = needed + [k for k in properties if k not in needed]
    params: list[str] = []
    notes: list[str] = []
    awkward: list[str] = []
    for key in order:
        sub = properties[key]
        annotation = schema_type(sub, schema)
        if not key.isidentifier() or keyword.iskeyword(key):
            awkward.append(key)
        elif key in needed:
            params.append(f"{key}: {annotation}")
        elif isinstance(sub, Mapping) and "default" in sub:
            params.append(f"{key}: {annotation} = {literal(sub['default'])}")
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
    # The attribute sandbox code writes (``mcp_x.get_user_info``): the sandbox's own rule.
    func = identifier_for(doc.name)
    returns, said, mark = "Any", "", ""
    classes: list[str] = []
    if doc.output_schema is not None:
        returns, said, classes = _returns(doc.output_schema, pascal(func))
    elif observed is not None:
        returns, said, classes = _returns(
            observed.schema, pascal(func), lone_rule=observed.structured
        )
        mark = f"# {returns}: {observed_from(observed.results)}; the tool declares no schema"
    if said:
        notes.append(said)
    signature = ", ".join(params)
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
    if classes or mark:
        # After the function, so that a stub starts with its signature; outside the docstring,
        # where no upstream text can reach, so the mark is the bridge's own.
        lines += ["", *([mark] if mark else []), *"\n\n".join(classes).splitlines()]
    return "\n".join(lines)

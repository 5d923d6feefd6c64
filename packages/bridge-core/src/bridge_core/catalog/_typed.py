"""A result schema as ``TypedDict`` definitions: what a stub's return type names.

``-> ConvertTimeResult`` says little unless the model (or a type checker) can read what it is, so
a stub is followed by the definitions of the types it returns, nested where the schema nests::

    class ConvertTimeResult(TypedDict):
        source: ConvertTimeTimeResult
        time_difference: str

    class ConvertTimeTimeResult(TypedDict):
        datetime: str
        is_dst: NotRequired[bool]

Names start with the tool's (``ConvertTime``) so that one server's stubs can share a module; a
nested object is named after its key (``ConvertTimeSource``), a ``$ref`` after its definition
(``ConvertTimeTimeResult``, defined once however often it is used). Keys that are not ASCII
identifiers take the functional form (``TypedDict("X", {"max-results": int})``), their names
JSON-quoted and escaped like other upstream text (:func:`bridge_core._visible.visible`): a key
can neither end its string nor hide characters. The schema comes from an upstream server, so
depth, number of types and fields per type are bounded; past them a type is ``dict`` or ``Any``.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Mapping
from typing import Any

from bridge_core._visible import visible
from bridge_core.catalog._annotations import MAX_DEPTH, Schema, python_name, resolve, schema_type
from bridge_core.catalog._annotations import union as _union

__all__ = ["MAX_FIELDS", "MAX_TYPES", "pascal", "result_types"]

MAX_TYPES = 12
"""TypedDicts per tool: more is a schema too large to read; the rest are ``dict``."""
MAX_FIELDS = 40
"""Fields shown per TypedDict; the rest are counted in a comment."""


def pascal(name: str) -> str:
    """``get_current_time`` → ``GetCurrentTime`` (ASCII, starting with a letter: a type's name,
    ``2fa`` → ``T2fa``)."""
    joined = "".join(part[:1].upper() + part[1:] for part in python_name(name).split("_"))
    return joined if joined[:1].isalpha() else f"T{joined}"


def _key_literal(key: str) -> str:
    # JSON quoting cannot be ended by the key (quotes, backslashes, newlines are escaped) and is
    # a valid Python literal; lone surrogates would make the stub unencodable, and what JSON
    # leaves raw (DEL, C1 controls, bidi overrides, zero-width characters) is made visible.
    quoted = json.dumps(key, ensure_ascii=False)
    quoted = "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in quoted)
    return visible(quoted, single_line=True)


def _plain(key: str) -> bool:
    # ASCII only: Python folds Unicode identifiers (NFKC), so "ﬁle" would declare "file".
    return key.isascii() and key.isidentifier() and not keyword.iskeyword(key)


class _Renderer:
    def __init__(self, root: Schema, base: str) -> None:
        self.root = root
        self.base = base
        self.classes: list[str] = []
        self.names: set[str] = set()
        self.defined: dict[int, str] = {}
        """Schemas already given a name (by id: a ``$ref`` resolves to the same object)."""

    def name(self, hint: str) -> str:
        name, n = hint, 1
        while name in self.names:
            n += 1
            name = f"{hint}{n}"
        self.names.add(name)
        return name

    def annotation(self, schema: object, hint: str, depth: int) -> str:
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return "Any"
        resolved = resolve(schema, self.root)
        if resolved is None:
            return "Any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            hint = self.base + pascal(ref.rsplit("/", 1)[-1])
        if "const" in resolved or "enum" in resolved:
            return schema_type(resolved, self.root, depth)
        for combiner in ("anyOf", "oneOf"):
            members = resolved.get(combiner)
            if isinstance(members, list) and members:
                return _union(
                    [
                        self.annotation(m, hint if len(members) == 1 else f"{hint}{i}", depth + 1)
                        for i, m in enumerate(members, 1)
                    ]
                )
        all_of = resolved.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            return self.annotation(all_of[0], hint, depth + 1)
        kind = resolved.get("type")
        if isinstance(kind, list):
            return _union([self.annotation({**resolved, "type": k}, hint, depth) for k in kind])
        if kind == "array":
            items = resolved.get("items")
            if isinstance(items, Mapping):
                return f"list[{self.annotation(items, f'{hint}Item', depth + 1)}]"
        properties = resolved.get("properties")
        if (kind == "object" or kind is None) and isinstance(properties, Mapping) and properties:
            return self.typed_dict(resolved, properties, hint, depth)
        return schema_type(resolved, self.root, depth)

    def typed_dict(
        self, schema: Schema, properties: Mapping[Any, Any], hint: str, depth: int
    ) -> str:
        known = self.defined.get(id(schema))
        if known is not None:
            return known
        if len(self.classes) >= MAX_TYPES:
            return "dict"
        name = self.name(hint)
        self.defined[id(schema)] = name
        at = len(self.classes)
        self.classes.append("")  # its place: a type comes before the types of its fields
        required = schema.get("required")
        required = required if isinstance(required, list) else []
        keys = [k for k in properties if isinstance(k, str)]
        fields: list[tuple[str, str]] = []
        for key in keys[:MAX_FIELDS]:
            # The result's fields are named after the tool alone: ``ConvertTimeSource``.
            stem = self.base if name == f"{self.base}Result" else name
            annotation = self.annotation(properties[key], stem + pascal(key), depth + 1)
            fields.append((key, annotation if key in required else f"NotRequired[{annotation}]"))
        notes = []
        if len(keys) > MAX_FIELDS:
            notes.append(f"# and {len(keys) - MAX_FIELDS} more keys")
        if schema.get("additionalProperties") is True:
            notes.append("# other keys may come too")
        if all(_plain(key) for key, _ in fields):
            lines = [f"class {name}(TypedDict):"]
            lines += [f"    {key}: {annotation}" for key, annotation in fields]
            lines += [f"    {note}" for note in notes]
        else:
            lines = [f'{name} = TypedDict("{name}", {{']
            lines += [f"    {_key_literal(key)}: {annotation}," for key, annotation in fields]
            lines += [f"    {note}" for note in notes]
            lines.append("})")
        self.classes[at] = "\n".join(lines)
        return name


def result_types(schema: Schema, base: str) -> tuple[str, list[str]]:
    """The annotation of a value of ``schema`` and the ``TypedDict`` definitions it uses, the
    outermost first; names start with ``base`` (the tool's name in Pascal case)."""
    renderer = _Renderer(schema, base)
    annotation = renderer.annotation(schema, f"{base}Result", 0)
    return annotation, renderer.classes

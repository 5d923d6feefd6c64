"""A client's configuration file as an editable document: its servers table, everything else kept.

JSON files are rewritten with the indentation they had (detected), keys in their order, non-ASCII
text as it was and the final newline if there was one; comments and trailing commas of JSONC files
cannot be kept (the caller says so). TOML (Codex) is edited with tomlkit, which keeps comments and
layout of everything it does not touch.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import tomlkit
import tomlkit.exceptions
from bridge_core.discovery import strip_jsonc
from tomlkit.items import Table

__all__ = ["ConfigDocument", "DocumentError", "JsonDocument", "TomlDocument"]

_INDENT = re.compile(r"\n([ \t]+)\S")


class DocumentError(ValueError):
    """The file cannot be edited safely (it does not parse, or has an unexpected shape)."""


class ConfigDocument(ABC):
    """One configuration file's content, with its servers table under ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key

    @abstractmethod
    def servers(self) -> dict[str, Any]:
        """The servers table as plain values (empty when the file has none)."""

    @abstractmethod
    def remove_server(self, name: str) -> None:
        """Remove one entry of the servers table."""

    @abstractmethod
    def put_server(self, name: str, value: Mapping[str, Any]) -> None:
        """Add or replace one entry (a replaced entry keeps its place)."""

    @abstractmethod
    def replace_table(self, table: Mapping[str, Any] | None) -> None:
        """Set the whole servers table (None removes it)."""

    @abstractmethod
    def dumps(self) -> str:
        """The file's new text."""

    lost_comments: bool = False
    """After :meth:`dumps`: the original text had comments or trailing commas it dropped."""


class JsonDocument(ConfigDocument):
    """A JSON (or JSONC) configuration file.

    When the servers table exists, only its text is replaced: every other byte of the file (its
    layout, comments, the rest of a 20 MB ``~/.claude.json``) stays as it was.
    """

    def __init__(self, text: str, key: str) -> None:
        super().__init__(key)
        self._text = text
        self._jsonc = False
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            try:  # VS Code and Gemini accept comments: the same rule as discovery's reader
                data = json.loads(strip_jsonc(text))
            except json.JSONDecodeError as exc:
                raise DocumentError(
                    f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                ) from None
            self._jsonc = True
        if not isinstance(data, dict):
            raise DocumentError("the top level is not a JSON object")
        table = data.get(key)
        if table is not None and not isinstance(table, dict):
            raise DocumentError(f"{key} is not an object")
        self._data: dict[str, Any] = data
        self._original_table = json.dumps(table, sort_keys=True) if table is not None else None

    def servers(self) -> dict[str, Any]:
        return dict(self._data.get(self.key) or {})

    def _table(self) -> dict[str, Any]:
        table = self._data.get(self.key)
        if table is None:
            table = self._data[self.key] = {}
        assert isinstance(table, dict)
        return table

    def remove_server(self, name: str) -> None:
        self._table().pop(name, None)

    def put_server(self, name: str, value: Mapping[str, Any]) -> None:
        self._table()[name] = dict(value)

    def replace_table(self, table: Mapping[str, Any] | None) -> None:
        if table is None:
            self._data.pop(self.key, None)
        else:
            self._data[self.key] = dict(table)

    def _indent(self) -> str | None:
        if not self._text.strip():
            return "  "
        match = _INDENT.search(self._text)
        return None if match is None else match.group(1)

    def dumps(self) -> str:
        indent = self._indent()
        table = self._data.get(self.key)
        span = _member_span(self._text, self.key) if self._text.strip() else None
        if span is not None and table is not None:
            start, end = span
            if json.dumps(table, sort_keys=True) == self._original_table:
                return self._text
            value = json.dumps(table, indent=indent, ensure_ascii=False)
            if indent is not None:  # the table sits one level deep
                value = value.replace("\n", "\n" + indent)
            self.lost_comments = _has_comments(self._text[start:end])
            return self._text[:start] + value + self._text[end:]
        self.lost_comments = self._jsonc
        text = json.dumps(self._data, indent=indent, ensure_ascii=False)
        return text + "\n" if self._text.endswith("\n") or not self._text.strip() else text


def _has_comments(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return True
    return False


def _skip(text: str, i: int) -> int:
    """Index of the next character that is not whitespace or a comment."""
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            return i
    return i


def _string_end(text: str, i: int) -> int:
    """Index just past the JSON string starting at ``text[i] == '"'``."""
    j = i + 1
    while j < len(text) and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _value_end(text: str, i: int) -> int:
    """Index just past the JSON value starting at ``i`` (brackets matched outside strings)."""
    if text[i] == '"':
        return _string_end(text, i)
    if text[i] not in "{[":
        j = i
        while j < len(text) and text[j] not in ",}]" and not text[j].isspace():
            j += 1
        return j
    depth = 0
    j = i
    while j < len(text):
        ch = text[j]
        if ch == '"':
            j = _string_end(text, j)
            continue
        if text.startswith("//", j) or text.startswith("/*", j):
            j = _skip(text, j)
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise DocumentError("unbalanced brackets")


def _member_span(text: str, key: str) -> tuple[int, int] | None:
    """Where the value of the top-level member ``key`` is in ``text`` (the last one wins, as in
    ``json.loads``); None when there is none. The text is known to parse."""
    i = _skip(text, text.index("{") + 1)
    found = None
    while i < len(text) and text[i] == '"':
        end = _string_end(text, i)
        name = json.loads(text[i:end])
        i = _skip(text, end)  # at the colon
        start = _skip(text, i + 1)
        stop = _value_end(text, start)
        if name == key:
            found = (start, stop)
        i = _skip(text, stop)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
    return found


class TomlDocument(ConfigDocument):
    """A TOML configuration file (Codex ``config.toml``), edited in place with tomlkit."""

    def __init__(self, text: str, key: str) -> None:
        super().__init__(key)
        try:
            self._doc = tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as exc:
            raise DocumentError(f"invalid TOML: {exc}") from None
        table = self._doc.get(key)
        if table is not None and not isinstance(table, dict):
            raise DocumentError(f"{key} is not a table")

    def servers(self) -> dict[str, Any]:
        table = self._doc.get(self.key)
        return {} if table is None else dict(table.unwrap())

    def _table(self) -> Any:
        table = self._doc.get(self.key)
        if table is None:
            table = tomlkit.table(is_super_table=True)
            self._doc.add(self.key, table)
        return table

    def remove_server(self, name: str) -> None:
        table = self._table()
        if name in table:
            del table[name]

    def put_server(self, name: str, value: Mapping[str, Any]) -> None:
        entry = tomlkit.table()
        for field, item in value.items():
            if isinstance(item, Mapping):
                inline = tomlkit.inline_table()
                inline.update(item)
                entry.add(field, inline)
            else:
                entry.add(field, item)
        entry.add(tomlkit.nl())  # a blank line before whatever table follows
        table = self._table()
        if name in table:
            table[name] = entry
        else:
            table.add(name, entry)

    def replace_table(self, table: Mapping[str, Any] | None) -> None:
        if self.key in self._doc:
            del self._doc[self.key]
        if table is None:
            return
        if isinstance(table, Table):
            self._doc.add(self.key, table)
            return
        for name, value in table.items():
            self.put_server(name, value)

    def item(self) -> Any:
        """The servers table as tomlkit keeps it (comments and layout), for an undo."""
        return self._doc.get(self.key)

    def dumps(self) -> str:
        return tomlkit.dumps(self._doc)

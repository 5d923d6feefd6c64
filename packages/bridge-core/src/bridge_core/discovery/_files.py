"""Reading configuration files into raw entries; every failure becomes :class:`SourceUnreadable`."""

from __future__ import annotations

import functools
import json
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path

from bridge_core.discovery._model import RawEntry, SourceUnreadable
from bridge_core.local_files import NotARegularFile, TooLarge, read_regular

__all__ = ["entries_of", "load_json", "load_toml", "strip_jsonc", "table_at"]

Normaliser = Callable[[Mapping[str, object]], dict[str, object]]

# ~/.claude.json keeps Claude Code's history and grows to tens of MB; past this size a file is
# not a configuration file (and must not eat memory).
_MAX_FILE_BYTES = 256 * 1024 * 1024


def _read_text(path: Path) -> str:
    try:
        data = read_regular(path, _MAX_FILE_BYTES)
    except TooLarge:
        raise SourceUnreadable(f"file is larger than {_MAX_FILE_BYTES} bytes") from None
    except NotARegularFile:
        raise SourceUnreadable("not a regular file") from None
    if data is None:
        raise FileNotFoundError(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceUnreadable(f"not UTF-8 text: {exc}") from None


def load_json(path: Path, *, comments: bool = False) -> object:
    """Parse a JSON file; with ``comments`` also JSONC (``//``, ``/* */``, trailing commas).

    ``~/.claude.json`` is read twice per discovery (project and user scope): the parsed value is
    reused while the file's size and modification time are unchanged. Callers must not mutate it.
    """
    stat = path.stat()
    return _parse_json(str(path), stat.st_mtime_ns, stat.st_size, comments)


@functools.lru_cache(maxsize=4)
def _parse_json(path: str, mtime_ns: int, size: int, comments: bool) -> object:
    text = _read_text(Path(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if comments:
            try:
                return json.loads(strip_jsonc(text))
            except json.JSONDecodeError:
                pass
        raise SourceUnreadable(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise SourceUnreadable("JSON nested too deeply") from None


def load_toml(path: Path) -> object:
    """Parse a TOML file."""
    try:
        return tomllib.loads(_read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise SourceUnreadable(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise SourceUnreadable("TOML nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise SourceUnreadable(f"invalid TOML: {exc}") from None


def table_at(data: object, *keys: str) -> Mapping[str, object] | None:
    """The object at ``data[k1][k2]...``; None when a key is absent.

    Raises :class:`SourceUnreadable` when something on the way is not an object, naming the key.
    """
    current = data
    for depth, key in enumerate(keys):
        if not isinstance(current, dict):
            where = ".".join(keys[:depth]) or "the top level"
            raise SourceUnreadable(f"{where} is not an object")
        if key not in current:
            return None
        current = current[key]
    if not isinstance(current, dict):
        raise SourceUnreadable(f"{'.'.join(keys)} is not an object")
    return current


def entries_of(
    table: Mapping[str, object],
    location: str,
    *,
    known_fields: frozenset[str] = frozenset(),
    normalise: Normaliser | None = None,
) -> list[RawEntry]:
    """One :class:`RawEntry` per key of a servers table (``mcpServers``, ``servers``, ...)."""
    result = []
    for name, value in table.items():
        if normalise is not None and isinstance(value, dict):
            value = normalise(value)
        result.append(RawEntry(str(name), value, f"{location}.{name}", known_fields))
    return result


def strip_jsonc(text: str) -> str:
    """Remove comments and trailing commas outside strings (VS Code's JSON-with-comments)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "}]":
            # Drop a comma that only has whitespace between it and this closing bracket.
            k = len(out) - 1
            while k >= 0 and out[k].isspace():
                k -= 1
            if k >= 0 and out[k] == ",":
                del out[k]
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)

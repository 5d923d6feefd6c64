"""What reaches the user in a question, made honest: text chosen by sandbox code (a call's
arguments) or by an upstream server (a relayed question) can neither hide, reorder nor fake the
rest of the dialog, and a value too long to show whole is shown head and tail with the number of
characters left out, never silently cut.

One escaping function, :func:`visible`, serves the bridge's approval question
(:mod:`bridge_core.approval`) and every relayed question (:mod:`bridge_core.proxy._relay`).
"""

from __future__ import annotations

import json
import ntpath
import posixpath
import re
import unicodedata
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

__all__ = ["clipped", "resolved_path", "visible", "walk_strings"]

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Control, format (bidi overrides and isolates, zero-width characters, tags), surrogate,
private-use, unassigned, line/paragraph separators and every space but the plain one."""
_BLANK_LETTERS = frozenset(
    "\u115f\u1160\u3164\uffa0\u2800\u180e\u034f"  # fillers and blanks that are not "space"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))  # variation selectors
)
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _hidden(char: str) -> bool:
    if char == " ":
        return False
    return (
        unicodedata.category(char) in _HIDDEN_CATEGORIES
        or char in _BLANK_LETTERS
        or 0xE0100 <= ord(char) <= 0xE01EF  # variation selectors supplement
    )


def visible(text: str, *, quoted: bool = False, newlines: bool = False) -> str:
    """``text`` with every character that could hide or reorder text shown as an escape
    (``\\r``, ``\\u202e``, ``\\u200b``...).

    ``quoted``: a JSON string literal with every non-ASCII character escaped too (values and
    names in the approval question: a homoglyph in a path must read as what it is).
    ``newlines``: keep line feeds (free text such as a relayed question's message)."""
    if quoted:
        return json.dumps(text, ensure_ascii=True)
    return "".join(
        _escaped(char) if _hidden(char) and not (newlines and char == "\n") else char
        for char in text
    )


def clipped(raw: str, room: int) -> str:
    """``raw`` quoted (see :func:`visible`); longer than ``room`` characters, its head and tail
    with the number of characters left out between them: the end of a path (what a tool acts
    on) is always shown."""
    if len(raw) <= room:
        return visible(raw, quoted=True)
    half = max(1, room // 2)
    hidden = len(raw) - 2 * half
    return (
        visible(raw[:half], quoted=True)[:-1]
        + f"…[{hidden} characters not shown]…"
        + visible(raw[-half:], quoted=True)[1:]
    )


def clipped_json(value: Any, room: int) -> str:
    """A non-string value as JSON (ASCII), head and tail when longer than ``room``."""
    text = json.dumps(value, ensure_ascii=True, default=str)
    if len(text) <= room:
        return text
    half = max(1, room // 2)
    return f"{text[:half]}…[{len(text) - 2 * half} characters not shown]…{text[-half:]}"


_URL = re.compile(r"(?P<prefix>[A-Za-z][A-Za-z0-9+.-]+:(?://[^/?#]*)?)(?P<path>[^?#]*)(?P<rest>.*)")


def resolved_path(value: str) -> str | None:
    """How a path-like ``value`` reads once ``.``/``..`` segments, repeated separators and
    percent-encoding are resolved, when that differs from ``value``; ``None`` otherwise.

    The server may read it relative to a root the bridge does not know, so this is the textual
    resolution a user can check, not a claim about the file system."""
    if "/" not in value and "\\" not in value and "%" not in value:
        return None
    prefix, path, rest = "", value, ""
    url = _URL.fullmatch(value)
    if url is not None and (url.group("prefix").endswith("/") or "//" in url.group("prefix")):
        prefix, path, rest = url.group("prefix"), url.group("path"), url.group("rest")
    path = unquote(path)
    # A backslash reads as a separator on Windows; a server there resolves it so.
    normal = (ntpath if "\\" in path else posixpath).normpath(path) if path else path
    if path.endswith(("/", "\\")) and normal not in ("/", "\\", "."):
        normal += path[-1]
    shown = prefix + normal + rest
    if shown == value or (normal == "." and path in ("", ".")):
        return None
    return shown


def walk_strings(value: Any, where: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """Every string inside a JSON value, with where it sits (``a.b[2]``)."""
    if isinstance(value, str):
        yield where, value
    elif depth < 32 and isinstance(value, dict):
        for key, item in value.items():
            yield from walk_strings(item, f"{where}.{key}", depth + 1)
    elif depth < 32 and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from walk_strings(item, f"{where}[{index}]", depth + 1)

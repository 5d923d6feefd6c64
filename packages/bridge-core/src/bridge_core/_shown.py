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
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from bridge_core._visible import visible as escaped

__all__ = ["clipped", "resolved_path", "visible", "walk_strings"]


def visible(text: str, *, quoted: bool = False, newlines: bool = False) -> str:
    """``text`` with every character that could hide or reorder text shown as an escape
    (``\\r``, ``\\u202e``, ``\\u200b``...): the product's escaper in its strict form
    (:func:`bridge_core._visible.visible`).

    ``quoted``: a JSON string literal with every non-ASCII character escaped too (values and
    names in the approval question: a homoglyph in a path must read as what it is).
    ``newlines``: keep line feeds (free text such as a relayed question's message)."""
    if quoted:
        return json.dumps(text, ensure_ascii=True)
    return escaped(text, strict=True, single_line=not newlines)


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


def resolved_path(value: str) -> list[tuple[str, str]]:
    """How a path-like ``value`` reads once ``.``/``..`` segments, repeated separators and
    percent-encoding are resolved, when that differs from ``value``: each distinct reading with
    how it was read (``as written``, ``percent-decoded``, ``with \\ as a separator``); empty
    when every reading is ``value`` itself.

    A server reads a path one way, the bridge cannot know which: a POSIX server takes ``\\``
    and ``%2f`` as plain characters of a name, a Windows one takes ``\\`` as a separator, a URL
    is percent-decoded. When these readings differ, each is shown, so that none can hide
    behind another (``/docs/x\\y/../../../etc`` is ``/etc`` to a POSIX server).

    The server may read it relative to a root the bridge does not know, so these are textual
    resolutions a user can check, not claims about the file system."""
    if "/" not in value and "\\" not in value and "%" not in value:
        return []
    prefix, path, rest = "", value, ""
    url = _URL.fullmatch(value)
    is_url = url is not None and (url.group("prefix").endswith("/") or "//" in url.group("prefix"))
    if url is not None and is_url:
        prefix, path, rest = url.group("prefix"), url.group("path"), url.group("rest")
    # A URL's path is percent-encoded by definition; a plain path may or may not be decoded.
    spellings = [(unquote(path), "percent-decoded")] if is_url else [(path, "as written")]
    if not is_url and unquote(path) != path:
        spellings.append((unquote(path), "percent-decoded"))
    readings: list[tuple[str, str]] = []
    for spelled, how in spellings:
        ways = [(posixpath, how)]
        if "\\" in spelled:
            ways.append((ntpath, f"{how}, with \\ as a separator"))
        for module, label in ways:
            shown = prefix + _normal(module, spelled) + rest
            if shown not in (reading for reading, _ in readings):
                readings.append((shown, label))
    if all(reading == value for reading, _ in readings):
        return []
    if len(readings) == 1 and readings[0][0] == prefix + "." + rest and path in ("", "."):
        return []
    return readings


def _normal(module: Any, path: str) -> str:
    normal = module.normpath(path) if path else path
    seps = ("/", "\\") if module is ntpath else ("/",)
    if path.endswith(seps) and normal not in ("/", "\\", "."):
        normal += path[-1]
    return str(normal)


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

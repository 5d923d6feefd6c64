"""How text an upstream server sends the user is made safe to show: escaped as the bridge's own
approval question is (:func:`bridge_core._shown.visible`), runs of blank lines and spaces
collapsed, lengths, lines, fields and nesting bounded, the approval form's field refused, and a
URL-mode question's page named by its host (see :mod:`._relay` for why and where it is used).
Pure functions of the upstream's data: no I/O, no state."""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from pydantic import BaseModel

from bridge_core._shown import visible
from bridge_core.approval import SESSION_FIELD, SESSION_TITLE

__all__ = [
    "MAX_FORM_CHARS",
    "MAX_FORM_FIELDS",
    "MAX_RELAYED_DEPTH",
    "MAX_RELAYED_LINES",
    "MAX_RELAYED_TEXT",
    "MAX_SCHEMA_DEPTH",
    "TOO_DEEP",
    "TooDeep",
    "borrowed_field",
    "escaped_message",
    "escaped_request",
    "escaped_schema",
    "escaped_tool",
    "page_host",
    "relayed_text",
    "unrelayable_url",
]

MAX_RELAYED_TEXT = 2000
"""Characters of a relayed question's message or system prompt (escaped); the rest is cut, and
the cut says how much."""
MAX_FORM_FIELDS = 64
"""Fields of one relayed form; a larger form is refused (each field's texts are bounded, their
number must be too, or a form fills the user's dialog with the upstream's text)."""
MAX_FORM_CHARS = 128 * 1024
"""Characters of one relayed form's schema, escaped (its fields' options, nested objects and
titles together); a larger form is refused: bounding the fields alone left an option list or a
nested object of thousands to fill the user's dialog."""
MAX_RELAYED_LINES = 40
"""Lines of one relayed text; the rest are joined to the last, so it cannot fill a dialog."""
_SPACE_RUN = re.compile(r"[ \t]{9,}")
_BLANK_RUN = re.compile(r"\n(?:[ \t]*\n)+")


def relayed_text(text: str) -> str:
    """An upstream's free text as the user is shown it: control, bidi and invisible characters
    escaped (the approval question's escaping), runs of blank lines collapsed to one, long runs
    of spaces counted, at most :data:`MAX_RELAYED_LINES` lines and :data:`MAX_RELAYED_TEXT`
    characters (a cut says so)."""
    shown = visible(text, newlines=True)
    shown = _BLANK_RUN.sub("\n\n", shown).strip()
    shown = _SPACE_RUN.sub(lambda run: f" [{len(run.group())} spaces] ", shown)
    lines = shown.split("\n")
    if len(lines) > MAX_RELAYED_LINES:
        shown = (
            "\n".join(lines[: MAX_RELAYED_LINES - 1])
            + " / "
            + " / ".join(lines[MAX_RELAYED_LINES - 1 :])
        )
    if len(shown) > MAX_RELAYED_TEXT:
        more = len(shown) - MAX_RELAYED_TEXT
        shown = shown[:MAX_RELAYED_TEXT] + f"…[{more} characters not shown]"
    return shown


_ASCII_ALIKE = str.maketrans("i10", "llo")
"""ASCII letters and digits a reader takes for one another in a dialog's font (``AIlow``,
``sessi0n``), folded alike on both sides of the comparison."""


def _plain(text: str) -> str:
    """``text`` as a reader compares it: compatibility forms folded (fullwidth letters are
    letters), case folded, only letters and digits kept (separators, zero-width and joiners
    dropped), ASCII look-alikes folded (:data:`_ASCII_ALIKE`)."""
    return "".join(
        char for char in unicodedata.normalize("NFKC", text).casefold() if char.isalnum()
    ).translate(_ASCII_ALIKE)


def _looks_like(text: str, ours: str) -> bool:
    """Whether ``text`` reads as ``ours`` (plain ASCII): equal once plain, or equal but for
    non-ASCII letters standing where ``ours`` has a letter (Cyrillic ``U+0430`` or ``U+0456``, Greek
    ``U+03BF``: homoglyphs the escaping leaves as they are, since they are letters)."""
    text, ours = _plain(text), _plain(ours)
    return len(text) == len(ours) and all(
        mine == theirs or not mine.isascii() for mine, theirs in zip(text, ours, strict=True)
    )


def borrowed_field(schema: Any, depth: int = 0) -> str | None:
    """The approval form's field, if a relayed form reuses its name or its title, spelled
    alike or looking alike: as a field's name or title at any depth of the schema, or as an
    option a client shows (a ``oneOf`` option's title, an ``enum`` value or ``enumNames``).

    Walked as deep as :func:`escaped_schema` relays anything: it counts a nested property as one
    level, this walk as two (the ``properties`` object, then the field)."""
    if depth > 2 * MAX_SCHEMA_DEPTH + 2:
        return None
    if isinstance(schema, list):
        for item in schema:
            if (found := borrowed_field(item, depth + 1)) is not None:
                return found
        return None
    if not isinstance(schema, dict):
        return None
    shown: list[Any] = [schema.get("title"), schema.get("const")]
    for key in ("enum", "enumNames"):
        if isinstance(schema.get(key), list):
            shown.extend(schema[key])
    properties = schema.get("properties")
    if isinstance(properties, dict):
        shown.extend(properties)
    for text in shown:
        if isinstance(text, str) and (
            _looks_like(text, SESSION_FIELD) or _looks_like(text, SESSION_TITLE)
        ):
            return text
    for item in schema.values():
        if isinstance(item, dict | list) and (found := borrowed_field(item, depth + 1)):
            return found
    return None


_SHOWN_KEYS = frozenset({"title", "description", "default", "const"})
"""Schema keywords whose strings a client shows: a field's label and help, and the value it
fills in or offers (a ``default``, a ``const`` option without a title)."""
MAX_SCHEMA_DEPTH = 64
"""Nesting of a relayed schema that is escaped; a part nested deeper is relayed as ``{}`` (no
constraint, nothing to show) rather than unescaped."""


def escaped_schema(value: Any, depth: int = 0) -> Any:
    """A form's (or a sampling tool's) schema with every string a client may show escaped as a
    question's text: titles, descriptions, defaults, options, and property names (shown when a
    field has no title; escaped alike in ``required``, so the two still match)."""
    if depth > MAX_SCHEMA_DEPTH:
        return {}
    if isinstance(value, dict):
        return {key: _escaped_entry(key, item, depth) for key, item in value.items()}
    if isinstance(value, list):
        return [
            relayed_text(item) if isinstance(item, str) else escaped_schema(item, depth + 1)
            for item in value
        ]
    return value


def _escaped_entry(key: str, item: Any, depth: int) -> Any:
    if key in _SHOWN_KEYS and isinstance(item, str):
        return relayed_text(item)
    if key == "properties" and isinstance(item, dict):
        return {
            relayed_text(str(name)): escaped_schema(field, depth + 1)
            for name, field in item.items()
        }
    return escaped_schema(item, depth + 1)


MAX_RELAYED_DEPTH = 160
"""Nesting of a whole relayed request (JSON levels) that is escaped; a deeper request (an
upstream's tool input or metadata nested past it) is refused rather than relayed unescaped.
Above what a tool's schema cut at :data:`MAX_SCHEMA_DEPTH` takes (two JSON levels per nested
property, and the request around it); the SDK parses no message nested past about 200."""


class TooDeep(Exception):
    """A relayed request nested past :data:`MAX_RELAYED_DEPTH`."""


def _escaped_json(value: Any, depth: int = 0) -> Any:
    """Every string and object key of a JSON value escaped as a question's text (newlines
    kept); idempotent on text already escaped (its escapes are plain ASCII), so it runs last
    over a whole request whose shown parts were escaped and bounded before."""
    if depth > MAX_RELAYED_DEPTH:
        raise TooDeep
    if isinstance(value, str):
        return visible(value, newlines=True)
    if isinstance(value, dict):
        return {
            visible(str(key), newlines=True): _escaped_json(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_escaped_json(item, depth + 1) for item in value]
    return value


def escaped_request(params: Any) -> Any:
    """``params`` with every string left (see :func:`_escaped_json`) escaped, without the
    upstream's ``_meta`` and icons at any depth (its tools', its replayed tool results' and
    resource links'). Raises :class:`TooDeep`."""
    try:
        dumped = _unadorned(params).model_dump(by_alias=True, mode="json", exclude_none=True)
    except ValueError as exc:  # pydantic's own bound on nesting
        raise TooDeep from exc
    return type(params).model_validate(_escaped_json(dumped))


_NOT_RELAYED = ("meta", "icons")
"""Protocol fields left out of every object of a relayed request: metadata means nothing to
the client (its session supplies its own), and icons are URLs a client fetches to draw them
(the upstream would learn who looked, and when)."""


def _unadorned(model: Any, depth: int = 0) -> Any:
    """``model`` with the :data:`_NOT_RELAYED` fields of it and of every protocol object in it
    unset. Only protocol objects: data they carry (a schema, a tool's input, structured
    content) keeps keys of those names."""
    if depth > MAX_RELAYED_DEPTH:
        raise TooDeep
    if isinstance(model, list):
        return [_unadorned(item, depth + 1) for item in model]
    if not isinstance(model, BaseModel):
        return model
    update = {
        name: None if name in _NOT_RELAYED else _unadorned(getattr(model, name), depth + 1)
        for name in type(model).model_fields
        if getattr(model, name) is not None
    }
    return model.model_copy(update=update)


TOO_DEEP = types.ErrorData(
    code=types.INVALID_PARAMS,
    message=(
        f"the bridge does not relay a request nested deeper than {MAX_RELAYED_DEPTH} levels: "
        "it could not show it escaped"
    ),
)

_PAGE_SCHEMES = ("http", "https")
"""The only pages a URL-mode question may open: ``javascript:`` runs in whatever opens it, and
``data:`` or ``file:`` pages have no host to name."""

_SPECIAL_SCHEMES = ("http", "https", "ws", "wss", "ftp", "file")
"""Schemes a browser parses by the WHATWG URL rules: ``\\`` ends the host as ``/`` does, a
missing ``//`` is supplied, a percent-encoded host is decoded."""


def page_host(url: str) -> str | None:
    """The host a URL-mode question's page is on, as the user should read it (IDNA, escaped),
    or ``None`` when the bridge cannot name it as a browser would read it.

    Python reads ``https://evil.example\\@good.example/`` as on ``good.example`` (after the
    userinfo); a browser ends the host at the backslash and opens ``evil.example``. Such a URL,
    one on a special scheme without ``//`` (``https:evil.example``), and a host spelled with
    percent-escapes are not named but refused."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return None
    if parts.scheme.lower() in _SPECIAL_SCHEMES:
        # As a browser first cleans it: C0 controls and spaces around it, tabs and newlines in it.
        cleaned = re.sub("[\t\n\r]", "", url.strip("".join(map(chr, range(0x21)))))
        after = cleaned.split(":", 1)[-1]
        authority = re.split("[/?#]", after[2:], maxsplit=1)[0]
        if not after.startswith("//") or "\\" in authority or "%" in host or not host:
            return None
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        pass  # shown escaped below
    return visible(host, quoted=True) if host else "(no host)"


def unrelayable_url(url: str) -> str | None:
    """Why a URL-mode question's URL is not relayed, or ``None``: only ``http``/``https``
    pages, and no character in the URL that the question's escaping would show otherwise
    (a space, a control, bidi or zero-width character: a valid URL percent-encodes them, and
    the client shows the URL as it is)."""
    scheme = url.partition(":")[0].strip().lower()
    if scheme not in _PAGE_SCHEMES:
        return (
            f"the bridge relays a URL-mode question only for an http or https page, not "
            f"{visible(scheme[:32], quoted=True)}"
        )
    if " " in url or visible(url) != url:
        return (
            "the bridge does not relay a URL holding spaces, control, bidi or invisible "
            "characters (a valid URL percent-encodes them)"
        )
    return None


def escaped_message(message: types.SamplingMessage) -> types.SamplingMessage:
    """A sampling message with its text blocks escaped (what a reviewer reads is what it is),
    those of a replayed tool result and the tool name of a replayed tool use included."""

    def escaped(block: Any) -> Any:
        if isinstance(block, types.TextContent):
            return block.model_copy(update={"text": visible(block.text, newlines=True)})
        if isinstance(block, types.ToolUseContent):
            return block.model_copy(update={"name": visible(block.name)})
        if isinstance(block, types.ToolResultContent):
            return block.model_copy(update={"content": [escaped(item) for item in block.content]})
        return block

    content = message.content
    shown = [escaped(block) for block in content] if isinstance(content, list) else escaped(content)
    return message.model_copy(update={"content": shown})


def escaped_tool(tool: types.Tool) -> types.Tool:
    """A sampling request's tool definition with every text a model or a reviewer reads
    escaped as the messages are: name, title, description, annotation title, schemas."""
    update: dict[str, Any] = {
        "name": visible(tool.name),
        "input_schema": escaped_schema(tool.input_schema),
    }
    if tool.title is not None:
        update["title"] = visible(tool.title)
    if tool.description is not None:
        update["description"] = visible(tool.description, newlines=True)
    if tool.output_schema is not None:
        update["output_schema"] = escaped_schema(tool.output_schema)
    if tool.annotations is not None and tool.annotations.title is not None:
        update["annotations"] = tool.annotations.model_copy(
            update={"title": visible(tool.annotations.title)}
        )
    return tool.model_copy(update=update)

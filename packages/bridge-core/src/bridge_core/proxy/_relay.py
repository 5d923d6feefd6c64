"""What an upstream server asks of its client, relayed to the MCP client whose code caused it.

An upstream server may send its client requests (``elicitation/create``,
``sampling/createMessage``, ``roots/list``) and log notifications. The bridge is that client; the
user is behind the MCP client whose ``run_python`` made the nested call. Each call registers that
client's :class:`~bridge_core.client_link.ClientLink` on the server's relay while it runs
(:meth:`ClientRelay.serving`, which also covers the server's start, when servers like
``filesystem`` ask for roots); a request arriving meanwhile goes to it and its answer goes back.

Routing is by what is in flight, because a stdio server's request names no call: with calls of
one client in flight the request goes to that client (the latest link); with calls of several
clients (a shared HTTP bridge) the request is refused rather than guessed, and with none it is
refused too — an upstream cannot reach a user whose code is not using it.

Everything an upstream sends here is hostile and bounded: requests in flight per server, time
per request, log notifications per window and their size; secrets configured for any server are
masked in what reaches the client.

The user must never take an upstream's question for the bridge's approval question: a relayed
question starts with a line naming the server, its text goes through the same escaping as the
approval question (:func:`bridge_core._shown.visible`: control, bidi, zero-width characters shown
as escapes) with blank-line and space runs collapsed and its length bounded, so nothing can push
that line out of view; a form reusing the approval form's field is refused; a URL-mode question
names the host the page is on; a sampling request's system prompt starts with the same naming.
A form's defaults and options, a sampling request's tool definitions and its replayed tool
results are escaped the same way; and so, last, is every other string and object key of a
relayed request (a schema's other keywords, a tool use's input, a tool result's structured
content, model hints, stop sequences, metadata, MIME types, annotations), so that no field the
bridge did not think of reaches the client raw. The upstream's own ``_meta`` (its progress
token, its reserved keys) is not relayed, nor are a sampling tool's icons (an upstream's image
in a dialog about the bridge); a URL-mode question opens only an ``http``/``https`` page whose
URL holds no character the escaping would show otherwise. Log notifications' logger names and
data get the same escaping.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT

from bridge_core._shown import visible
from bridge_core.approval import SESSION_FIELD, SESSION_TITLE
from bridge_core.client_link import Capability, ClientLink
from bridge_core.redaction import Redactor

__all__ = ["ClientRelay"]

logger = logging.getLogger("bridge_core.proxy")

MAX_RELAYED_IN_FLIGHT = 4
"""Requests one upstream server may have waiting on the user at once; more are refused at once
(a flood of sampling requests must not pile up dialogs or memory)."""
MAX_LOGS_PER_WINDOW = 50
LOG_WINDOW = 10.0
"""At most this many log notifications of one server reach the client per window; the rest are
dropped (counted, and said once per window in the bridge's log)."""
MAX_LOG_DATA = 2000
"""Characters of one relayed log notification's data (JSON); longer data is cut."""
MAX_RELAYED_TEXT = 2000
"""Characters of a relayed question's message or system prompt (escaped); the rest is cut, and
the cut says how much."""
MAX_FORM_FIELDS = 64
"""Fields of one relayed form; a larger form is refused (each field's texts are bounded, their
number must be too, or a form fills the user's dialog with the upstream's text)."""
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


def _plain(text: str) -> str:
    """``text`` as a reader compares it: compatibility forms folded (fullwidth letters are
    letters), case folded, only letters and digits kept (separators, zero-width and joiners
    dropped)."""
    return "".join(
        char for char in unicodedata.normalize("NFKC", text).casefold() if char.isalnum()
    )


def _looks_like(text: str, ours: str) -> bool:
    """Whether ``text`` reads as ``ours`` (plain ASCII): equal once plain, or equal but for
    non-ASCII letters standing where ``ours`` has a letter (Cyrillic ``U+0430`` or ``U+0456``, Greek
    ``U+03BF``: homoglyphs the escaping leaves as they are, since they are letters)."""
    text, ours = _plain(text), _plain(ours)
    return len(text) == len(ours) and all(
        mine == theirs or not mine.isascii() for mine, theirs in zip(text, ours, strict=True)
    )


def _borrowed_field(schema: Any, depth: int = 0) -> str | None:
    """The approval form's field, if a relayed form reuses its name or its title, spelled
    alike or looking alike: as a field's name or title at any depth of the schema, or as an
    option a client shows (a ``oneOf`` option's title, an ``enum`` value or ``enumNames``)."""
    if depth > MAX_SCHEMA_DEPTH:
        return None
    if isinstance(schema, list):
        for item in schema:
            if (found := _borrowed_field(item, depth + 1)) is not None:
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
        if isinstance(item, dict | list) and (found := _borrowed_field(item, depth + 1)):
            return found
    return None


_SHOWN_KEYS = frozenset({"title", "description", "default", "const"})
"""Schema keywords whose strings a client shows: a field's label and help, and the value it
fills in or offers (a ``default``, a ``const`` option without a title)."""
MAX_SCHEMA_DEPTH = 64
"""Nesting of a relayed schema that is escaped; a part nested deeper is relayed as ``{}`` (no
constraint, nothing to show) rather than unescaped."""


def _escaped_schema(value: Any, depth: int = 0) -> Any:
    """A form's (or a sampling tool's) schema with every string a client may show escaped as a
    question's text: titles, descriptions, defaults, options, and property names (shown when a
    field has no title; escaped alike in ``required``, so the two still match)."""
    if depth > MAX_SCHEMA_DEPTH:
        return {}
    if isinstance(value, dict):
        return {key: _escaped_entry(key, item, depth) for key, item in value.items()}
    if isinstance(value, list):
        return [
            relayed_text(item) if isinstance(item, str) else _escaped_schema(item, depth + 1)
            for item in value
        ]
    return value


def _escaped_entry(key: str, item: Any, depth: int) -> Any:
    if key in _SHOWN_KEYS and isinstance(item, str):
        return relayed_text(item)
    if key == "properties" and isinstance(item, dict):
        return {
            relayed_text(str(name)): _escaped_schema(field, depth + 1)
            for name, field in item.items()
        }
    return _escaped_schema(item, depth + 1)


MAX_RELAYED_DEPTH = 160
"""Nesting of a whole relayed request (JSON levels) that is escaped; a deeper request (an
upstream's tool input or metadata nested past it) is refused rather than relayed unescaped.
Above what a tool's schema cut at :data:`MAX_SCHEMA_DEPTH` takes (two JSON levels per nested
property, and the request around it); the SDK parses no message nested past about 200."""


class _TooDeep(Exception):
    """A relayed request nested past :data:`MAX_RELAYED_DEPTH`."""


def _escaped_json(value: Any, depth: int = 0) -> Any:
    """Every string and object key of a JSON value escaped as a question's text (newlines
    kept); idempotent on text already escaped (its escapes are plain ASCII), so it runs last
    over a whole request whose shown parts were escaped and bounded before."""
    if depth > MAX_RELAYED_DEPTH:
        raise _TooDeep
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


def _escaped_request(params: Any) -> Any:
    """``params`` with every string left (see :func:`_escaped_json`) escaped, without the
    upstream's ``_meta``: its progress token and reserved keys mean nothing to the client, and
    the client's session supplies its own. Raises :class:`_TooDeep`."""
    try:
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    except ValueError as exc:  # pydantic's own bound on nesting
        raise _TooDeep from exc
    dumped.pop("_meta", None)
    return type(params).model_validate(_escaped_json(dumped))


_TOO_DEEP = types.ErrorData(
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


def _host(url: str) -> str | None:
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


def _unrelayable_url(url: str) -> str | None:
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


class ClientRelay:
    """The server→client side of one upstream server's connection (shared by its restarts)."""

    def __init__(self, server: str, redactor: Redactor, request_timeout: float) -> None:
        self.server = server
        self._redactor = redactor
        self._timeout = request_timeout
        self._links: dict[int, ClientLink] = {}
        self._ids = itertools.count()
        self._in_flight = 0
        self._window_start = -LOG_WINDOW
        self._logs_in_window = 0
        self._dropped_logs = 0

    @contextmanager
    def serving(self, link: ClientLink | None) -> Iterator[None]:
        """While the block runs, requests of this server may go to ``link``'s client."""
        if link is None:
            yield
            return
        key = next(self._ids)
        self._links[key] = link
        try:
            yield
        finally:
            del self._links[key]

    def _target(self, capability: Capability | None) -> ClientLink | types.ErrorData:
        links = list(self._links.values())
        what = f"the MCP server {self.server!r}"
        if not links:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"no client to ask: no call to {what} from the bridge's clients is running",
            )
        if len({link.identity for link in links}) > 1:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=(
                    f"calls of several clients to {what} are running; the bridge does not guess "
                    "which one this request is for"
                ),
            )
        link = links[-1]
        if capability is not None and not link.supports(capability):
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"the client behind the bridge does not support {capability}",
            )
        return link

    async def _relay(self, capability: Capability, send: Any) -> Any:
        target = self._target(capability)
        if isinstance(target, types.ErrorData):
            return target
        if self._in_flight >= MAX_RELAYED_IN_FLIGHT:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=(
                    f"{self._in_flight} requests of this server already wait on the client; "
                    "the bridge refuses more"
                ),
            )
        self._in_flight += 1
        try:
            with anyio.fail_after(self._timeout):
                return await send(target)
        except TimeoutError:
            return types.ErrorData(
                code=types.REQUEST_TIMEOUT,
                message=f"the client did not answer within {self._timeout:g} s",
            )
        except Exception as exc:  # the client failed or went away: the server gets an error
            logger.info("relaying %s of %r to the client failed: %r", capability, self.server, exc)
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the client behind the bridge failed to answer ({type(exc).__name__})",
            )
        finally:
            self._in_flight -= 1

    @property
    def attribution(self) -> str:
        """The first line of an upstream's question to the user (and of its system prompt)."""
        name = visible(self.server[:128], quoted=True)
        return (
            f"[The MCP server {name} asks, through the bridge; "
            "this is not the bridge's approval question]"
        )

    def _masked(self, params: Any) -> Any:
        """``params`` with every configured secret masked (a server may quote its token)."""
        if not self._redactor:
            return params
        try:
            dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        except ValueError as exc:  # pydantic's own bound on nesting
            raise _TooDeep from exc
        return type(params).model_validate(self._redactor.value(dumped))

    # --- the ClientSession callbacks ------------------------------------------------------------

    async def on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        try:
            masked = self._masked(params)
        except _TooDeep:
            return _TOO_DEEP
        # The client sees every question as the bridge's: the relayed one names the server that
        # asks on its first line, so an upstream cannot pass its question off as the bridge's
        # approval of a call (an "Accept to run it" the user answers is then the server's).
        update: dict[str, Any] = {}
        message = relayed_text(masked.message)
        if isinstance(masked, types.ElicitRequestURLParams):
            # The client opens the URL: the user must know whose page it is.
            refused = _unrelayable_url(masked.url)
            if refused is not None:
                return types.ErrorData(code=types.INVALID_PARAMS, message=refused)
            host = _host(masked.url)
            if host is None:
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=(
                        "the bridge does not relay a URL whose host it cannot name as a "
                        "browser reads it (a backslash, no '//', or a percent-encoded host)"
                    ),
                )
            opens = f"It asks you to open a page on {host}."
            update["message"] = f"{self.attribution}\n{opens}\n{message}"
        else:
            fields = masked.requested_schema.get("properties")
            if isinstance(fields, dict) and len(fields) > MAX_FORM_FIELDS:
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=(
                        f"the bridge does not relay a form of {len(fields)} fields (at most "
                        f"{MAX_FORM_FIELDS}): the user could not read it"
                    ),
                )
            borrowed = _borrowed_field(masked.requested_schema)
            if borrowed is not None:
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=(
                        f"the bridge does not relay a form with the field {borrowed[:64]!r}: "
                        "its own approval question uses it"
                    ),
                )
            update["message"] = f"{self.attribution}\n{message}"
            update["requested_schema"] = _escaped_schema(masked.requested_schema)
        try:
            relayed = _escaped_request(masked.model_copy(update=update))
        except _TooDeep:
            return _TOO_DEEP
        result: types.ElicitResult | types.ErrorData = await self._relay(
            "elicitation", lambda link: link.elicit(relayed)
        )
        return result

    async def on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        try:
            masked = self._masked(params)
        except _TooDeep:
            return _TOO_DEEP
        # Attributed, not dropped (docs/decisions/0091): the system prompt starts with the line
        # naming the server, and its text and the messages' text are escaped as a question's,
        # so the client's review of the request (and the model) sees whose request it is.
        prompt = relayed_text(masked.system_prompt) if masked.system_prompt else ""
        edited = masked.model_copy(
            update={
                "system_prompt": f"{self.attribution}\n{prompt}".rstrip(),
                "messages": [_escaped_message(message) for message in masked.messages],
                # The tools' names, descriptions and schemas reach the model and the client's
                # review as the messages do: escaped alike.
                "tools": None if masked.tools is None else [_escaped_tool(t) for t in masked.tools],
                # The client's "context" is the run_python conversation: other servers' results
                # and the user's own text. An upstream asking for it (thisServer, allServers:
                # the bridge is the one server the client knows) gets none.
                "include_context": None,
            }
        )
        try:
            relayed = _escaped_request(edited)
        except _TooDeep:
            return _TOO_DEEP
        result: types.CreateMessageResult | types.ErrorData = await self._relay(
            "sampling", lambda link: link.create_message(relayed)
        )
        return result

    async def on_list_roots(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        result: types.ListRootsResult | types.ErrorData = await self._relay(
            "roots", lambda link: link.list_roots()
        )
        return result

    def progress_to(self, link: ClientLink, tool: str) -> ProgressFnT:
        """A ``progress_callback`` for one call: the server's progress on ``tool`` reaches the
        client that made the call as log notifications (the ``run_python`` request's own
        progress values must only increase, so they cannot carry another call's), under the
        same bounds as the server's logs."""

        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            data: dict[str, Any] = {"tool": tool[:200], "progress": progress, "total": total}
            if message is not None:
                data["message"] = message
            params = types.LoggingMessageNotificationParams(
                level="info", logger="progress", data=data
            )
            await self._log_to(link, params)

        return relay_progress

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        target = self._target(None)
        if isinstance(target, types.ErrorData):
            return  # nobody (or no single client) to tell: the server's own log only
        await self._log_to(target, params)

    async def _log_to(
        self, target: ClientLink, params: types.LoggingMessageNotificationParams
    ) -> None:
        now = anyio.current_time()
        if now - self._window_start >= LOG_WINDOW:
            if self._dropped_logs:
                logger.warning(
                    "dropped %d log notifications of %r (more than %d per %g s)",
                    self._dropped_logs,
                    self.server,
                    MAX_LOGS_PER_WINDOW,
                    LOG_WINDOW,
                )
            self._window_start, self._logs_in_window, self._dropped_logs = now, 0, 0
        if self._logs_in_window >= MAX_LOGS_PER_WINDOW:
            self._dropped_logs += 1
            return
        self._logs_in_window += 1
        data = json.dumps(params.data, ensure_ascii=False, default=str)
        if self._redactor:
            data = self._redactor.text(data)  # before the cut: a cut secret would not match
        # JSON escapes controls but not bidi, zero-width or tag characters: escaped as a
        # question's text is, before the cut (an escape is never cut off its character).
        data = visible(data)
        if len(data) > MAX_LOG_DATA:
            data = data[:MAX_LOG_DATA] + "…"
        shown = types.LoggingMessageNotificationParams(
            level=params.level,
            logger=visible(f"{self.server}/{params.logger or ''}"[:200].rstrip("/")),
            data=data,
        )
        try:
            # Notifications are relayed from the dispatcher's read path: never wait long here.
            with anyio.move_on_after(1.0):
                await target.log(shown)
        except Exception as exc:
            logger.debug("relaying a log notification of %r failed: %r", self.server, exc)


def _escaped_message(message: types.SamplingMessage) -> types.SamplingMessage:
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


def _escaped_tool(tool: types.Tool) -> types.Tool:
    """A sampling request's tool definition with every text a model or a reviewer reads
    escaped as the messages are: name, title, description, annotation title, schemas."""
    update: dict[str, Any] = {
        "name": visible(tool.name),
        "input_schema": _escaped_schema(tool.input_schema),
        # An upstream's image (or a page it loads) has no place in a dialog about the bridge.
        "icons": None,
    }
    if tool.title is not None:
        update["title"] = visible(tool.title)
    if tool.description is not None:
        update["description"] = visible(tool.description, newlines=True)
    if tool.output_schema is not None:
        update["output_schema"] = _escaped_schema(tool.output_schema)
    if tool.annotations is not None and tool.annotations.title is not None:
        update["annotations"] = tool.annotations.model_copy(
            update={"title": visible(tool.annotations.title)}
        )
    return tool.model_copy(update=update)

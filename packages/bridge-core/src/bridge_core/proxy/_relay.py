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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT

from bridge_core._shown import visible
from bridge_core.client_link import Capability, ClientLink
from bridge_core.proxy._relayed import (
    MAX_FORM_CHARS,
    MAX_FORM_FIELDS,
    TOO_DEEP,
    TooDeep,
    borrowed_field,
    escaped_message,
    escaped_request,
    escaped_schema,
    escaped_tool,
    page_host,
    relayed_text,
    unrelayable_url,
)
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
            raise TooDeep from exc
        return type(params).model_validate(self._redactor.value(dumped))

    # --- the ClientSession callbacks ------------------------------------------------------------

    async def on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        try:
            masked = self._masked(params)
        except TooDeep:
            return TOO_DEEP
        # The client sees every question as the bridge's: the relayed one names the server that
        # asks on its first line, so an upstream cannot pass its question off as the bridge's
        # approval of a call (an "Accept to run it" the user answers is then the server's).
        update: dict[str, Any] = {}
        message = relayed_text(masked.message)
        if isinstance(masked, types.ElicitRequestURLParams):
            # The client opens the URL: the user must know whose page it is.
            refused = unrelayable_url(masked.url)
            if refused is not None:
                return types.ErrorData(code=types.INVALID_PARAMS, message=refused)
            host = page_host(masked.url)
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
            borrowed = borrowed_field(masked.requested_schema)
            if borrowed is not None:
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=(
                        f"the bridge does not relay a form with the field {borrowed[:64]!r}: "
                        "its own approval question uses it"
                    ),
                )
            update["message"] = f"{self.attribution}\n{message}"
            update["requested_schema"] = escaped_schema(masked.requested_schema)
            size = len(json.dumps(update["requested_schema"], ensure_ascii=False))
            if size > MAX_FORM_CHARS:
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=(
                        f"the bridge does not relay a form of {size:,} characters (at most "
                        f"{MAX_FORM_CHARS:,}): the user could not read it"
                    ),
                )
        try:
            relayed = escaped_request(masked.model_copy(update=update))
        except TooDeep:
            return TOO_DEEP
        result: types.ElicitResult | types.ErrorData = await self._relay(
            "elicitation", lambda link: link.elicit(relayed)
        )
        return result

    async def on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        try:
            masked = self._masked(params)
        except TooDeep:
            return TOO_DEEP
        # Attributed, not dropped (docs/decisions/0091): the system prompt starts with the line
        # naming the server, and its text and the messages' text are escaped as a question's,
        # so the client's review of the request (and the model) sees whose request it is.
        prompt = relayed_text(masked.system_prompt) if masked.system_prompt else ""
        edited = masked.model_copy(
            update={
                "system_prompt": f"{self.attribution}\n{prompt}".rstrip(),
                "messages": [escaped_message(message) for message in masked.messages],
                # The tools' names, descriptions and schemas reach the model and the client's
                # review as the messages do: escaped alike.
                "tools": None if masked.tools is None else [escaped_tool(t) for t in masked.tools],
                # The client's "context" is the run_python conversation: other servers' results
                # and the user's own text. An upstream asking for it (thisServer, allServers:
                # the bridge is the one server the client knows) gets none.
                "include_context": None,
            }
        )
        try:
            relayed = escaped_request(edited)
        except TooDeep:
            return TOO_DEEP
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

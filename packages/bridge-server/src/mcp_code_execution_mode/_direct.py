"""Direct tools: each proxied tool listed by itself as ``<server>__<tool>`` (``[tools] mode``).

Listing and calling go through the gateway the sandbox's nested calls use
(:class:`bridge_core.proxy.ProxyGateway`): the policy filters the list and refuses a call by name,
approvals ask the client (or refuse as a nested call is refused when it cannot be asked), the
audit log gets one line per call, configured secrets are masked in results and errors, and the
upstream message limit and call timeout bound each call. This module only names tools, turns a
name back into ``(server, tool)``, and shapes the gateway's answer as a ``CallToolResult``.

Naming (docs/direct-tools.md):

- A definition is the upstream's, with every configured secret masked (as sandbox code reads
  it): a tool whose name holds one is left out.
- ``<server>__<tool>``, kept only if it is a valid MCP tool name (1 to 128 of
  ``A-Z a-z 0-9 _ - .``);
  an invalid one is not rewritten (a rewrite hides the real name and makes new collisions) but
  left out of the list, logged; sandbox code still reaches the tool.
- MCP Apps: a tool whose ``_meta.ui.resourceUri`` names a ``ui://`` resource is listed under
  the same name in every mode, ``code`` included, once the bridge knows its server's list (it
  ran, now or in an earlier start: the persisted cache); a code-mode listing never starts a
  server. Its ``ui://`` resources pass through (:mod:`._apps`).
- Two tools whose names collide (server ``a`` tool ``b__c`` and server ``a__b`` tool ``c``), or a
  name equal to ``run_python`` in ``both`` mode: neither is listed, and a call by that name is
  refused as ambiguous rather than guessed.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from bridge_core._visible import visible
from pydantic import ValidationError

from mcp_code_execution_mode.rendering import error_result

if TYPE_CHECKING:
    from bridge_core.client_link import ClientLink
    from bridge_core.proxy import ProxyGateway
    from bridge_core.redaction import Redactor

__all__ = [
    "MODES",
    "SEPARATOR",
    "DirectTools",
    "ToolsMode",
    "client_tools",
    "direct_name",
    "lists_code",
    "lists_direct",
    "name_tools",
    "shown_tools",
    "split_name",
    "ui_resource",
]

logger = logging.getLogger(__name__)

ToolsMode = Literal["code", "direct", "both"]
MODES: tuple[ToolsMode, ...] = ("code", "direct", "both")

SEPARATOR = "__"
"""Between the server and the tool name: ``.`` and ``/`` are common inside tool names, a double
underscore is rare in either, and clients that prefix names themselves use it too."""

_VALID_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""The MCP tool-name rule (spec 2025-11-25, SEP-986); clients may refuse other names."""

DIRECT_SESSION = "(direct)"
"""The ``session`` of a direct call in the audit log and in approvals: no sandbox runs it."""


MAX_LISTENERS = 1024
"""Client connections remembered to tell of list changes; past it the longest known is forgotten
(an HTTP client that left without ending its session stays until then)."""
NOTIFY_TIMEOUT = 2.0
"""Seconds one connection may take to accept a list-change notification; one that does not
(its stream never read) is forgotten, so it holds up neither the others nor the server's
refresh."""


class Listeners:
    """The client connections to tell of a list change, by connection key.

    The SDK gives each request its own ``ServerSession``; one kept after its request still
    sends a notification on its connection's standalone stream (stdio, or the HTTP GET stream),
    so the latest of each connection is kept (strongly: nothing else holds it).
    """

    def __init__(self) -> None:
        self._by_key: dict[str, Any] = {}

    def add(self, key: str | None, session: Any) -> None:
        if key is None:  # a stateless request: no stream to notify later
            return
        self._by_key.pop(key, None)
        self._by_key[key] = session
        while len(self._by_key) > MAX_LISTENERS:
            self._by_key.pop(next(iter(self._by_key)))

    def __bool__(self) -> bool:
        return bool(self._by_key)

    async def notify(self) -> None:
        """Send ``notifications/tools/list_changed`` to each; forget those that fail or do
        not take it within :data:`NOTIFY_TIMEOUT`."""
        for key, session in list(self._by_key.items()):
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    await session.send_tool_list_changed()
            except Exception as exc:  # a client that went away: the others still hear
                logger.debug("tools/list_changed not delivered: %r", exc)
                self._by_key.pop(key, None)


def lists_code(mode: str) -> bool:
    return mode in ("code", "both")


def lists_direct(mode: str) -> bool:
    return mode in ("direct", "both")


def direct_name(server: str, tool: str) -> str | None:
    """The direct name of ``server``'s ``tool``, or None when it is not a valid tool name."""
    name = f"{server}{SEPARATOR}{tool}"
    return name if _VALID_NAME.fullmatch(name) else None


def name_tools(
    tools: Iterable[tuple[str, types.Tool]], reserved: Iterable[str] = ()
) -> dict[str, tuple[str, types.Tool]]:
    """Each listable direct name → ``(server, tool)``; invalid and colliding names left out."""
    named: dict[str, tuple[str, types.Tool]] = {}
    clashing: set[str] = set(reserved)
    for server, tool in tools:
        name = direct_name(server, tool.name)
        if name is None:
            logger.info("%s.%s is not listed directly: %r is not a valid tool name", server,
                        tool.name, f"{server}{SEPARATOR}{tool.name}")  # fmt: skip
            continue
        if name in clashing or name in named:
            logger.warning("%s names two tools: neither is listed directly", name)
            named.pop(name, None)
            clashing.add(name)
            continue
        named[name] = (server, tool)
    return named


def split_name(name: str, servers: Iterable[str]) -> list[tuple[str, str]]:
    """Every ``(server, tool)`` that ``name`` may stand for, given the configured servers."""
    return [
        (server, name[len(server) + len(SEPARATOR) :])
        for server in servers
        if name.startswith(server + SEPARATOR) and len(name) > len(server) + len(SEPARATOR)
    ]


def ui_resource(tool: types.Tool) -> str | None:
    """The ``ui://`` resource an MCP App tool names (``_meta.ui.resourceUri``), else None."""
    ui = (tool.meta or {}).get("ui")
    uri = ui.get("resourceUri") if isinstance(ui, dict) else None
    return uri if isinstance(uri, str) and uri.startswith("ui://") else None


def listed_tool(name: str, server: str, tool: types.Tool) -> types.Tool:
    """The upstream tool as a client sees it directly: its schemas, annotations and ``_meta``
    kept, its title (escaped) ending with the server it comes from, whatever the server wrote
    (a title ``read_file (filesystem)`` from another server reads ``... (filesystem) (evil)``
    in a client's tool picker). Without the server's ``execution``: the bridge answers every
    direct call as a plain call (a tool that runs only as a task upstream is created and
    awaited there), so a client must not be told to call it as a task."""
    title = visible(tool.title or tool.name, single_line=True)
    suffix = f" ({server})"
    return tool.model_copy(
        update={
            "name": name,
            "title": title if title.endswith(suffix) else title + suffix,
            "execution": None,
        }
    )


def shown_tools(
    named: Mapping[str, tuple[str, types.Tool]], redactor: Redactor | None
) -> list[types.Tool]:
    """The direct tools as a client is given them: each :func:`listed_tool` with every
    configured secret masked in every string of its definition, as sandbox code reads the same
    definitions (a server that documents its own key in a description or a schema default must
    not hand it to the model). A tool whose name holds a secret is left out (logged): masked,
    its name would call nothing."""
    shown = []
    for name, (server, tool) in named.items():
        listed = listed_tool(name, server, tool)
        if not redactor:
            shown.append(listed)
            continue
        if redactor.text(name) != name:
            logger.info("a tool of %s is not listed directly: its name holds a secret", server)
            continue
        dumped = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
        masked = redactor.value(dumped)
        if masked is not dumped:
            try:
                listed = types.Tool.model_validate(masked)
            except ValidationError:
                logger.info("%s is not listed directly: its masked definition is invalid", name)
                continue
        shown.append(listed)
    return shown


def client_tools(
    mode: str,
    run_python: types.Tool,
    allowed: Iterable[tuple[str, types.Tool]],
    redactor: Redactor | None,
) -> list[types.Tool]:
    """The tools a client of ``mode`` is given, in order: ``run_python`` in ``code`` and ``both``
    mode, then under their direct names (:func:`shown_tools`) every ``allowed`` tool in
    ``direct`` and ``both`` mode, only the MCP App tools in ``code`` mode. The bridge's
    ``tools/list`` answers this, and ``doctor`` counts it."""
    code = [run_python] if lists_code(mode) else []
    if not lists_direct(mode):
        allowed = [(server, tool) for server, tool in allowed if ui_resource(tool) is not None]
    return code + shown_tools(name_tools(allowed, [tool.name for tool in code]), redactor)


class DirectTools:
    """Lists and calls proxied tools directly, through one gateway; forwards list changes."""

    def __init__(self, output_cap: int) -> None:
        self._output_cap = output_cap
        """Characters of a direct result's text kept (``MCP_BRIDGE_OUTPUT_CAP``, as for
        ``run_python``): past it, head and tail."""
        self._gateway: ProxyGateway | None = None
        self._listed: dict[str, frozenset[str]] = {}
        """Per server, the allowed tools (as JSON) a client was last given: a new list that
        differs is announced with ``notifications/tools/list_changed``."""
        self._sessions = Listeners()
        """The connections that were given direct tools."""
        self._apps_shown: dict[str, frozenset[str]] = {}
        """Per server, the MCP App tools code-mode sessions were last given."""
        self._app_sessions = Listeners()
        """The connections given only ``run_python`` and the App tools (code mode)."""

    @property
    def gateway(self) -> ProxyGateway | None:
        return self._gateway

    async def attach(self, gateway: ProxyGateway) -> None:
        """Use ``gateway``, and hear about its servers' new tool lists (once per gateway); the
        lists its servers gave before are looked at once, as if just given."""
        if self._gateway is gateway:
            return
        self._gateway = gateway
        gateway.tool_listeners.append(self.tools_changed)
        if not self._app_sessions:
            return
        # Code-mode clients that listed before the bridge opened: the App tools known now.
        by_server: dict[str, list[types.Tool]] = {}
        for server, tool in (await self.known_apps()).values():
            by_server.setdefault(server, []).append(tool)
        for server in gateway.catalog.servers:
            apps = _seen(by_server.get(server, ()))
            await self._tell(self._app_sessions, self._apps_shown, server, apps, unseen=frozenset())

    async def listing(
        self, mode: str, run_python: types.Tool, session: Any, key: str | None
    ) -> list[types.Tool]:
        """What a client of ``mode`` is given (:func:`client_tools`); ``session`` (of the
        connection ``key``) will hear when it changes. In ``code`` mode no server is started:
        the App tools are those known now (running servers' lists, the persisted cache)."""
        if lists_direct(mode):
            allowed = await self._direct_allowed(session, key)
        else:
            allowed = await self._apps_allowed(session, key)
        redactor = self._gateway.redactor if self._gateway is not None else None
        return client_tools(mode, run_python, allowed, redactor)

    async def _direct_allowed(self, session: Any, key: str | None) -> list[tuple[str, types.Tool]]:
        """Every allowed tool (servers known of nothing started for their lists)."""
        if self._gateway is None:
            return []
        allowed = await self._gateway.allowed_tools()
        self._sessions.add(key, session)
        by_server: dict[str, list[types.Tool]] = {}
        for server, tool in allowed:
            by_server.setdefault(server, []).append(tool)
        self._listed.update({server: _seen(tools) for server, tools in by_server.items()})
        return allowed

    async def _apps_allowed(self, session: Any, key: str | None) -> list[tuple[str, types.Tool]]:
        """The allowed App tools known without starting a server."""
        self._app_sessions.add(key, session)
        named = await self.known_apps()
        by_server: dict[str, list[types.Tool]] = {}
        for server, tool in named.values():
            by_server.setdefault(server, []).append(tool)
        if self._gateway is not None:
            for server in self._gateway.catalog.servers:
                self._apps_shown[server] = _seen(by_server.get(server, ()))
        return list(named.values())

    async def known_apps(self, reserved: Iterable[str] = ()) -> dict[str, tuple[str, types.Tool]]:
        """Direct name → ``(server, tool)`` of the allowed App tools known without starting a
        server (running servers' lists, the persisted cache)."""
        if self._gateway is None:
            return {}
        allowed = await self._gateway.allowed_tools(start=False)
        return name_tools([(s, t) for s, t in allowed if ui_resource(t) is not None], reserved)

    async def _named(self, reserved: Iterable[str]) -> dict[str, tuple[str, types.Tool]]:
        if self._gateway is None:
            return {}
        return name_tools(await self._gateway.allowed_tools(), reserved)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        client: ClientLink | None,
        client_key: str | None,
        carrier: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Call the tool ``name`` stands for, through the gateway, in its own trace span
        (``carrier``: the request's ``_meta``, the client's trace); every failure a result."""
        # Here, not at the top: serving stdio answers `initialize` before the bridge loads.
        from bridge_core import tracing
        from bridge_core.gateway import CallContext, CallFailed

        gateway = self._gateway
        if gateway is None:
            return error_result("the bridge has no MCP servers open", kind="UNKNOWN_TOOL")
        candidates = split_name(name, gateway.catalog.servers)
        if len(candidates) > 1:
            named = await self._named(())
            candidates = [(named[name][0], named[name][1].name)] if name in named else []
            if not candidates:
                return error_result(
                    f"{name!r} names tools of more than one server; call it from run_python",
                    kind="UNKNOWN_TOOL",
                )
        if not candidates:
            return error_result(
                f"unknown tool {name!r}: direct tools are named <server>{SEPARATOR}<tool>",
                kind="UNKNOWN_TOOL",
            )
        (server, tool), = candidates  # fmt: skip
        ctx = CallContext(
            DIRECT_SESSION, uuid.uuid4().hex[:12], client=client, client_key=client_key
        )
        try:
            answer = await tracing.traced_direct_call(
                gateway.call_tool(ctx, server, tool, dict(arguments or {})),
                server=server,
                tool=tool,
                carrier=carrier,
            )
        except CallFailed as exc:  # masked by the gateway
            return error_result(exc.message, kind=_kind(exc.code))
        try:
            return capped(types.CallToolResult.model_validate(answer), self._output_cap)
        except ValidationError as exc:  # the pool validated it already: a bug, said plainly
            return error_result(f"invalid result from {server}.{tool}: {exc.error_count()} "
                                "errors", kind="TOOL_ERROR")  # fmt: skip

    async def tools_changed(self, server: str, tools: list[types.Tool]) -> None:
        """A server listed its tools (again): tell the sessions given direct tools, if the list
        they saw of it changed."""
        if self._gateway is None:
            return
        policy = self._gateway.catalog.policy
        allowed = [tool for tool in tools if policy.check(server, tool.name).allowed]
        # Only for clients that were shown something: a code-mode bridge without App listeners
        # pays nothing per listing (a server may list thousands of tools).
        if self._sessions:
            await self._tell(self._sessions, self._listed, server, _seen(allowed), unseen=None)
        if self._app_sessions:
            apps = _seen(tool for tool in allowed if ui_resource(tool) is not None)
            await self._tell(self._app_sessions, self._apps_shown, server, apps, unseen=frozenset())

    async def _tell(
        self,
        sessions: Listeners,
        shown: dict[str, frozenset[str]],
        server: str,
        now: frozenset[str],
        unseen: frozenset[str] | None,
    ) -> None:
        """Send ``list_changed`` to ``sessions`` if ``now`` differs from what they were shown of
        ``server`` (``unseen``: what they were shown of a server never listed to them; None:
        nothing to correct)."""
        before = shown.get(server, unseen)
        if before is None or not sessions or now == before:
            return  # not shown to anyone, or a relisting that changed nothing visible
        shown[server] = now
        await sessions.notify()


_CUT = "\n…\n"
"""Where a capped result's text was cut (counted within the cap)."""


def capped(result: types.CallToolResult, cap: int) -> types.CallToolResult:
    """``result`` with its text over ``cap`` characters (all text blocks together) cut to head
    and tail, as ``run_python`` keeps its output, and a line saying how much was left out. No
    session holds the rest of a direct call's result: the line says how to keep it whole.

    The text blocks are read as one text: its first three quarters of the cap and its last
    quarter are kept (two disjoint spans, so nothing is shown twice), the cut marked once, in
    the block where it starts; blocks wholly between the spans are left out, other blocks
    (images, resources) stay where they were."""
    texts = [b for b in result.content if isinstance(b, types.TextContent)]
    total = sum(len(b.text) for b in texts)
    if total <= cap:
        return result
    cut = _CUT if cap > len(_CUT) else ""
    room = cap - len(cut)
    head_end = room * 3 // 4
    tail_start = total - (room - head_end)  # > head_end: total > cap >= room
    content: list[Any] = []
    start = 0
    for block in result.content:
        if not isinstance(block, types.TextContent):
            content.append(block)
            continue
        text, end = block.text, start + len(block.text)
        kept = text[: max(0, min(end, head_end) - start)]
        if start <= head_end < end:
            kept += cut  # the cut starts in this block (one block holds each position)
        if end > tail_start:
            kept += text[max(0, tail_start - start) :]
        if kept == text:
            content.append(block)
        elif kept:
            content.append(block.model_copy(update={"text": kept}))
        start = end
    said = (
        f"[notice] the result's text was {total:,} characters, over the bridge's output cap of "
        f"{cap:,} (MCP_BRIDGE_OUTPUT_CAP): its head and tail are shown; call the tool from "
        "run_python to keep the whole result in a session"
    )
    content.append(types.TextContent(type="text", text=said))
    return result.model_copy(update={"content": content})


def _seen(tools: Iterable[types.Tool]) -> frozenset[str]:
    """What a client was shown of these tools (their whole definitions)."""
    return frozenset(tool.model_dump_json(by_alias=True, exclude_none=True) for tool in tools)


def _kind(code: int) -> str:
    from bridge_protocol import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return "INTERNAL"

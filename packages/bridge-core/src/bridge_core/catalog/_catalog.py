"""The catalog: every configured server's tools, filtered by policy, listed, rendered, searched.

It answers the sandbox's discovery requests (``discovered_servers``, ``list_tools``,
``query_tool_docs``, ``search_tool_docs``; shapes in :mod:`bridge_core.gateway`) and loads tool
lists lazily: from memory, else from the persisted :class:`ToolCache`, else by asking the proxy
(the ``list_tools`` callable, which starts the server). Listing servers never starts one.
Which server or tool a name means, and whether policy allows it, is decided in :mod:`._names`.

Work that grows with the tool lists (converting one, indexing them, searching them) runs in
worker threads: a large catalog never holds up the event loop, hence never another session. The
index is one over every visible server, because its ranking weighs a word by its rarity across
all of them (BM25 idf); it is rebuilt only when a list changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, cast, get_args

import anyio
import anyio.to_thread
from bridge_protocol import ErrorCode, JSONValue
from bridge_protocol.names import MAX_NAME_CHARS
from mcp.types import Tool

from bridge_core.catalog._cache import ToolCache
from bridge_core.catalog._docs import Detail, ToolDoc
from bridge_core.catalog._errors import CatalogError, UnknownServer, UnknownTool
from bridge_core.catalog._names import resolve_server, resolve_tool
from bridge_core.catalog._observed import Observed, ObservedShapes, observable_value
from bridge_core.catalog._search import DEFAULT_THRESHOLD, MAX_QUERY_CHARS, SearchHit, ToolIndex
from bridge_core.catalog._stubs import render_stub
from bridge_core.errors import BridgeError
from bridge_core.gateway import CallFailed
from bridge_core.policy import Policy
from bridge_core.servers import ServerSpec

__all__ = ["MAX_SEARCH_LIMIT", "Catalog", "ResultShape", "ToolLister"]

logger = logging.getLogger(__name__)

ToolLister = Callable[[str], Awaitable[Sequence[Tool | ToolDoc]]]
"""``await list_tools(server)``: the server's current tools (starting it if needed). Raises on
failure (:class:`~bridge_core.gateway.CallFailed` / :class:`~bridge_core.errors.UpstreamError`)."""

MAX_SEARCH_LIMIT = 50

ResultShape = tuple[Mapping[str, Any], Literal["declared", "observed"]]
"""A tool's result schema and where it comes from: its ``outputSchema`` (``"declared"``) or the
keys and types of its results so far (``"observed"``, :mod:`bridge_core.catalog._observed`)."""


class Catalog:
    """Tool documentation for the servers discovery found, as the sandbox may see it."""

    def __init__(
        self,
        servers: Mapping[str, ServerSpec],
        *,
        list_tools: ToolLister | None = None,
        policy: Policy | None = None,
        cache: ToolCache | None = None,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        self._specs = dict(servers)
        self._list_tools = list_tools
        self.policy = policy or Policy()
        self._cache = cache
        self._threshold = threshold
        self._tools: dict[str, tuple[ToolDoc, ...]] = {}
        self._descriptions: dict[str, str] = {}
        self._cache_tried: set[str] = set()
        self._listed: set[str] = set()
        """Servers whose list in memory came from the server itself in this process (not from
        the cache of an earlier start, which may lack tools the server has now)."""
        self._locks: dict[str, anyio.Lock] = {}
        self._generation = 0
        """Bumped whenever a list changes; an index built at an older one is stale."""
        self._index: tuple[int, ToolIndex] | None = None
        self._index_lock = anyio.Lock()
        self._observed = ObservedShapes()

    # -- servers and tool lists ---------------------------------------------------------------

    @property
    def servers(self) -> Mapping[str, ServerSpec]:
        """Every configured server, allowed or not."""
        return self._specs

    def visible_servers(self) -> list[str]:
        """Servers the policy lets the sandbox see, in discovery (precedence) order."""
        return [name for name in self._specs if self.policy.check_server(name).allowed]

    def require_server(self, server: str, *, forms: bool = False) -> ServerSpec:
        """The spec of the visible server ``server`` names (also by its Python forms, with
        ``forms``); raises :class:`UnknownServer` or :class:`PolicyDenied`."""
        return self._specs[resolve_server(self.policy, server, self._specs, forms=forms)]

    def check_call(self, server: str, tool: str) -> ServerSpec:
        """Refuse a call to an unknown/denied server or a denied tool, without any I/O.

        Whether the tool exists is decided against the server's live list
        (:func:`resolve_tool`), which may have changed since the catalog saw it.
        """
        spec = self.require_server(server)
        if len(tool) > MAX_NAME_CHARS:
            raise UnknownTool(server, tool, ())
        self.policy.enforce(server, tool)
        return spec

    async def set_tools(
        self, server: str, tools: Sequence[Tool | ToolDoc], *, description: str | None = None
    ) -> None:
        """Record a server's current tool list (after a listing or ``tools/list_changed``) and
        persist it in the cache."""
        spec = self._specs.get(server)
        if spec is None:
            raise UnknownServer(server, self._specs)
        docs = tuple(await anyio.to_thread.run_sync(_valid_docs, server, tools))
        self._remember(server, docs, description)
        self._listed.add(server)
        if self._cache is not None:
            await anyio.to_thread.run_sync(
                self._cache.store, spec, docs, self._descriptions.get(server, "")
            )

    def _remember(self, server: str, docs: tuple[ToolDoc, ...], description: str | None) -> None:
        self._tools[server] = docs
        self._observed.forget(server, keep={d.name for d in docs if d.output_schema is None})
        if description:
            self._descriptions[server] = description
        self._generation += 1

    def forget(self, server: str) -> None:
        """Drop the in-memory list of a server (the next lookup reloads it)."""
        if self._tools.pop(server, None) is not None:
            self._generation += 1
        self._cache_tried.discard(server)
        self._listed.discard(server)

    async def _from_cache(self, server: str) -> bool:
        if server in self._tools:
            return True
        if self._cache is None or server in self._cache_tried:
            return False
        self._cache_tried.add(server)
        cached = await anyio.to_thread.run_sync(self._cache.load, self._specs[server])
        if cached is None:
            return False
        self._remember(server, cached.tools, cached.description)
        return True

    async def _ensure(self, server: str) -> tuple[ToolDoc, ...]:
        lock = self._locks.setdefault(server, anyio.Lock())
        async with lock:  # one listing per server at a time, however many requests wait on it
            if await self._from_cache(server):
                return self._tools[server]
            if self._list_tools is None:
                raise CallFailed(
                    ErrorCode.UPSTREAM_UNAVAILABLE,
                    f"the tool list of server {server!r} is not known and cannot be fetched",
                )
            await self.set_tools(server, await self._list_tools(server))
            return self._tools[server]

    async def known_tools(self, server: str) -> list[ToolDoc]:
        """The server's tools the policy allows as far as they are known without starting it
        (memory, then the persisted cache); ``[]`` when unknown or the server is denied."""
        if not self.policy.check_server(server).allowed or not await self._from_cache(server):
            return []
        return [d for d in self._tools[server] if self.policy.check(server, d.name).allowed]

    async def tools(self, server: str) -> list[ToolDoc]:
        """The server's tools the policy allows, loading its list if needed."""
        self.require_server(server)
        docs = await self._ensure(server)
        return [d for d in docs if self.policy.check(server, d.name).allowed]

    async def tool(self, server: str, name: str) -> ToolDoc:
        """One allowed tool, named exactly or by its Python form (``get_user_info``); raises
        :class:`UnknownTool` (with the closest names) or :class:`PolicyDenied`."""
        self.require_server(server)
        if len(name) > MAX_NAME_CHARS:  # decided without loading the list
            raise UnknownTool(server, name, ())
        docs = {d.name: d for d in await self._ensure(server)}
        try:
            return docs[resolve_tool(self.policy, server, name, list(docs), forms=True)]
        except UnknownTool:
            if server in self._listed or self._list_tools is None:
                raise
        # A list from the cache of an earlier start may lack a tool the server has now (it was
        # updated since): the server's own list decides, once.
        async with self._locks.setdefault(server, anyio.Lock()):
            if server not in self._listed:
                listed = await self._list_tools(server)
                if server not in self._listed:  # a start announces its list itself
                    await self.set_tools(server, listed)
        docs = {d.name: d for d in self._tools[server]}
        return docs[resolve_tool(self.policy, server, name, list(docs), forms=True)]

    # -- result shapes ------------------------------------------------------------------------

    def observe_result(self, server: str, tool: str, result: Mapping[str, Any]) -> None:
        """Merge the keys and types of a successful call's result (camelCase
        ``CallToolResult``, as the sandbox gets it) into the tool's observed shape, when the tool
        declares no ``outputSchema`` and the result is an object (:func:`observable_value`).
        Cheap and bounded whatever the result (:mod:`bridge_core.catalog._observed`)."""
        docs = self._tools.get(server)
        doc = next((d for d in docs if d.name == tool), None) if docs is not None else None
        if doc is None or doc.output_schema is not None:
            return  # a declared schema says more; an unlisted tool has nowhere to be shown
        value = observable_value(result)
        if value is not None:
            self._observed.record(server, tool, *value)

    def _observed_for(self, doc: ToolDoc) -> Observed | None:
        return None if doc.output_schema is not None else self._observed.get(doc.server, doc.name)

    async def result_shape(self, server: str, tool: str) -> ResultShape | None:
        """The schema of the tool's results and whether it is declared (its ``outputSchema``)
        or observed (an observed schema's ``description`` says from how many results); None
        when neither is known. Names resolve as in :meth:`tool` (Python forms too), which
        raises for an unknown or denied server or tool."""
        doc = await self.tool(self.require_server(server, forms=True).name, tool)
        if doc.output_schema is not None:
            return doc.output_schema, "declared"
        observed = self._observed.get(doc.server, doc.name)
        return None if observed is None else (observed.schema, "observed")

    # -- the sandbox's requests ---------------------------------------------------------------

    async def discovered_servers(self, *, detailed: bool = False) -> list[JSONValue]:
        """Names of the visible servers, or dicts with description, tool count and source.

        Never starts a server: the tool count comes from memory or the cache, else it is None.
        """
        names = self.visible_servers()
        if not detailed:
            return list(names)
        result: list[JSONValue] = []
        for name in names:
            spec = self._specs[name]
            count: int | None = None
            if await self._from_cache(name):
                count = sum(1 for d in self._tools[name] if self.policy.check(name, d.name).allowed)
            description = spec.description or self._descriptions.get(name, "")
            result.append(
                {
                    "name": name,
                    "description": description,
                    "tool_count": count,
                    "source": spec.source,
                }
            )
        return result

    async def list_tools(self, server: str) -> list[str]:
        """Names of the server's allowed tools (``server`` may be a Python form of its name)."""
        return [d.name for d in await self.tools(self.require_server(server, forms=True).name)]

    async def query_tool_docs(
        self, server: str, tool: str | None = None, detail: Detail = "summary"
    ) -> dict[str, Any]:
        """``{"server", "tools": [...]}``: ``summary`` (name, description), ``full`` (+ input and
        output schema, or an ``observedOutputSchema`` for a tool that declares none) or ``stub``
        (+ a typed Python signature with docstring and its result's ``TypedDict``)."""
        server = self.require_server(server, forms=True).name
        docs = [await self.tool(server, tool)] if tool is not None else await self.tools(server)
        rendered: list[dict[str, Any]] = []
        for doc in docs:
            if detail == "full":
                full = doc.full()
                if (observed := self._observed_for(doc)) is not None:
                    full["observedOutputSchema"] = observed.schema
                rendered.append(full)
            elif detail == "stub":
                stub = render_stub(doc, self._observed_for(doc))
                rendered.append({**doc.summary(), "stub": stub})
            else:
                rendered.append(doc.summary())
        return {"server": server, "tools": rendered}

    async def _load_quietly(self, server: str) -> None:
        try:
            await self._ensure(server)
        except (BridgeError, CallFailed) as exc:
            # One broken upstream must not break search over the others (the failure is the
            # proxy's to report on a direct call, with this same message).
            logger.warning("search skips server %r: %s", server, exc)
        except Exception:
            logger.warning(
                "search skips server %r: its tool list is unavailable", server, exc_info=True
            )

    async def _current_index(self, visible: list[str]) -> ToolIndex:
        """The index over the visible servers' lists, rebuilt in a worker thread if one changed."""
        async with self._index_lock:  # one build at a time; waiting searches share its result
            generation = self._generation
            if self._index is None or self._index[0] != generation:
                lists = {s: self._tools[s] for s in visible if s in self._tools}
                index = await anyio.to_thread.run_sync(self._build_index, lists)
                self._index = (generation, index)
            return self._index[1]

    def _build_index(self, lists: dict[str, tuple[ToolDoc, ...]]) -> ToolIndex:
        docs = [
            d for s, docs in lists.items() for d in docs if self.policy.check(s, d.name).allowed
        ]
        return ToolIndex(docs, threshold=self._threshold)

    async def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Ranked hits across every visible server, loading missing tool lists concurrently."""
        visible = self.visible_servers()
        missing = [s for s in visible if s not in self._tools]
        if missing:
            async with anyio.create_task_group() as group:
                for server in missing:
                    group.start_soon(self._load_quietly, server)
        index = await self._current_index(visible)
        return await anyio.to_thread.run_sync(index.search, query, limit)

    async def search_tool_docs(self, query: str, limit: int = 5) -> list[JSONValue]:
        """:meth:`search` as ``[{"server", "tool", "description", "score"}, ...]``."""
        return [cast(JSONValue, hit.to_json()) for hit in await self.search(query, limit)]

    async def handle_request(self, method: str, params: Mapping[str, Any]) -> JSONValue:
        """Validate a sandbox request's params and answer it (the gateway's ``request``)."""
        if method == "discovered_servers":
            return await self.discovered_servers(detailed=_param(params, "detailed", bool, False))
        if method == "list_tools":
            return cast(JSONValue, await self.list_tools(_param(params, "server", str)))
        if method == "query_tool_docs":
            detail = _param(params, "detail", str, "summary")
            if detail not in get_args(Detail):
                raise _invalid(f"detail must be one of summary, full, stub; got {detail!r}")
            docs = await self.query_tool_docs(
                _param(params, "server", str),
                _param(params, "tool", str, None),
                cast(Detail, detail),
            )
            return cast(JSONValue, docs)
        if method == "search_tool_docs":
            limit = _param(params, "limit", int, 5)
            if not 1 <= limit <= MAX_SEARCH_LIMIT:
                raise _invalid(f"limit must be between 1 and {MAX_SEARCH_LIMIT}, got {limit}")
            query = _param(params, "query", str)
            if len(query) > MAX_QUERY_CHARS:
                raise _invalid(f"query is longer than {MAX_QUERY_CHARS} characters")
            return await self.search_tool_docs(query, limit)
        # The method comes from sandbox code: only its head is quoted back.
        raise CallFailed(ErrorCode.UNKNOWN_METHOD, f"unknown request method {method[:100]!r}")


def _valid_docs(server: str, tools: Sequence[Tool | ToolDoc]) -> list[ToolDoc]:
    """Docs of the usable tools: a nameless tool or a repeated name is logged and skipped."""
    docs: dict[str, ToolDoc] = {}
    for tool in tools:
        try:
            doc = tool if isinstance(tool, ToolDoc) else ToolDoc.from_tool(server, tool)
        except ValueError as exc:
            logger.warning("server %r lists an unusable tool: %s", server, exc)
            continue
        if doc.name in docs:
            logger.warning("server %r lists tool %r twice; keeping the first", server, doc.name)
            continue
        docs[doc.name] = doc
    return list(docs.values())


_REQUIRED: Any = object()


def _invalid(message: str) -> CatalogError:
    return CatalogError(ErrorCode.INVALID_ARGUMENTS, message, [])


def _param(params: Mapping[str, Any], name: str, kind: type, default: Any = _REQUIRED) -> Any:
    value = params.get(name, default)
    if value is _REQUIRED:
        raise _invalid(f"missing parameter {name!r}")
    if value is default and default is None:
        return None
    # bool is an int: a limit of True is a mistake, not 1.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _invalid(f"parameter {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value

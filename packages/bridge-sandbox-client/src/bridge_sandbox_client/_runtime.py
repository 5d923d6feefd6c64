"""``mcp.runtime``: discovery, docs and search helpers, progress and images.

Every helper that asks the host is awaitable and has a ``*_sync`` twin for plain code.
``discovered_servers()`` is special: the reference examples use it both with and without
``await``, so it answers synchronously with a list that is also awaitable.
"""

from __future__ import annotations

import math
import threading
import time
import types
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

from bridge_protocol import Progress

from bridge_sandbox_client._calls import CallRegistry
from bridge_sandbox_client._display import Displayer
from bridge_sandbox_client._proxies import Directory

if TYPE_CHECKING:
    from bridge_sandbox_client._pending import PendingCall

__all__ = ["PROGRESS_BURST", "PROGRESS_RATE", "AwaitableList", "Runtime", "build_runtime_module"]

_DETAILS = ("summary", "full", "stub")
PROGRESS_BURST = 20
PROGRESS_RATE = 20.0
"""Progress frames per second once a burst of :data:`PROGRESS_BURST` is spent: a loop reporting
every item must not flood the host (clients show a handful of updates per second), while a few
steps all arrive. Updates over the limit are superseded by later ones; the latest always arrives."""


class AwaitableList(list[Any]):
    """A list that ``await`` also accepts (evaluates to itself)."""

    def __await__(self) -> Generator[Any, None, AwaitableList]:
        yield from ()  # nothing to wait for: the answer is already here
        return self


class Runtime:
    """The helpers behind ``mcp.runtime`` (bound to one client)."""

    def __init__(
        self,
        directory: Directory,
        displayer: Displayer,
        send_progress: Callable[[Progress], None],
        execution_id: Callable[[], str],
        fork: Callable[[str], PendingCall] | None = None,
    ) -> None:
        self._fork = fork
        self._directory = directory
        self._registry = directory.registry
        self._displayer = displayer
        self._send_progress = send_progress
        self._progress_lock = threading.Lock()
        self._progress_tokens = float(PROGRESS_BURST)
        self._progress_refilled_at = time.monotonic()
        self._progress_held: Progress | None = None
        self._execution_id = execution_id

    # --- discovery ---------------------------------------------------------------------------

    def discovered_servers(self, detailed: bool = False) -> AwaitableList:
        """Names of the MCP servers you can call (``detailed=True``: dicts with ``name``,
        ``description``, ``tool_count``, ``source``). Works with or without ``await``."""
        value = CallRegistry.wait_sync(
            self._registry.request("discovered_servers", {"detailed": bool(detailed)})
        )
        servers = value if isinstance(value, list) else []
        if not detailed:
            self._directory.remember_servers([s for s in servers if isinstance(s, str)])
        return AwaitableList(servers)

    def discovered_servers_sync(self, detailed: bool = False) -> list[Any]:
        """Same as :meth:`discovered_servers`, as a plain list."""
        return list(self.discovered_servers(detailed))

    async def list_tools(self, server: str) -> list[str]:
        """Names of the tools of ``server``."""
        return _names(await CallRegistry.wait(self._list_tools(server)))

    def list_tools_sync(self, server: str) -> list[str]:
        """Blocking twin of :meth:`list_tools`."""
        return _names(CallRegistry.wait_sync(self._list_tools(server)))

    def _list_tools(self, server: str) -> Any:
        return self._registry.request("list_tools", {"server": _text("server", server)})

    async def query_tool_docs(
        self, server: str, tool: str | None = None, detail: str = "summary"
    ) -> Any:
        """Documentation of the tools of ``server`` (or of one ``tool``):
        ``{"server": ..., "tools": [{"name", "description", ...}]}``. ``detail`` is
        ``"summary"``, ``"full"`` (with input schemas) or ``"stub"``."""
        return await CallRegistry.wait(self._query(server, tool, detail))

    def query_tool_docs_sync(
        self, server: str, tool: str | None = None, detail: str = "summary"
    ) -> Any:
        """Blocking twin of :meth:`query_tool_docs`."""
        return CallRegistry.wait_sync(self._query(server, tool, detail))

    def _query(self, server: str, tool: str | None, detail: str) -> Any:
        if detail not in _DETAILS:
            raise ValueError(f"detail must be one of {', '.join(_DETAILS)}, not {detail!r}")
        params: dict[str, Any] = {
            "server": _text("server", server),
            "tool": None if tool is None else _text("tool", tool),
            "detail": detail,
        }
        return self._registry.request("query_tool_docs", params)

    async def search_tool_docs(self, query: str, limit: int = 5) -> Any:
        """Fuzzy search across every server's tools: a ranked list of
        ``{"server", "tool", "description", "score"}``."""
        return await CallRegistry.wait(self._search(query, limit))

    def search_tool_docs_sync(self, query: str, limit: int = 5) -> Any:
        """Blocking twin of :meth:`search_tool_docs`."""
        return CallRegistry.wait_sync(self._search(query, limit))

    def _search(self, query: str, limit: int) -> Any:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, not {limit!r}")
        return self._registry.request(
            "search_tool_docs", {"query": _text("query", query), "limit": limit}
        )

    # --- resources and prompts of upstream servers ---------------------------------------------

    async def list_resources(self, server: str) -> Any:
        """Resources ``server`` offers: a list of ``{"uri", "name", "description", "mimeType"}``
        dicts (as the server sent them)."""
        return await CallRegistry.wait(self._upstream("list_resources", server))

    def list_resources_sync(self, server: str) -> Any:
        """Blocking twin of :meth:`list_resources`."""
        return CallRegistry.wait_sync(self._upstream("list_resources", server))

    async def read_resource(self, server: str, uri: str) -> Any:
        """Read one resource of ``server``: ``{"contents": [{"uri", "mimeType", "text" or
        "blob"}]}`` as the server sent it."""
        return await CallRegistry.wait(self._upstream("read_resource", server, uri=uri))

    def read_resource_sync(self, server: str, uri: str) -> Any:
        """Blocking twin of :meth:`read_resource`."""
        return CallRegistry.wait_sync(self._upstream("read_resource", server, uri=uri))

    async def list_prompts(self, server: str) -> Any:
        """Prompts ``server`` offers: a list of ``{"name", "description", "arguments"}``."""
        return await CallRegistry.wait(self._upstream("list_prompts", server))

    def list_prompts_sync(self, server: str) -> Any:
        """Blocking twin of :meth:`list_prompts`."""
        return CallRegistry.wait_sync(self._upstream("list_prompts", server))

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> Any:
        """One prompt of ``server``, filled with ``arguments`` (strings):
        ``{"description", "messages": [{"role", "content"}]}``."""
        return await CallRegistry.wait(
            self._upstream("get_prompt", server, name=name, arguments=arguments or {})
        )

    def get_prompt_sync(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> Any:
        """Blocking twin of :meth:`get_prompt`."""
        return CallRegistry.wait_sync(
            self._upstream("get_prompt", server, name=name, arguments=arguments or {})
        )

    def _upstream(self, method: str, server: str, **params: Any) -> Any:
        for key in ("uri", "name"):
            if key in params:
                params[key] = _text(key, params[key])
        return self._registry.request(method, {"server": _text("server", server), **params})

    # --- sessions ------------------------------------------------------------------------------

    async def fork_session(self, name: str) -> str:
        """Copy this session, as it is at this moment, into a new session ``name``; return it.

        The copy holds the namespace and ``/tmp`` files as they are now (what this execution has
        done so far included); run code in it with ``run_python(session=name)``. This session
        is untouched. Raises :class:`~mcp.InvalidArguments` if ``name`` is not a valid session
        name or is already taken (a fork never replaces a session), and :class:`~mcp.ToolError`
        if the copy could not be saved (sessions are not saved on this bridge, or a size limit).
        """
        return _forked(await CallRegistry.wait(self._start_fork(name)))

    def fork_session_sync(self, name: str) -> str:
        """Blocking twin of :meth:`fork_session`."""
        return _forked(CallRegistry.wait_sync(self._start_fork(name)))

    def _start_fork(self, name: str) -> PendingCall:
        if self._fork is None:
            raise RuntimeError("this runtime cannot fork its session")
        return self._fork(_text("name", name))

    # --- progress and images -------------------------------------------------------------------

    def progress(self, done: float, total: float | None = None, message: object = None) -> None:
        """Report progress of the running code to the client (e.g. ``progress(3, 10, "rows")``)."""
        numbers = {"done": done} if total is None else {"done": done, "total": total}
        for name, number in numbers.items():
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise TypeError(f"{name} must be a number, not {type(number).__name__}")
            if not math.isfinite(number):
                raise ValueError(f"{name} must be finite, not {number!r}")
        text = None if message is None else str(message)
        update = Progress(
            execution_id=self._execution_id(),
            progress=float(done),
            total=None if total is None else float(total),
            message=text,
        )
        now = time.monotonic()
        with self._progress_lock:
            elapsed = now - self._progress_refilled_at
            self._progress_tokens = min(
                PROGRESS_BURST, self._progress_tokens + elapsed * PROGRESS_RATE
            )
            self._progress_refilled_at = now
            finished = total is not None and done >= total
            if not finished:
                if self._progress_tokens < 1:
                    self._progress_held = update  # sent by a later call or flush_progress
                    return
                self._progress_tokens -= 1
            self._progress_held = None
        self._send_progress(update)

    def flush_progress(self) -> None:
        """Send the latest progress update held back by the rate limit (at execution end)."""
        with self._progress_lock:
            held, self._progress_held = self._progress_held, None
        if held is not None:
            self._send_progress(held)

    def display_image(self, data_or_path: Any, mime: str | None = None) -> None:
        """Show an image to the client: PNG/JPEG bytes, a file path, a tool ``Image`` result or a
        matplotlib figure; ``mime`` overrides the detected type."""
        self._displayer.display_image(data_or_path, mime)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def _forked(value: Any) -> str:
    session = value.get("session") if isinstance(value, dict) else None
    if not isinstance(session, str):
        raise ValueError("the bridge did not say which session the fork is")
    return session


def _names(value: Any) -> list[str]:
    return [n for n in value if isinstance(n, str)] if isinstance(value, list) else []


_EXPORTED = (
    "discovered_servers",
    "discovered_servers_sync",
    "list_tools",
    "list_tools_sync",
    "query_tool_docs",
    "query_tool_docs_sync",
    "search_tool_docs",
    "search_tool_docs_sync",
    "list_resources",
    "list_resources_sync",
    "read_resource",
    "read_resource_sync",
    "list_prompts",
    "list_prompts_sync",
    "get_prompt",
    "get_prompt_sync",
    "fork_session",
    "fork_session_sync",
    "progress",
    "display_image",
)


class Helpers(Protocol):
    """More helpers of ``mcp.runtime`` (workflows, checkpoints): the names in ``EXPORTED``."""

    EXPORTED: tuple[str, ...]


def build_runtime_module(runtime: Runtime, *more: Helpers) -> types.ModuleType:
    """The ``mcp.runtime`` module: the runtime's helpers (and ``more``'s) as module functions."""
    module = types.ModuleType("mcp.runtime", "Discovery, docs and search of MCP tools; progress.")
    exported: list[str] = []
    for helpers, names in ((runtime, _EXPORTED), *((h, h.EXPORTED) for h in more)):
        for name in names:
            setattr(module, name, getattr(helpers, name))
            exported.append(name)
    vars(module)["__all__"] = exported
    return module

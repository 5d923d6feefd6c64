"""Servers and tools as Python objects: ``mcp_servers["x"].tool(...)`` and friends.

A server is a module object (:class:`ServerModule`) so the very same object serves
``mcp_servers["github"]``, ``from mcp import mcp_github``, ``import mcp_github`` and
``from mcp.servers.github import create_issue``. Server and tool names come from one request each
(``discovered_servers``, then ``list_tools`` per server), cached, and are matched here, exactly or
by their Python form (``get_user_info`` for ``get-user.info``).

A name this sandbox was not shown is not judged here: one lookup (a ``query_tool_docs`` request
naming it) lets the host decide, with the same code that answers calls. Its answer is the
canonical name, or a fault: ``PolicyDenied`` naming the rule and the setting, or
``UnknownServer`` / ``UnknownTool`` with the host's did-you-mean.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, NoReturn

from bridge_protocol.names import alias_for, identifier_for, python_forms

from bridge_sandbox_client._calls import CallRegistry
from bridge_sandbox_client._values import encode_arguments, unwrap_result
from bridge_sandbox_client.errors import PolicyDenied, ToolError

__all__ = ["Directory", "RefusedServer", "ServerModule", "ServersMapping", "Tool"]

_LOOKUP = "query_tool_docs"
"""The request that asks the host about one name: it answers with the canonical server (and
tool) name, or with the fault a call would get."""


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _known(name: str, names: list[str], *, server: bool) -> str | None:
    if name in names:
        return name
    for candidate in names:
        if name in python_forms(candidate, server=server):
            return candidate
    return None


def _ask_host(registry: CallRegistry, server: str, tool: str | None) -> dict[str, Any]:
    answer = CallRegistry.wait_sync(
        registry.request(_LOOKUP, {"server": server, "tool": tool, "detail": "summary"})
    )
    if not isinstance(answer, dict):
        raise ToolError(f"the host answered a lookup with {type(answer).__name__}", server=server)
    return answer


class Directory:
    """What servers exist, fetched from the host and cached for this sandbox."""

    def __init__(self, registry: CallRegistry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._servers: list[str] | None = None
        self._modules: dict[str, ServerModule] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_live_directory, ())

    def remember_servers(self, names: list[str]) -> None:
        """Update the cache from a ``discovered_servers`` answer obtained elsewhere."""
        with self._lock:
            self._servers = list(names)

    def server_names(self, *, refresh: bool = False) -> list[str]:
        """Names of the configured servers (cached; ``refresh`` asks the host again)."""
        with self._lock:
            cached = self._servers
        if cached is not None and not refresh:
            return cached
        value = CallRegistry.wait_sync(self.registry.request("discovered_servers", {}))
        names = [n for n in value if isinstance(n, str)] if isinstance(value, list) else []
        self.remember_servers(names)
        return names

    def resolve(self, name: str) -> str | None:
        """The listed server called ``name`` (or whose identifier or alias it is), else None;
        never asks the host to judge (``in mcp_servers`` is about what is listed)."""
        for refresh in (False, True):
            found = _known(name, self.server_names(refresh=refresh), server=True)
            if found is not None:
                return found
        return None

    def lookup(self, name: str) -> str:
        """The server ``name`` means. One this sandbox was not shown is judged by the host:
        raises :class:`UnknownServer` (with the host's suggestions) or :class:`PolicyDenied`."""
        found = _known(name, self.server_names(), server=True)
        if found is not None:
            return found
        server = _ask_host(self.registry, name, None).get("server")
        if not isinstance(server, str):
            raise ToolError(f"the host's answer about server {name!r} names none", server=name)
        self.server_names(refresh=True)  # the host knows a server the cached list lacks
        return server

    def server(self, name: str) -> ServerModule:
        """The module object of server ``name`` (see :meth:`lookup` for the errors)."""
        return self.module(self.lookup(name))

    def module(self, server: str) -> ServerModule:
        """The module object of the server named exactly ``server`` (no lookup: using a server
        that is gone fails as a call)."""
        with self._lock:
            module = self._modules.get(server)
            if module is None:
                module = self._modules[server] = ServerModule(server, self)
        return module


class Tool:
    """One tool of one server. Calling it returns an awaitable; ``.sync(...)`` blocks instead.

    Arguments are keywords (or one positional dict); ``raw=True`` returns the full
    ``CallToolResult`` dict instead of the unwrapped value.
    """

    def __init__(self, server: str, name: str, registry: CallRegistry) -> None:
        self.server = server
        self.name = name
        self._registry = registry
        self.__name__ = identifier_for(name)
        self.__qualname__ = f"{alias_for(server)}.{self.__name__}"
        self.__doc__ = f"MCP tool {name!r} of server {server!r}."

    def __reduce__(self) -> tuple[Any, ...]:
        return (_live_tool, (self.server, self.name))

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > 1 or (args and not isinstance(args[0], Mapping)):
            raise TypeError(
                f"{self.server}.{self.name}() takes keyword arguments (or one dict of them), "
                f"not {len(args)} positional argument(s)"
            )
        merged: dict[str, Any] = dict(args[0]) if args else {}
        merged.update(kwargs)
        return encode_arguments(merged)

    def __call__(self, *args: Any, raw: bool = False, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        # A plain function, not ``async def``: bad arguments raise here, at the call site.
        arguments = self._arguments(args, kwargs)
        call = self._call(arguments, raw)
        # Named after the tool, so a forgotten ``await`` is reported as
        # "coroutine 'github.create_issue' was never awaited".
        if isinstance(call, types.CoroutineType):
            call.__name__ = self.__name__
            call.__qualname__ = f"{self.server}.{self.name}"
        return call

    async def _call(self, arguments: dict[str, Any], raw: bool) -> Any:
        result = await CallRegistry.wait(self._registry.call(self.server, self.name, arguments))
        return result if raw else unwrap_result(result, server=self.server, tool=self.name)

    def sync(self, *args: Any, raw: bool = False, **kwargs: Any) -> Any:
        """Call the tool and block until it answers (for code that does not use await)."""
        arguments = self._arguments(args, kwargs)
        result = CallRegistry.wait_sync(self._registry.call(self.server, self.name, arguments))
        return result if raw else unwrap_result(result, server=self.server, tool=self.name)

    def __repr__(self) -> str:
        return f"<MCP tool {self.name!r} of server {self.server!r}>"


class ServerModule(types.ModuleType):
    """An MCP server: its tools are attributes (``.create_issue``) and items (``["get-user"]``).

    A package (empty ``__path__``): ``from mcp.servers.x import name`` then asks the import hook
    about a name the server lacks, and the import fails with the host's answer.
    """

    def __init__(self, server: str, directory: Directory) -> None:
        super().__init__(f"mcp.servers.{identifier_for(server)}", f"MCP server {server!r}.")
        self.__path__: list[str] = []
        self._server = server
        self._directory = directory
        self._tool_names: list[str] | None = None
        self._tools: dict[str, Tool] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_live_server, (self._server,))

    def _names(self) -> list[str]:
        names = self._tool_names
        if names is None:
            value = CallRegistry.wait_sync(
                self._directory.registry.request("list_tools", {"server": self._server})
            )
            names = [n for n in value if isinstance(n, str)] if isinstance(value, list) else []
            self._tool_names = names
        return names

    def _lookup(self, name: str) -> Tool:
        """The tool ``name`` means; one this sandbox was not shown is judged by the host:
        raises :class:`UnknownTool` (with the host's suggestions) or :class:`PolicyDenied`."""
        tool = _known(name, self._names(), server=False)
        if tool is None:
            tools = _ask_host(self._directory.registry, self._server, name).get("tools")
            first = tools[0] if isinstance(tools, list) and tools else None
            tool = first.get("name") if isinstance(first, dict) else None
            if not isinstance(tool, str):
                raise ToolError(
                    f"the host's answer about tool {name!r} names none", server=self._server
                )
            self._tool_names = None  # the host knows a tool the cached list lacks
        found = self._tools.get(tool)
        if found is None:
            found = self._tools[tool] = Tool(self._server, tool, self._directory.registry)
        return found

    def __getattr__(self, name: str) -> Tool:
        if _is_dunder(name):
            # importlib, pickle, IPython-style probes: never a round trip for these.
            raise AttributeError(name)
        return self._lookup(name)

    def __getitem__(self, name: str) -> Tool:
        if not isinstance(name, str):
            raise KeyError(name)
        return self._lookup(name)

    def __dir__(self) -> list[str]:
        return sorted({identifier_for(n) for n in self._names()} | set(super().__dir__()))

    def __repr__(self) -> str:
        return f"<MCP server {self._server!r}>"


class RefusedServer:
    """What a bare ``mcp_<alias>`` naming a denied server is bound to, so that using it raises
    the host's :class:`PolicyDenied` (the rule, the setting) where it is used, instead of a
    ``NameError`` that hides why."""

    def __init__(self, alias: str, refusal: PolicyDenied) -> None:
        self._alias = alias
        self._refusal = refusal

    def _refuse(self) -> NoReturn:
        refusal = self._refusal  # a fresh exception each time: tracebacks must not pile up
        raise PolicyDenied(
            refusal.message, code=refusal.code, server=refusal.server, data=refusal.data
        )

    def __getattr__(self, name: str) -> Any:
        if _is_dunder(name):
            raise AttributeError(name)
        self._refuse()

    def __getitem__(self, name: str) -> Any:
        self._refuse()

    def __repr__(self) -> str:
        return f"<MCP server {self._alias} refused: {self._refusal.message}>"


class ServersMapping(Mapping[str, ServerModule]):
    """``mcp_servers``: every configured server by name (``mcp_servers["github"]``)."""

    def __init__(self, directory: Directory) -> None:
        self._directory = directory

    def __reduce__(self) -> tuple[Any, ...]:
        return (_live_servers, ())

    def __getitem__(self, name: str) -> ServerModule:
        if not isinstance(name, str):
            raise KeyError(name)
        return self._directory.server(name)

    def __getattr__(self, name: str) -> ServerModule:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._directory.server(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._directory.server_names(refresh=True))

    def __len__(self) -> int:
        return len(self._directory.server_names(refresh=True))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._directory.resolve(name) is not None

    def __repr__(self) -> str:
        return f"mcp_servers({self._directory.server_names(refresh=True)!r})"


# A saved session holds references to these objects where its functions and values name them (a
# function that calls ``mcp_servers[...]`` is saved with its globals): they are saved as what
# they are and loaded as the running sandbox's own, never by value (they hold its channel).


def _live_servers() -> ServersMapping:
    """The running sandbox's ``mcp_servers``."""
    servers: ServersMapping = sys.modules["mcp"].mcp_servers
    return servers


def _live_directory() -> Directory:
    return _live_servers()._directory


def _live_server(server: str) -> ServerModule:
    return _live_directory().module(server)


def _live_tool(server: str, name: str) -> Tool:
    return Tool(server, name, _live_directory().registry)

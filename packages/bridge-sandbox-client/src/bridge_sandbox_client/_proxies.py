"""Servers and tools as Python objects: ``mcp_servers["x"].tool(...)`` and friends.

A server is a module object (:class:`ServerModule`) so the very same object serves
``mcp_servers["github"]``, ``from mcp import mcp_github``, ``import mcp_github`` and
``from mcp.servers.github import create_issue``. Tool names come from one ``list_tools`` request
per server, cached, so an unknown attribute fails with suggestions before any call is sent.
"""

from __future__ import annotations

import difflib
import re
import threading
import types
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any

from bridge_sandbox_client._calls import CallRegistry
from bridge_sandbox_client._values import encode_arguments, unwrap_result

__all__ = ["Directory", "ServerModule", "ServersMapping", "Tool", "alias_for", "identifier_for"]

_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]")


def identifier_for(name: str) -> str:
    """A Python identifier for a tool or server name: ``get-user.info`` → ``get_user_info``."""
    ident = _NOT_IDENTIFIER.sub("_", name)
    return f"_{ident}" if not ident or ident[0].isdigit() else ident


def alias_for(server: str) -> str:
    """The module alias of a server: ``my-server`` → ``mcp_my_server``."""
    return "mcp_" + _NOT_IDENTIFIER.sub("_", server)


def _close_matches(name: str, candidates: list[str]) -> str:
    matches = difflib.get_close_matches(name, candidates, n=5, cutoff=0.5)
    return f" Did you mean: {', '.join(matches)}?" if matches else ""


class Directory:
    """What servers and tools exist, fetched from the host and cached for this sandbox."""

    def __init__(self, registry: CallRegistry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._servers: list[str] | None = None
        self._modules: dict[str, ServerModule] = {}

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
        """The server called ``name``, or whose identifier or alias is ``name``."""
        for refresh in (False, True):
            names = self.server_names(refresh=refresh)
            if name in names:
                return name
            for candidate in names:
                if name in (identifier_for(candidate), alias_for(candidate)):
                    return candidate
        return None

    def server(self, name: str) -> ServerModule:
        """The module object of server ``name`` (KeyError listing the known servers)."""
        resolved = self.resolve(name)
        if resolved is None:
            known = self.server_names()
            raise KeyError(
                f"no MCP server named {name!r}; configured servers: "
                f"{', '.join(known) if known else 'none'}.{_close_matches(name, known)}"
            )
        with self._lock:
            module = self._modules.get(resolved)
            if module is None:
                module = self._modules[resolved] = ServerModule(resolved, self)
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
    """An MCP server: its tools are attributes (``.create_issue``) and items (``["get-user"]``)."""

    def __init__(self, server: str, directory: Directory) -> None:
        super().__init__(f"mcp.servers.{identifier_for(server)}", f"MCP server {server!r}.")
        self._server = server
        self._directory = directory
        self._tool_names: list[str] | None = None
        self._tools: dict[str, Tool] = {}

    def _names(self, *, refresh: bool = False) -> list[str]:
        names = self._tool_names
        if names is None or refresh:
            value = CallRegistry.wait_sync(
                self._directory.registry.request("list_tools", {"server": self._server})
            )
            names = [n for n in value if isinstance(n, str)] if isinstance(value, list) else []
            self._tool_names = names
        return names

    def _find(self, name: str) -> str | None:
        for refresh in (False, True):
            names = self._names(refresh=refresh)
            if name in names:
                return name
            for candidate in names:
                if identifier_for(candidate) == name:
                    return candidate
        return None

    def _tool(self, tool: str) -> Tool:
        found = self._tools.get(tool)
        if found is None:
            found = self._tools[tool] = Tool(self._server, tool, self._directory.registry)
        return found

    def _unknown(self, name: str) -> str:
        names = self._names()
        server = self._server
        candidates = names + [identifier_for(n) for n in names]
        return (
            f"MCP server {server!r} has no tool {name!r}.{_close_matches(name, candidates)} "
            f"Its tools: {', '.join(names) if names else 'none'}."
        )

    def __getattr__(self, name: str) -> Tool:
        if name.startswith("__") and name.endswith("__"):
            # importlib, pickle, IPython-style probes: never a round trip for these.
            raise AttributeError(name)
        tool = self._find(name)
        if tool is None:
            raise AttributeError(self._unknown(name))
        return self._tool(tool)

    def __getitem__(self, name: str) -> Tool:
        tool = self._find(name)
        if tool is None:
            raise KeyError(self._unknown(name))
        return self._tool(tool)

    def __dir__(self) -> list[str]:
        return sorted({identifier_for(n) for n in self._names()} | set(super().__dir__()))

    def __repr__(self) -> str:
        return f"<MCP server {self._server!r}>"


class ServersMapping(Mapping[str, ServerModule]):
    """``mcp_servers``: every configured server by name (``mcp_servers["github"]``)."""

    def __init__(self, directory: Directory) -> None:
        self._directory = directory

    def __getitem__(self, name: str) -> ServerModule:
        if not isinstance(name, str):
            raise KeyError(name)
        return self._directory.server(name)

    def __getattr__(self, name: str) -> ServerModule:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._directory.server(name)
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._directory.server_names(refresh=True))

    def __len__(self) -> int:
        return len(self._directory.server_names(refresh=True))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._directory.resolve(name) is not None

    def __repr__(self) -> str:
        return f"mcp_servers({self._directory.server_names(refresh=True)!r})"

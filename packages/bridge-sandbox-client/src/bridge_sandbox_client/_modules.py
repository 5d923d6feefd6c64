"""The ``mcp`` module user code imports, registered when the client starts.

Never installed as a static top-level package: the host's MCP SDK is also called ``mcp``. A
meta-path finder placed first answers for ``mcp``, ``mcp.runtime``, ``mcp.servers``,
``mcp.servers.<server>`` and the ``mcp_<alias>`` modules, so even an image that happens to contain
the SDK cannot shadow it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bridge_protocol.names import ALIAS_PREFIX, alias_for

from bridge_sandbox_client import errors
from bridge_sandbox_client._proxies import Directory, ServerModule, ServersMapping
from bridge_sandbox_client._values import Audio, Image

__all__ = ["McpModules", "install_mcp_modules"]

if TYPE_CHECKING:
    import importlib.machinery


_ERRORS = tuple(name for name in errors.__all__ if name != "error_from_fault")


class McpModules:
    """Finder and loader of the ``mcp`` module tree; the modules exist before any import.

    The import system asks finders and loaders for their methods only; the ``importlib.abc``
    base classes would add nothing but ``importlib.resources`` and what it imports (~9 ms of
    every sandbox's start, measured in the image).
    """

    def __init__(self, directory: Directory, runtime: types.ModuleType) -> None:
        self._directory = directory
        self.servers_mapping = ServersMapping(directory)
        self.runtime = runtime
        self.servers = types.ModuleType("mcp.servers", "Every MCP server as a module.")
        self.servers.__path__ = []
        vars(self.servers)["__getattr__"] = self._server_attribute
        self.root = types.ModuleType("mcp", "Call the MCP servers configured on the host.")
        self.root.__path__ = []
        namespace: dict[str, Any] = {
            "runtime": runtime,
            "mcp_servers": self.servers_mapping,
            "servers": self.servers,
            "Image": Image,
            "Audio": Audio,
            "__getattr__": self._alias_attribute,
        }
        namespace.update({name: getattr(errors, name) for name in _ERRORS})
        namespace["__all__"] = ["runtime", "mcp_servers", "Image", "Audio", *_ERRORS]
        vars(self.root).update(namespace)
        self._static = {"mcp": self.root, "mcp.runtime": runtime, "mcp.servers": self.servers}

    # --- attribute access on the modules --------------------------------------------------

    def _alias_attribute(self, name: str) -> Any:
        if name.startswith(ALIAS_PREFIX):
            return self._directory.server(name)  # the host judges a name it was not shown
        known = [alias_for(s) for s in self._directory.server_names()]
        raise AttributeError(
            f"module 'mcp' has no attribute {name!r}; server aliases: "
            f"{', '.join(known) if known else 'none (no MCP servers are configured)'}"
        )

    def _server_attribute(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._directory.server(name)

    # --- import protocol -------------------------------------------------------------------
    #
    # ``from X import name`` first tries ``getattr(X, name)``; when that is an AttributeError (an
    # unknown name) and X is a package, Python imports ``X.name`` as a submodule, which lands in
    # find_spec below. There the host's answer is raised as an ImportError with its message (a
    # plain None would make Python say "cannot import name" and drop the did-you-mean).

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """Answer for our names only; everything else falls through to the normal finders."""
        if fullname in self._static:
            return self._spec(fullname, is_package=fullname != "mcp.runtime")
        parent, _, name = fullname.rpartition(".")
        if parent == "mcp.servers" or (parent == "" and name.startswith(ALIAS_PREFIX)):
            return self._server_spec(fullname, name, ours=parent != "")
        if parent == "mcp" and name.startswith(ALIAS_PREFIX):
            self._unknown_submodule(lambda: self._directory.lookup(name))
            return None
        module = sys.modules.get(parent)
        if isinstance(module, ServerModule):
            self._unknown_submodule(lambda: module._lookup(name))
        return None

    def _server_spec(
        self, fullname: str, name: str, *, ours: bool
    ) -> importlib.machinery.ModuleSpec | None:
        try:
            self._directory.lookup(name)
        except errors.UnknownServer as exc:
            if not ours:
                return None  # ``import mcp_foo``: a real package of that name may exist
            raise ModuleNotFoundError(exc.message) from exc
        except errors.PolicyDenied:
            raise
        except errors.ToolError:
            return None  # the host cannot answer now (e.g. between executions)
        return self._spec(fullname, is_package=True)

    def _spec(self, fullname: str, *, is_package: bool) -> importlib.machinery.ModuleSpec | None:
        # typeshed's loader protocol still asks for the legacy load_module, which the import
        # system never calls on a loader with exec_module (its name is in typeshed only).
        loader: Any = self
        return importlib.util.spec_from_loader(fullname, loader, is_package=is_package)

    @staticmethod
    def _unknown_submodule(lookup: Callable[[], object]) -> None:
        """Raise the host's answer about a name ``from ... import`` did not find; a name that
        exists after all is not a module either (None: Python's own error)."""
        try:
            lookup()
        except (errors.UnknownServer, errors.UnknownTool) as exc:
            raise ImportError(exc.message) from exc
        except errors.PolicyDenied:
            raise
        except errors.ToolError:
            return

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        """The prebuilt module for ``spec.name``."""
        static = self._static.get(spec.name)
        if static is not None:
            return static
        return self._directory.server(spec.name.removeprefix("mcp.servers."))

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module objects are complete."""


def install_mcp_modules(directory: Directory, runtime: types.ModuleType) -> McpModules:
    """Register the ``mcp`` modules and the import hook for this process."""
    modules = McpModules(directory, runtime)
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        del sys.modules[name]  # an SDK imported by accident must not be what user code sees
    sys.modules.update(modules._static)
    sys.meta_path.insert(0, modules)
    return modules

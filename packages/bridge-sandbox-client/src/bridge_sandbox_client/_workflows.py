"""``mcp.runtime`` workflow helpers: save, find, load and delete reusable code (host-kept).

A workflow is the source of one function defined in the session. The host keeps it for the
caller's principal (it parses it with ``ast`` and never runs it); :meth:`Workflows.workflow`
fetches it and executes it here, in the sandbox, in a fresh namespace holding what every cell
gets (``runtime``, ``mcp_servers``, the ``mcp_<alias>`` names it uses), so its tool calls are
nested calls like any other: policy, approvals and audit apply on the host.

Every helper answers synchronously with a value ``await`` also accepts, as
``runtime.discovered_servers`` does: models write both forms.
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import importlib
import inspect
import linecache
import types
from collections.abc import Callable, Generator
from typing import Any

from bridge_sandbox_client._calls import CallRegistry
from bridge_sandbox_client._proxies import RefusedServer
from bridge_sandbox_client._runtime import AwaitableList
from bridge_sandbox_client._traceback import CELL_PREFIX
from bridge_sandbox_client.errors import PolicyDenied, ToolError

__all__ = ["AwaitableDict", "Workflow", "Workflows"]

WORKFLOW_PREFIX = "<workflow "
"""Filenames of loaded workflows (``<workflow report v2>``): their tracebacks show the source."""
_INJECTED = frozenset({"runtime", "mcp_servers"})


class AwaitableDict(dict[str, Any]):
    """A dict that ``await`` also accepts (evaluates to itself)."""

    def __await__(self) -> Generator[Any, None, AwaitableDict]:
        yield from ()  # nothing to wait for: the answer is already here
        return self


class Workflow:
    """A loaded workflow: call it like the function it is (``await`` the call if it is
    ``async def``). ``name``, ``version``, ``description``, ``tools`` and ``source`` say what
    it is; ``await runtime.workflow(...)`` gives the same object."""

    def __init__(self, function: Callable[..., Any], info: dict[str, Any], source: str) -> None:
        self.function = function
        self.name: str = str(info.get("name", function.__name__))
        self.version: int = int(info.get("version", 0))
        self.description: str = str(info.get("description", ""))
        tools = info.get("tools")
        self.tools: list[str] = (
            [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []
        )
        self.source = source
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __await__(self) -> Generator[Any, None, Workflow]:
        yield from ()
        return self

    def __repr__(self) -> str:
        kind = "async workflow" if inspect.iscoroutinefunction(self.function) else "workflow"
        try:
            signature = str(inspect.signature(self.function))
        except (TypeError, ValueError):
            signature = "(...)"
        return f"<{kind} {self.name} v{self.version}{signature}>"


class Workflows:
    """The workflow helpers of ``mcp.runtime`` (their names in :attr:`EXPORTED`)."""

    EXPORTED: tuple[str, ...] = (
        "save_workflow",
        "list_workflows",
        "search_workflows",
        "workflow",
        "delete_workflow",
    )

    def __init__(self, registry: CallRegistry, namespace: Callable[[], dict[str, Any]]) -> None:
        self._registry = registry
        self._namespace = namespace

    def _ask(self, method: str, params: dict[str, Any]) -> Any:
        return CallRegistry.wait_sync(self._registry.request(method, params))

    def save_workflow(
        self, fn: Callable[..., Any], name: str | None = None, description: str | None = None
    ) -> AwaitableDict:
        """Save ``fn`` (a function defined with ``def`` or ``async def`` in this session) as a
        workflow of yours; return ``{"name", "version"}``. Saving a name again makes its next
        version; older versions stay loadable by number. Works with or without ``await``."""
        source, default_name = _source_of(fn)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if description is not None and not isinstance(description, str):
            raise TypeError(f"description must be a str, not {type(description).__name__}")
        params = {
            "name": default_name if name is None else name,
            "source": source,
            "description": description,
        }
        return AwaitableDict(_mapping(self._ask("save_workflow", params)))

    def list_workflows(self) -> AwaitableList:
        """Your workflows (the latest version of each): ``{"name", "version", "versions",
        "description", "signature", "tools", "saved_at", ...}``. With or without ``await``."""
        return AwaitableList(_listed(self._ask("list_workflows", {})))

    def search_workflows(self, query: str, limit: int = 5) -> AwaitableList:
        """Your workflows ranked for ``query`` (the tool search's ranker, over name,
        description, docstring and tools used): ``{"kind": "workflow", "name", "version",
        "description", "score"}``. With or without ``await``."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, not {limit!r}")
        return AwaitableList(
            _listed(self._ask("search_workflows", {"query": query, "limit": limit}))
        )

    def workflow(self, name: str, version: int | None = None) -> Workflow:
        """Load workflow ``name`` (its latest version, or ``version``) and return it, callable
        like the function it was saved from. With or without ``await``."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise TypeError(f"version must be an int, not {type(version).__name__}")
        info = _mapping(self._ask("get_workflow", {"name": name, "version": version}))
        source, function_name = info.get("source"), info.get("function")
        if not isinstance(source, str) or not isinstance(function_name, str):
            raise ToolError(f"the bridge sent no source for workflow {name!r}")
        filename = f"{WORKFLOW_PREFIX}{info.get('name', name)} v{info.get('version', '?')}>"
        # mtime None: never evicted, so its tracebacks show their lines (like cells).
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        code = compile(source, filename, "exec", dont_inherit=True)
        namespace = _fresh_namespace(code, f"workflow_{name}")
        exec(code, namespace)
        function = namespace.get(function_name)
        if not callable(function):
            raise ToolError(f"workflow {name!r} defines no function {function_name!r}")
        return Workflow(function, info, source)

    def delete_workflow(self, name: str, version: int | None = None) -> AwaitableDict:
        """Delete workflow ``name`` (every version, or only ``version``); return ``{"name",
        "deleted": [versions]}``. With or without ``await``."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        return AwaitableDict(
            _mapping(self._ask("delete_workflow", {"name": name, "version": version}))
        )


# --- what a saved function may be ---------------------------------------------------------------


def _source_of(fn: Any) -> tuple[str, str]:
    """``(source, name)`` of a function that can be a workflow; a TypeError or ValueError that
    names what is wrong otherwise."""
    if isinstance(fn, Workflow):
        return fn.source, fn.name
    if isinstance(fn, types.MethodType):
        raise TypeError(
            "save_workflow takes a plain function, not a method: define it with def "
            "at the top level of a cell"
        )
    if isinstance(fn, types.BuiltinFunctionType | types.BuiltinMethodType):
        raise TypeError(
            f"save_workflow takes a function defined in this session, not the "
            f"built-in {getattr(fn, '__name__', fn)!r}"
        )
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"save_workflow takes a function defined with def, not {type(fn).__name__}")
    name = fn.__name__
    if name == "<lambda>":
        raise ValueError("a lambda cannot be a workflow: define it with def (it needs a name)")
    if fn.__code__.co_freevars:
        raise ValueError(
            f"{name} uses variables of the function around it "
            f"({', '.join(fn.__code__.co_freevars)}): a workflow must be defined at the top "
            "level of a cell and take what it needs as arguments"
        )
    if "." in fn.__qualname__:
        where = "inside another function" if "<locals>" in fn.__qualname__ else "in a class"
        raise ValueError(
            f"{name} is defined {where}: a workflow must be defined at the top level of a cell"
        )
    filename = fn.__code__.co_filename
    if not filename.startswith((CELL_PREFIX, WORKFLOW_PREFIX)):
        raise ValueError(
            f"{name} was not defined in this session (it comes from {filename}): "
            "only functions written in run_python code can be saved"
        )
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = ""
    if not _matches(source, fn):
        raise ValueError(
            f"the source of {name} is no longer available (it was defined before "
            "the session was restored): run its def again, then save it"
        )
    unknown = _session_names(fn)
    if unknown:
        raise ValueError(
            f"{name} uses names a workflow will not have: {', '.join(sorted(unknown))}. A "
            "workflow runs in a fresh namespace (runtime, mcp_servers and mcp_<server> only): "
            "import modules inside the function and pass values as arguments"
        )
    return source, name


def _matches(source: str, fn: types.FunctionType) -> bool:
    """Whether ``source`` is the definition of ``fn`` alone (a cell's lines may be stale after
    a restore reused its filename; a decorated function's source carries its decorators)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    node = tree.body[0]
    if node.name != fn.__name__ or node.decorator_list:
        if node.decorator_list:
            raise ValueError(f"{fn.__name__} has decorators: a workflow is a plain function")
        return False
    compiled = compile(source, "<check>", "exec", dont_inherit=True)
    for const in compiled.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == fn.__name__:
            return _shape(const) == _shape(fn.__code__)
    return False


def _shape(code: types.CodeType) -> tuple[object, ...]:
    """What two compilations of one definition share (bytecode itself may differ: the
    compiler's choices depend on the code around it)."""
    return (code.co_varnames, code.co_argcount, code.co_kwonlyargcount, frozenset(code.co_names))


def _globals_used(code: types.CodeType) -> tuple[set[str], set[str]]:
    """Global names ``code`` (and the code nested in it) reads, and those it assigns."""
    read: set[str] = set()
    stored: set[str] = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(
            instruction.argval, str
        ):
            read.add(instruction.argval)
        elif instruction.opname == "STORE_GLOBAL" and isinstance(instruction.argval, str):
            stored.add(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner_read, inner_stored = _globals_used(const)
            read |= inner_read
            stored |= inner_stored
    return read, stored


def _session_names(fn: types.FunctionType) -> set[str]:
    """Global names ``fn`` reads that a fresh workflow namespace would not have."""
    read, stored = _globals_used(fn.__code__)
    return {
        name
        for name in read - stored
        if name not in _INJECTED
        and not name.startswith("mcp_")
        and name != fn.__name__
        and not hasattr(builtins, name)
    }


# --- loading ------------------------------------------------------------------------------------


def _fresh_namespace(code: types.CodeType, module_name: str) -> dict[str, Any]:
    """What every cell gets: ``runtime``, ``mcp_servers``, and each ``mcp_<alias>`` the code
    reads (bound as a cell's are: a denied server raises its refusal where it is used)."""
    root = importlib.import_module("mcp")
    namespace: dict[str, Any] = {
        "__builtins__": builtins,
        "__name__": module_name,
        "runtime": root.runtime,
        "mcp_servers": root.mcp_servers,
    }
    read, _ = _globals_used(code)
    for name in read:
        if name.startswith("mcp_") and name != "mcp_servers":
            try:
                namespace[name] = getattr(root, name)
            except PolicyDenied as refusal:
                namespace[name] = RefusedServer(name, refusal)
            except (AttributeError, ToolError):
                continue  # not a server: NameError where it is used
    return namespace


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _listed(value: Any) -> list[Any]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

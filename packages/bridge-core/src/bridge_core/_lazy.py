"""Names a package exports but imports only on first use (PEP 562): the server must answer
``initialize`` before it pays for the runtime backends (podman-py, requests), the session manager
or the protocol. One helper for every package of bridge-core that needs it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any], lazy: Mapping[str, str], exported: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose globals are ``namespace``: a name
    of ``lazy`` (name → module) is imported on first use and kept in the namespace."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(exported)

    return __getattr__, __dir__

"""``mcp.runtime`` workflow helpers: save, find, load and delete reusable code (host-kept)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridge_sandbox_client._calls import CallRegistry

__all__ = ["Workflows"]


class Workflows:
    """The workflow helpers of ``mcp.runtime`` (their names in :attr:`EXPORTED`)."""

    EXPORTED: tuple[str, ...] = ()

    def __init__(self, registry: CallRegistry, namespace: Callable[[], dict[str, Any]]) -> None:
        self._registry = registry
        self._namespace = namespace

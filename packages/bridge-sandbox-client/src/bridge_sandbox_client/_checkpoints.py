"""``mcp.runtime`` checkpoint helpers: labelled copies of a durable session's state."""

from __future__ import annotations

from bridge_sandbox_client._calls import CallRegistry

__all__ = ["Checkpoints"]


class Checkpoints:
    """The checkpoint helpers of ``mcp.runtime`` (their names in :attr:`EXPORTED`)."""

    EXPORTED: tuple[str, ...] = ()

    def __init__(self, registry: CallRegistry) -> None:
        self._registry = registry

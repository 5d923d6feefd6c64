"""Tunables of the upstream pool (bridge-server fills them from its settings)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

__all__ = ["MAX_UPSTREAM_MESSAGE", "ProxyOptions"]

MAX_UPSTREAM_MESSAGE = 32 * 1024 * 1024
"""Longest JSON-RPC message (one line) read from a stdio server; past it the connection is cut
and the server stopped. Fixed, not a setting: the bridge holds a whole line in memory before it
can parse it, so this bounds what any server can make the host hold. Above the sandbox's 16 MiB
frame limit on purpose: a result that merely cannot be forwarded gets that clear error and leaves
the server running."""


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    """How upstream servers are started, timed and restarted."""

    call_timeout: float = 60.0
    """Seconds one tool call may take (``[servers] call_timeout`` of the settings file);
    separate from the execution timeout: a slow tool fails its call, not the whole execution."""
    start_timeout: float = 30.0
    """Seconds for spawn + ``initialize`` + the first ``tools/list`` (``npx`` cold starts are
    slow)."""
    backoff_initial: float = 0.5
    """Delay before the first restart after a failure; doubles with each further failure."""
    backoff_max: float = 10.0
    max_failures: int = 3
    """Consecutive failures after which calls fail fast until ``cooldown`` passes."""
    cooldown: float = 30.0
    max_message_bytes: int = MAX_UPSTREAM_MESSAGE
    """:data:`MAX_UPSTREAM_MESSAGE` (tests lower it)."""
    max_tools: int = 2000
    """Most tools one server may list (``[servers] max_tools``); more is refused."""
    max_tool_list_bytes: int = 8 * 1024 * 1024
    """Largest tool list of one server, all pages as JSON (``[servers] max_tool_list_size``);
    larger is refused."""
    stderr_tail_bytes: int = 16 * 1024
    """How much of each stdio server's stderr is kept (a ring buffer) for crash reports."""
    process_dir: Path | None = None
    """Where each stdio server's process group is recorded, so that a bridge starting later can
    end the groups a killed bridge left (``None``: not recorded)."""
    clock: Callable[[], float] = field(default=anyio.current_time, compare=False)
    """Time source for backoff and cooldown (tests inject a fake one)."""

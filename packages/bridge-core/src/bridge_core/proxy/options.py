"""Tunables of the upstream pool, with the environment variables that set them."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio

from bridge_core.errors import ConfigError

__all__ = ["ProxyOptions", "CALL_TIMEOUT_ENV"]

CALL_TIMEOUT_ENV = "MCP_BRIDGE_CALL_TIMEOUT"
_START_TIMEOUT_ENV = "MCP_BRIDGE_SERVER_START_TIMEOUT"


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    """How upstream servers are started, timed and restarted."""

    call_timeout: float = 60.0
    """Seconds one tool call may take (``MCP_BRIDGE_CALL_TIMEOUT``); separate from the
    execution timeout: a slow tool fails its call, not the whole execution."""
    start_timeout: float = 30.0
    """Seconds for spawn + ``initialize`` + first ``tools/list`` (``npx`` cold starts are slow)."""
    backoff_initial: float = 0.5
    """Delay before the first restart after a failure; doubles with each further failure."""
    backoff_max: float = 10.0
    max_failures: int = 3
    """Consecutive failures after which calls fail fast until ``cooldown`` passes."""
    cooldown: float = 30.0
    stderr_tail_bytes: int = 16 * 1024
    """How much of each server's stderr is kept (a ring buffer) for crash reports."""
    clock: Callable[[], float] = field(default=anyio.current_time, compare=False)
    """Time source for backoff and cooldown (tests inject a fake one)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProxyOptions:
        """Options from ``MCP_BRIDGE_CALL_TIMEOUT`` / ``MCP_BRIDGE_SERVER_START_TIMEOUT``.

        Raises :class:`~bridge_core.errors.ConfigError` naming the variable on a bad value.
        """
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            call_timeout=_seconds(env, CALL_TIMEOUT_ENV, defaults.call_timeout),
            start_timeout=_seconds(env, _START_TIMEOUT_ENV, defaults.start_timeout),
        )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive number of seconds")
    return value

"""bridge-core's exception tree: one root, subclasses by failure domain."""

from __future__ import annotations

__all__ = [
    "BridgeError",
    "ConfigError",
    "RuntimeUnavailable",
    "SandboxError",
    "SandboxStartError",
    "SessionError",
    "SessionLimitExceeded",
    "UpstreamError",
]


class BridgeError(Exception):
    """Root of every error bridge-core raises on purpose."""


class ConfigError(BridgeError):
    """A setting or configuration file is invalid (the message names it)."""


class RuntimeUnavailable(BridgeError):
    """No usable container runtime: the message says what was tried and what to do."""


class SandboxError(BridgeError):
    """A sandbox container failed (start, crash, protocol violation)."""


class SandboxStartError(SandboxError):
    """The container could not be started or did not connect its channel in time."""


class SessionError(BridgeError):
    """A session-level failure (e.g. waited too long for its turn)."""


class SessionLimitExceeded(SessionError):
    """Too many concurrent sessions (the message names the limit and its setting)."""


class UpstreamError(BridgeError):
    """A proxied MCP server failed: start-up, crash, timeout (the message names the server)."""

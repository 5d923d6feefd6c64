"""Where the channel lives inside a sandbox: shared by the host runtime and the sandbox client."""

from __future__ import annotations

__all__ = ["CHANNEL_SOCKET_NAME", "SANDBOX_CHANNEL_DIR", "SANDBOX_CHANNEL_SOCKET"]

SANDBOX_CHANNEL_DIR = "/run/bridge"
"""The per-sandbox host directory is bind-mounted here (read-only is not possible: connect(2) on a
unix socket needs write permission on the socket file, which the host grants to uid 65534)."""

CHANNEL_SOCKET_NAME = "channel.sock"
SANDBOX_CHANNEL_SOCKET = f"{SANDBOX_CHANNEL_DIR}/{CHANNEL_SOCKET_NAME}"

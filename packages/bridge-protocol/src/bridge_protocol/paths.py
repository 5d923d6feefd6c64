"""Where the channel lives inside a sandbox: shared by the host runtime and the sandbox client."""

from __future__ import annotations

__all__ = [
    "CHANNEL_SOCKET_NAME",
    "PREIMPORT_FILE_NAME",
    "SANDBOX_CHANNEL_DIR",
    "SANDBOX_CHANNEL_SOCKET",
    "SANDBOX_PREIMPORT_FILE",
]

SANDBOX_CHANNEL_DIR = "/run/bridge"
"""The per-sandbox host directory is bind-mounted here (read-only is not possible: connect(2) on a
unix socket needs write permission on the socket file, which the host grants to uid 65534)."""

CHANNEL_SOCKET_NAME = "channel.sock"
SANDBOX_CHANNEL_SOCKET = f"{SANDBOX_CHANNEL_DIR}/{CHANNEL_SOCKET_NAME}"

PREIMPORT_FILE_NAME = "preimport"
"""A file the host may write into the channel directory before the sandbox starts: the module
names (one per line, see :mod:`bridge_protocol.hints`) the sandbox client imports at once, before
it even connects, for the session it will restore (or for the warm pool of a one-client bridge)."""
SANDBOX_PREIMPORT_FILE = f"{SANDBOX_CHANNEL_DIR}/{PREIMPORT_FILE_NAME}"

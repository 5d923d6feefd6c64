"""The :class:`~bridge_core.runtime.base.Sandbox` the container backends hand out."""

from __future__ import annotations

from dataclasses import dataclass

from anyio.abc import ByteStream
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR

from bridge_core.runtime._channel import ChannelDir
from bridge_core.runtime.base import SandboxSpec, SharedDir

__all__ = ["ContainerSandbox"]


@dataclass(frozen=True, slots=True, eq=False)
class ContainerSandbox:
    """A started container whose channel is connected.

    ``name`` is the container name (``mcp-bridge-<spec name>-<random>``), which is what
    ``podman ps`` shows; ``spec`` is what it was started from.
    """

    name: str
    stream: ByteStream
    spec: SandboxSpec
    channel: ChannelDir | None
    """The bind-mounted channel directory; None for the stdio channel (nothing is shared)."""

    @property
    def shared_dir(self) -> SharedDir | None:
        """The channel directory: bind-mounted read-only at ``SANDBOX_CHANNEL_DIR``."""
        if self.channel is None:
            return None
        return SharedDir(self.channel.path, SANDBOX_CHANNEL_DIR)

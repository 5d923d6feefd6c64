"""The :class:`~bridge_core.runtime.base.Sandbox` the container backends hand out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

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
    copy_in: Callable[[Path, str], Awaitable[None]] | None = None
    """The stdio channel: how a file of :attr:`host_dir` gets to the same place inside (the
    engine copies it into the sandbox's read-only ``SANDBOX_CHANNEL_DIR`` tmpfs)."""
    host_dir: Path | None = None
    """The stdio channel: the host's private copy of what was copied in (removed with it)."""

    @property
    def shared_dir(self) -> SharedDir | None:
        """The channel directory, bind-mounted read-only at ``SANDBOX_CHANNEL_DIR``; for the
        stdio channel a host directory whose files the engine copies to the same place."""
        if self.channel is not None:
            return SharedDir(self.channel.path, SANDBOX_CHANNEL_DIR)
        if self.host_dir is not None and self.copy_in is not None:
            return SharedDir(self.host_dir, SANDBOX_CHANNEL_DIR, self.copy_in)
        return None

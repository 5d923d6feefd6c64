"""The host end of a sandbox's channel: a per-sandbox directory holding one unix socket.

The directory is bind-mounted into the container at ``SANDBOX_CHANNEL_DIR``; the sandbox client
connects to ``channel.sock`` in it. Exactly one connection is accepted, then the socket file is
unlinked so nothing else (not even a second process in the same sandbox) can connect.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import SocketListener, SocketStream
from bridge_protocol.paths import CHANNEL_SOCKET_NAME

from bridge_core.errors import SandboxStartError

__all__ = ["EXIT_POLL_INTERVAL", "ChannelDir", "accept_channel"]

EXIT_POLL_INTERVAL = 0.05
"""Seconds between "did the sandbox die before connecting?" checks while waiting for the
channel. Runtimes offer no cancellable exit notification we can wait on next to accept()."""

# sockaddr_un.sun_path is 108 bytes including the NUL; deep state dirs (pytest tmp dirs) exceed
# it. Binding through /proc/self/fd/<dirfd>/ keeps the path short and still names the same file.
_MAX_SOCKET_PATH = 100
DIR_MODE = 0o755
"""Traversable by the sandbox's uid 65534, writable only by the bridge."""
SOCKET_MODE = 0o666
"""connect(2) needs write permission on the socket file; the sandbox runs as uid 65534."""


@dataclass(slots=True)
class ChannelDir:
    """One sandbox's host directory (``<state_dir>/sandboxes/<name>/``)."""

    path: Path

    @property
    def socket_path(self) -> Path:
        return self.path / CHANNEL_SOCKET_NAME

    @classmethod
    def create(cls, root: Path, name: str) -> ChannelDir:
        """Create the directory (fails if it exists: names are unique)."""
        root.mkdir(parents=True, exist_ok=True)
        path = root / name
        path.mkdir(mode=DIR_MODE)
        os.chmod(path, DIR_MODE)  # mkdir's mode is filtered by the umask
        return cls(path)

    async def listen(self) -> SocketListener:
        """Listen on ``channel.sock`` (mode 0o666)."""
        path = str(self.socket_path)
        if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
            return await anyio.create_unix_listener(path, mode=SOCKET_MODE)
        dir_fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            short = f"/proc/self/fd/{dir_fd}/{CHANNEL_SOCKET_NAME}"
            return await anyio.create_unix_listener(short, mode=SOCKET_MODE)
        finally:
            os.close(dir_fd)

    def unlink_socket(self) -> None:
        try:
            self.socket_path.unlink()
        except FileNotFoundError:
            pass

    def remove(self) -> None:
        """Remove the directory and everything in it; missing is fine."""
        shutil.rmtree(self.path, ignore_errors=True)


async def accept_channel(
    listener: SocketListener,
    *,
    exited: Callable[[], Awaitable[str | None]],
    what: str,
    connect_timeout: float,
) -> SocketStream:
    """Accept one connection, or fail early when the sandbox died before connecting.

    ``exited`` returns None while the sandbox runs, else a description of how it ended (exit
    code, log tail); it is polled every :data:`EXIT_POLL_INTERVAL`. ``what`` names the sandbox in
    error messages. Raises :class:`SandboxStartError`, also when nothing connects within
    ``connect_timeout`` seconds (the spec's setting, named in the message).
    """
    accepted: SocketStream | None = None
    death: str | None = None

    async def accept(scope: anyio.CancelScope) -> None:
        nonlocal accepted
        accepted = await listener.accept()
        scope.cancel()

    async def watch(scope: anyio.CancelScope) -> None:
        nonlocal death
        # Polling, because no runtime offers a cancellable "container exited" wait here.
        while (death := await exited()) is None:  # noqa: ASYNC110
            await anyio.sleep(EXIT_POLL_INTERVAL)
        scope.cancel()

    try:
        with anyio.move_on_after(connect_timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(accept, tg.cancel_scope)
                tg.start_soon(watch, tg.cancel_scope)
    except BaseException:
        # Cancelled from outside (or the runtime failed) right after a connection arrived.
        if accepted is not None:
            await anyio.aclose_forcefully(accepted)
        raise
    if accepted is not None:
        return accepted
    if death is not None:
        raise SandboxStartError(f"{what} exited before connecting its channel: {death}")
    raise SandboxStartError(
        f"{what} did not connect its channel within {connect_timeout:g} s (does the image's "
        "ENTRYPOINT run the sandbox client, connecting to the socket in its channel directory?)"
    )

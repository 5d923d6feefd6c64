"""The host end of a sandbox's channel: a per-sandbox directory holding one unix socket.

The directory is bind-mounted into the container at ``SANDBOX_CHANNEL_DIR``; the sandbox client
connects to ``channel.sock`` in it. Exactly one connection is accepted, then the socket file is
unlinked so nothing else (not even a second process in the same sandbox) can connect.

Who else could connect first: nobody. Every directory above the per-sandbox one (``sandboxes/``,
the backend's directory, the state dir) is 0700 and the bridge user's, so no other local account
reaches the socket. The container still does: the runtime resolves a bind mount's source when it
creates the container (as root, or as the rootless user), and the container only ever walks the
mounted directory itself, which is why that one alone lets others pass (0711: the container's
uid is "other" to it). And before a byte is read, the connecting process must be the sandbox
(:mod:`._peer`); any other is logged, cut off and the wait goes on for the real one.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteStream, SocketListener, SocketStream
from bridge_protocol.hints import strict_hint
from bridge_protocol.paths import CHANNEL_SOCKET_NAME, PREIMPORT_FILE_NAME

from bridge_core.errors import SandboxStartError
from bridge_core.private_files import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, private_dir
from bridge_core.runtime._peer import PeerCredentials, peer_credentials

__all__ = ["EXIT_POLL_INTERVAL", "ChannelDir", "PeerCheck", "accept_channel"]

logger = logging.getLogger(__name__)

EXIT_POLL_INTERVAL = 0.05
"""Seconds between "did the sandbox die before connecting?" checks while waiting for the
channel. Runtimes offer no cancellable exit notification we can wait on next to accept()."""

# sockaddr_un.sun_path is 108 bytes including the NUL; deep state dirs (pytest tmp dirs) exceed
# it. Binding through /proc/self/fd/<dirfd>/ keeps the path short and still names the same file.
_MAX_SOCKET_PATH = 100
DIR_MODE = 0o711
"""A container's channel directory: the sandbox's uid (65534, or a subordinate uid rootless) may
pass through it to the socket, not list it; writable only by the bridge. Only reachable through
the container's bind mount: its parents are 0700."""
FILE_MODE = 0o644
"""A file of the channel directory the sandbox reads (its uid is "other" to it)."""
SOCKET_MODE = 0o666
"""connect(2) needs write permission on the socket file; the sandbox's uid is not ours."""
_MAX_REJECTIONS_SHOWN = 3
"""Refused connections named in the log and in a start error; more are only counted."""

PeerCheck = Callable[[PeerCredentials], Awaitable[str | None]]
"""Says why a connecting process is not the sandbox (None: it is)."""


@dataclass(slots=True)
class ChannelDir:
    """One sandbox's host directory (``<state_dir>/sandboxes/<name>/``)."""

    path: Path
    shared: bool = True
    """True: a container's (another uid connects); False: a local sandbox's (our own uid)."""

    @property
    def socket_path(self) -> Path:
        return self.path / CHANNEL_SOCKET_NAME

    @classmethod
    def create(cls, root: Path, name: str, *, shared: bool = True) -> ChannelDir:
        """Create the directory in the private ``root``; :class:`SandboxStartError` if it exists
        (names are unique) or cannot be made.

        ``shared=False`` (the sandbox runs as the bridge's own user) keeps it 0700 and the
        socket 0600.
        """
        path = root / name
        mode = DIR_MODE if shared else PRIVATE_DIR_MODE
        try:
            private_dir(root)
            path.mkdir(mode=mode)
            os.chmod(path, mode)  # mkdir's mode is filtered by the umask
        except OSError as exc:
            raise SandboxStartError(f"cannot create the channel directory {path}: {exc}") from exc
        return cls(path, shared)

    def write_preimport(self, modules: tuple[str, ...]) -> None:
        """Name the modules the sandbox client imports as it starts (nothing if none).

        Readable by the sandbox's uid (0644: it holds only names of modules of its own session's
        state); checked again here, so nothing but plain module names ever lands in the file.
        """
        raw = "\n".join(modules).encode("ascii", "replace")
        if not modules or strict_hint(raw) != list(modules):
            return
        path = self.path / PREIMPORT_FILE_NAME
        mode = FILE_MODE if self.shared else PRIVATE_FILE_MODE
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            with os.fdopen(os.open(path, flags, mode), "wb") as file:
                file.write(raw)
            os.chmod(path, mode)  # past the umask
        except OSError as exc:  # only an optimisation: the state's own head names them too
            logger.warning("could not name the modules to import in %s: %s", path, exc)

    async def listen(self) -> SocketListener:
        """Listen on ``channel.sock`` (mode 0o666, or 0o600 when not shared)."""
        mode = SOCKET_MODE if self.shared else PRIVATE_FILE_MODE
        path = str(self.socket_path)
        if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
            return await anyio.create_unix_listener(path, mode=mode)
        dir_fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            short = f"/proc/self/fd/{dir_fd}/{CHANNEL_SOCKET_NAME}"
            return await anyio.create_unix_listener(short, mode=mode)
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
    check_peer: PeerCheck,
    what: str,
    connect_timeout: float,
) -> ByteStream:
    """Accept the sandbox's connection, or fail early when the sandbox died before connecting.

    Every connection is first checked by ``check_peer`` on its ``SO_PEERCRED``; one from any
    other process is closed unread, logged, and the wait goes on. ``exited`` returns None while
    the sandbox runs, else a description of how it ended (exit code, log tail); it is polled
    every :data:`EXIT_POLL_INTERVAL`. ``what`` names the sandbox in messages. Raises
    :class:`SandboxStartError`, also when nothing acceptable connects within
    ``connect_timeout`` seconds (the spec's setting, named in the message).
    """
    accepted: SocketStream | None = None
    death: str | None = None
    refused: list[str] = []
    refused_count = 0

    async def screen(stream: SocketStream) -> bool:
        nonlocal refused_count
        who = "a process"
        problem: str | None
        try:
            peer = peer_credentials(stream)
        except OSError as exc:
            problem = f"its credentials cannot be read ({exc})"
        else:
            who, problem = str(peer), await check_peer(peer)
        if problem is None:
            return True
        refused_count += 1
        if len(refused) < _MAX_REJECTIONS_SHOWN:
            refused.append(f"{who}: {problem}")
            logger.warning("%s: refused a channel connection from %s: %s", what, who, problem)
        return False

    async def accept(scope: anyio.CancelScope) -> None:
        nonlocal accepted
        while True:
            stream = await listener.accept()
            try:
                trusted = await screen(stream)
            except BaseException:
                await anyio.aclose_forcefully(stream)
                raise
            if trusted:
                accepted = stream
                scope.cancel()
                return
            await anyio.aclose_forcefully(stream)  # not one byte of it was read

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
    also = ""
    if refused_count:
        also = f"; refused {refused_count} connection(s) from other processes: " + "; ".join(
            refused
        )
    if death is not None:
        raise SandboxStartError(f"{what} exited before connecting its channel: {death}{also}")
    raise SandboxStartError(
        f"{what} did not connect its channel within {connect_timeout:g} s (does the image's "
        "ENTRYPOINT run the sandbox client, connecting to the socket in its channel directory?)"
        + also
    )

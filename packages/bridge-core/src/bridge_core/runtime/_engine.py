"""What the backends share: the start on a channel directory (:func:`start_on_channel`, all
three), and for the container engines (podman, docker) :class:`ContainerEngine`: start, exit
status, stop, kill and leftovers written once, each engine supplying what differs (the methods
that raise NotImplementedError here). A removed sandbox's exit code comes from the engine's
event stream (:mod:`._exit_records`), the OOM verdict from its cgroup parent (:mod:`._oom`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteStream, SocketListener
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR

from bridge_core._ownership import current_owner, dead_owner_dirs, owner_dir_name
from bridge_core.runtime._channel import ChannelDir, PeerCheck, accept_channel
from bridge_core.runtime._exit_records import EventFollower
from bridge_core.runtime._hardening import container_name
from bridge_core.runtime._oom import EngineCgroups
from bridge_core.runtime._peer import PeerCredentials
from bridge_core.runtime._seccomp import SeccompProfile
from bridge_core.runtime.base import Sandbox, SandboxExit, SandboxLimits, SandboxSpec, SharedDir

__all__ = ["CLEANUP_TIMEOUT", "ContainerEngine", "ContainerSandbox", "Watch", "start_on_channel"]

logger = logging.getLogger(__name__)

CLEANUP_TIMEOUT = 15.0
"""Bound on removing a sandbox once asked to (half-started, stopped or killed), and on the
kills through podman's API at shutdown."""
Watch = tuple[Callable[[], Awaitable[str | None]], PeerCheck]
"""How a launched sandbox is watched until it connects: how it ended (None: it still runs), and
the peer check."""


async def start_on_channel(
    channel: ChannelDir,
    spec: SandboxSpec,
    what: str,
    launch: Callable[[], Awaitable[Watch]],
    undo: Callable[[], Awaitable[None]],
) -> ByteStream:
    """Start a sandbox on ``channel`` and return its connection: name the modules it imports as
    it starts, listen, ``launch`` it, accept it (:func:`accept_channel`; ``what`` names it),
    then unlink the socket so nothing else connects.

    On any failure or cancellation, up to the return, the listener (and a connection already
    accepted) is closed and ``undo`` removes what ``launch`` made, shielded (a cancelled caller
    must still not leak a container or a process); ``undo`` bounds its own waits.
    """
    listener: SocketListener | None = None
    accepted: ByteStream | None = None
    try:
        if spec.preimport:
            await anyio.to_thread.run_sync(channel.write_preimport, spec.preimport)
        listener = await channel.listen()
        exited, check_peer = await launch()
        stream = accepted = await accept_channel(
            listener,
            exited=exited,
            check_peer=check_peer,
            what=what,
            connect_timeout=spec.connect_timeout,
        )
        # Still undone on failure: closing the listener is a checkpoint, where a cancellation
        # that came as the sandbox connected (a start deadline, the shutdown) is delivered; past
        # it the caller would get no sandbox and nothing would remove the running one.
        await listener.aclose()
        channel.unlink_socket()
        return stream
    except BaseException:
        with anyio.CancelScope(shield=True):
            if accepted is not None:
                await anyio.aclose_forcefully(accepted)
            if listener is not None:
                await anyio.aclose_forcefully(listener)
            await undo()
        raise


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


class ContainerEngine:
    """The part of a container backend that is the same for every engine."""

    _transient: tuple[type[Exception], ...] = ()
    """What the engine raises when it did not answer: no verdict on a sandbox."""

    def __init__(
        self, state_dir: Path, events: Callable[[str], EventFollower], cgroups: EngineCgroups
    ) -> None:
        self.owner = current_owner()
        """This bridge process, as written in the ownership label of every container it starts."""
        # Per owner, so the next bridge can tell what a dead one left here (channel dirs of
        # sandboxes that were starting, logs) from what a live bridge on this state dir uses.
        self._sandboxes = state_dir / "sandboxes" / owner_dir_name(self.owner)
        self._live: dict[str, ContainerSandbox] = {}
        self._events = events(self.owner.label)
        self._cgroups = cgroups
        self.seccomp: SeccompProfile | None = None
        """The sandboxes' system-call filter (:mod:`._seccomp`); set by ``connect``."""
        self.seccomp_problem = "not connected"
        """Why :attr:`seccomp` is None: a sandbox is then started only with a profile of the
        user's own (``MCP_BRIDGE_SECURITY_OPT=seccomp=...``)."""
        self.track_oom = False
        """Whether sandboxes get a cgroup parent the bridge reads to detect OOM kills (see
        :mod:`._oom`); set by ``connect`` where the engine's cgroups can be read: rootful and
        cgroupfs-managed, local (or, for podman, over ssh: read through the link)."""

    async def start(self, spec: SandboxSpec) -> ContainerSandbox:
        """Create, verify and start the container, then accept its channel connection."""
        name = container_name(spec.name)
        self._events.follow(name)
        channel = ChannelDir.create(self._sandboxes, name)

        async def launch() -> Watch:
            await self._launch(spec, name, channel.path)
            memory_limit = spec.limits.memory_bytes
            exited = partial(self._exited_while_starting, name, memory_limit)
            return exited, partial(self._check_peer, name)

        what = f"sandbox container {name}"
        undo = partial(self._undo_start, name)
        stream = await start_on_channel(channel, spec, what, launch, undo)
        sandbox = ContainerSandbox(name=name, stream=stream, spec=spec, channel=channel)
        self._live[name] = sandbox
        return sandbox

    async def status(self, sandbox: Sandbox) -> SandboxExit:
        """Whether it runs; if not, its exit code and whether it was OOM-killed. An engine that
        does not answer raises (the sandbox's state is then unknown, never "gone")."""
        spec = sandbox.spec if isinstance(sandbox, ContainerSandbox) else None
        memory_limit = (spec.limits if spec else SandboxLimits()).memory_bytes
        return await self._status(sandbox.name, memory_limit)

    async def _status(self, name: str, memory_limit: int) -> SandboxExit:
        oom_killed = partial(self._oom_killed, name, memory_limit)
        return await self._events.sandbox_exit(name, await self._state(name), oom_killed)

    async def _oom_killed(self, name: str, memory_limit: int, exit_code: int | None) -> bool:
        if not self.track_oom:
            return False
        return await self._cgroups.oom_killed(name, memory_limit=memory_limit, exit_code=exit_code)

    async def _death(self, name: str, memory_limit: int) -> str | None:
        """None while ``name`` runs; else how it ended and its last output (a start's error)."""
        try:
            exit_ = await self._status(name, memory_limit)
            if exit_.running:
                return None
            output = await self._last_output(name)
        except self._transient as exc:
            # Not a verdict on the sandbox; the connect timeout still bounds the wait.
            logger.debug("cannot inspect %s while it starts: %r", name, exc)
            return None
        return exit_.describe() + (f"; last output:\n{output}" if output else "")

    async def _exited_while_starting(self, name: str, memory_limit: int) -> str | None:
        """:meth:`_death`, polled every 50 ms while the sandbox connects: the event record
        answers "still running?" without asking the engine each time (a started container that
        ends always sends its death event); the engine is asked only once it did."""
        if self._events.following(name) and self._events.exit_code(name) is None:
            return None
        return await self._death(name, memory_limit)

    async def stop(self, sandbox: Sandbox, *, grace: float = 2.0) -> None:
        """Close the channel, SIGTERM, SIGKILL after ``grace`` seconds, remove. Cancel-safe."""
        removal = partial(self._stop_and_remove, sandbox.name, grace)
        await self._end(sandbox, removal, grace + CLEANUP_TIMEOUT)

    async def kill(self, sandbox: Sandbox) -> None:
        """SIGKILL and remove now. Cancel-safe."""
        await self._end(sandbox, partial(self._remove, sandbox.name), CLEANUP_TIMEOUT)

    async def _end(
        self, sandbox: Sandbox, removal: Callable[[], Awaitable[None]], bound: float
    ) -> None:
        self._live.pop(sandbox.name, None)
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(sandbox.stream)
            try:
                with anyio.move_on_after(bound):
                    await removal()
            finally:
                # Also when the engine failed (its error goes on to the caller): the sandbox
                # left the records above, so nothing else would close its init's pidfd or
                # remove its channel directory before the bridge exits.
                await self._forget(sandbox.name)

    async def remove_leftovers(self) -> int:
        """Remove our containers whose owner bridge process is gone, and what such bridges left
        in the state directory; return how many containers."""
        removed = await self._remove_leftover_containers()
        for directory in dead_owner_dirs(self._sandboxes.parent):
            await anyio.to_thread.run_sync(partial(shutil.rmtree, directory, ignore_errors=True))
        if self.track_oom:
            # Cgroup parents whose conmon was still exiting when their sandbox was removed.
            await self._cgroups.remove_empty()
        return removed

    async def _forget(self, name: str, *, patient: bool = True) -> None:
        """Drop what the host kept for sandbox ``name``: its event record, its channel dir (with
        the full outputs kept there) and its cgroup parent (``patient``: waiting for conmon to
        leave it)."""
        await anyio.to_thread.run_sync(self._forget_all, [name])
        if self.track_oom and patient:
            await self._cgroups.remove_parent(name)

    def _forget_all(self, names: Sequence[str]) -> None:
        """The part of :meth:`_forget` that never waits, for many sandboxes in one thread."""
        for name in names:
            self._events.forget(name)
            ChannelDir(self._sandboxes / name).remove()

    async def kill_all(self, sandboxes: Sequence[Sandbox]) -> None:
        """Kill and remove every sandbox at once (shutdown): their channels close first (each
        sandbox client exits on EOF by itself), then the engine kills them all
        (:meth:`_kill_many`). Cancel-safe, never raises."""
        names = [sandbox.name for sandbox in sandboxes]
        with anyio.CancelScope(shield=True):
            for sandbox in sandboxes:
                self._live.pop(sandbox.name, None)
                await anyio.aclose_forcefully(sandbox.stream)
            await self._kill_many(names)
            await anyio.to_thread.run_sync(self._forget_all, names)

    async def aclose(self) -> None:
        """Kill sandboxes still running (normally the session manager stopped them all), stop
        following events, remove what this bridge kept in the state directory."""
        with anyio.CancelScope(shield=True):
            await self.kill_all(list(self._live.values()))
            self._events.close()
            await anyio.to_thread.run_sync(
                partial(shutil.rmtree, self._sandboxes, ignore_errors=True)
            )

    async def _undo_start(self, name: str) -> None:
        """Remove what a failed or cancelled start of ``name`` left (called shielded)."""
        with anyio.move_on_after(CLEANUP_TIMEOUT):
            await self._remove(name)
        await self._forget(name)

    # What each engine supplies.

    async def _launch(self, spec: SandboxSpec, name: str, channel_dir: Path) -> None:
        raise NotImplementedError  # create it with channel_dir mounted, verify it, start it

    async def _state(self, name: str) -> Mapping[str, Any] | None:
        raise NotImplementedError

    async def _last_output(self, name: str) -> str:
        raise NotImplementedError

    async def _check_peer(self, name: str, peer: PeerCredentials) -> str | None:
        raise NotImplementedError  # why peer is not a process of the container (None: it is)

    async def _stop_and_remove(self, name: str, grace: float) -> None:
        raise NotImplementedError

    async def _remove(self, name: str) -> None:
        raise NotImplementedError

    async def _kill_many(self, names: Sequence[str]) -> None:
        raise NotImplementedError

    async def _remove_leftover_containers(self) -> int:
        raise NotImplementedError

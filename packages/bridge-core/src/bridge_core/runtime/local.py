"""The local backend: the sandbox client as a plain host subprocess. NO ISOLATION.

For fast tests and development only. The "sandbox" runs as the bridge's own user with the host's
network, filesystem and limits; nothing of the container hardening applies. :meth:`info` says so
(``limits_enforced=False``), and no setting selects it: ``MCP_BRIDGE_RUNTIME`` accepts podman and
docker only. Tests construct it directly (``LocalBackend(state_dir=...)``): that is the seam.

Same lifecycle as the container backends: a per-sandbox channel directory (private: the child
runs as our own user), one accepted connection, which must come from the child itself, and the
child runs in its own process group so stop/kill reach everything it spawned (no orphans).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import ByteStream, Process

from bridge_core.runtime._channel import ChannelDir
from bridge_core.runtime._engine import Watch, start_on_channel
from bridge_core.runtime._hardening import container_name
from bridge_core.runtime._peer import PeerCredentials, process_peer_problem
from bridge_core.runtime.base import RuntimeInfo, Sandbox, SandboxExit, SandboxSpec, SharedDir

__all__ = ["LocalBackend", "LocalSandbox"]

_KILL_WAIT = 5.0
"""Seconds to wait for a SIGKILLed process group leader to be reaped."""
_MAX_SOCKET_ARG = 100  # sun_path limit; longer paths are passed relative to the child's cwd


@dataclass(frozen=True, slots=True, eq=False)
class LocalSandbox:
    """A sandbox-client subprocess with its connected channel."""

    name: str
    stream: ByteStream
    spec: SandboxSpec
    process: Process
    channel: ChannelDir

    @property
    def shared_dir(self) -> SharedDir:
        """The channel directory, at its host path (the client runs on the host)."""
        return SharedDir(self.channel.path, str(self.channel.path))


class LocalBackend:
    """Runs ``python -m bridge_sandbox_client --socket <path>`` on the host (no isolation)."""

    name = "local"

    def __init__(self, *, state_dir: Path, python: str = sys.executable) -> None:
        self._sandboxes = state_dir / "sandboxes"
        self._python = python
        self._running: dict[str, LocalSandbox] = {}

    async def info(self) -> RuntimeInfo:
        """Always ``limits_enforced=False``: this backend isolates nothing."""
        return RuntimeInfo(
            "local",
            f"python {sys.version.split()[0]}",
            rootless=True,
            limits_enforced=False,
            detail="NO ISOLATION: user code runs as a host process (tests and development only)",
        )

    async def start(self, spec: SandboxSpec) -> LocalSandbox:
        """Spawn the sandbox client and accept its channel connection. ``spec.image`` is unused."""
        name = container_name(spec.name)
        channel = ChannelDir.create(self._sandboxes, name, shared=False)
        spawned: list[Process] = []

        async def launch() -> Watch:
            process = await self._spawn(channel)
            spawned.append(process)

            async def check_peer(peer: PeerCredentials) -> str | None:
                return process_peer_problem(peer, process.pid)

            return partial(_death, process), check_peer

        async def undo() -> None:
            for process in spawned:
                await _kill_group(process)
            channel.remove()

        stream = await start_on_channel(channel, spec, f"local sandbox {name}", launch, undo)
        sandbox = LocalSandbox(name, stream, spec, spawned[0], channel)
        self._running[name] = sandbox
        return sandbox

    async def _spawn(self, channel: ChannelDir) -> Process:
        socket = str(channel.socket_path)
        if len(os.fsencode(socket)) > _MAX_SOCKET_ARG:
            socket = channel.socket_path.name
        command = [self._python, "-m", "bridge_sandbox_client", "--socket", socket]
        setpriv = shutil.which("setpriv")
        if setpriv is not None:  # the kernel kills the client if the bridge dies first
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        return await anyio.open_process(
            command,
            cwd=channel.path,
            # Nothing from the host environment, as in a container (PATH only to find tools).
            env={"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # its own process group: killpg reaches its children too
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _lookup(self, sandbox: Sandbox) -> LocalSandbox | None:
        return self._running.get(sandbox.name)

    async def status(self, sandbox: Sandbox) -> SandboxExit:
        """Running, or its exit status (a signal ``n`` shows as ``128 + n`` like a container)."""
        local = self._lookup(sandbox)
        if local is None:
            return SandboxExit(running=False, error="sandbox process is gone")
        code = local.process.returncode
        if code is None:
            return SandboxExit(running=True)
        return SandboxExit(running=False, exit_code=128 - code if code < 0 else code)

    async def stop(self, sandbox: Sandbox, *, grace: float = 2.0) -> None:
        """Close the channel, SIGTERM the process group, SIGKILL after ``grace``. Cancel-safe."""
        local = self._running.pop(sandbox.name, None)
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(sandbox.stream)
            if local is None:
                return
            _signal_group(local.process, signal.SIGTERM)
            with anyio.move_on_after(grace):
                await local.process.wait()
            await _kill_group(local.process)
            local.channel.remove()

    async def kill(self, sandbox: Sandbox) -> None:
        """SIGKILL the process group now. Cancel-safe."""
        local = self._running.pop(sandbox.name, None)
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(sandbox.stream)
            if local is not None:
                await _kill_group(local.process)
                local.channel.remove()

    async def kill_all(self, sandboxes: Sequence[Sandbox]) -> None:
        """SIGKILL every process group at once, then reap them. Cancel-safe."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as kills:
                for sandbox in sandboxes:
                    kills.start_soon(self.kill, sandbox)

    async def remove_leftovers(self) -> int:
        """Always 0: local sandboxes die with the bridge (parent-death signal), none outlive it."""
        return 0

    async def aclose(self) -> None:
        """Kill every sandbox still running."""
        await self.kill_all(list(self._running.values()))


async def _death(process: Process) -> str | None:
    if process.returncode is None:
        return None
    return f"the sandbox client exited with status {process.returncode}"


def _signal_group(process: Process, signum: signal.Signals) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


async def _kill_group(process: Process) -> None:
    """SIGKILL the whole process group (the client and anything user code spawned), reap it."""
    with anyio.CancelScope(shield=True):
        _signal_group(process, signal.SIGKILL)
        with anyio.move_on_after(_KILL_WAIT):
            await process.wait()
        await process.aclose()

"""What the backends share (:mod:`bridge_core.runtime._engine`), with fakes: the start on a
channel every backend uses (what a backend launches and undoes), and the container engines' end
of a sandbox when the engine does not answer. A start cancelled at any point, or a sandbox ended
while the engine fails, leaves nothing on the host."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from anyio.abc import ByteStream
from bridge_core.runtime import _engine
from bridge_core.runtime._channel import ChannelDir
from bridge_core.runtime._engine import ContainerSandbox, Watch, start_on_channel
from bridge_core.runtime._peer import PeerCredentials
from bridge_core.runtime._pidfd import HeldInit
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from podman.errors import APIError

SPEC = SandboxSpec(name="box", image="unused", connect_timeout=5)


class _Connection(ByteStream):
    """The sandbox's end as the bridge holds it; records whether it was closed."""

    closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        raise anyio.EndOfStream

    async def send(self, item: bytes) -> None:
        pass

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True


async def _running() -> str | None:
    return None


async def _the_sandbox(peer: PeerCredentials) -> str | None:
    return None


class _Launcher:
    """What a backend supplies: a launch that records itself, an undo that records itself."""

    def __init__(self) -> None:
        self.launched = 0
        self.undone = 0

    async def launch(self) -> Watch:
        self.launched += 1
        return _running, _the_sandbox

    async def undo(self) -> None:
        self.undone += 1


async def test_a_start_cancelled_as_its_sandbox_connects_is_undone_and_the_connection_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caller gives up just as the sandbox connects (its start deadline passes, or the
    # shutdown cancels the pool's refill, while the peer check runs): the cancellation is
    # delivered at the start's next checkpoint, after the connection was accepted.
    channel = ChannelDir.create(tmp_path / "sandboxes", "box")
    connection = _Connection()
    caller = anyio.CancelScope()

    async def connects_as_the_caller_gives_up(*args: object, **kwargs: object) -> ByteStream:
        caller.cancel()
        return connection

    monkeypatch.setattr(_engine, "accept_channel", connects_as_the_caller_gives_up)
    backend = _Launcher()
    with anyio.fail_after(5), caller:
        await start_on_channel(channel, SPEC, "sandbox box", backend.launch, backend.undo)
    assert caller.cancelled_caught  # the start did not return a sandbox nobody holds
    assert backend.undone == 1  # what it launched is removed, with its channel directory
    assert connection.closed


class _PodmanDown:
    """A podman client whose every call fails as when the API service is gone."""

    class containers:  # podman-py's attribute
        @staticmethod
        def get(name: str) -> object:
            raise APIError(f"GET {name}: connection refused")

        @staticmethod
        def remove(name: str, force: bool = False) -> None:
            raise APIError(f"DELETE {name}: connection refused")

    def close(self) -> None:
        pass


async def _stop(backend: PodmanBackend, sandbox: ContainerSandbox) -> None:
    await backend.stop(sandbox, grace=0)


async def _kill(backend: PodmanBackend, sandbox: ContainerSandbox) -> None:
    await backend.kill(sandbox)


@pytest.mark.parametrize("end", [_stop, _kill], ids=["stop", "kill"])
async def test_a_sandbox_ended_while_podman_does_not_answer_leaves_no_pidfd_or_directory(
    tmp_path: Path, end: Callable[[PodmanBackend, ContainerSandbox], Awaitable[None]]
) -> None:
    # The engine's error still reaches the caller (the fleet logs it and tries a kill); what the
    # host kept for the sandbox goes all the same: it left the backend's records, so nothing
    # would close its init's pidfd or remove its channel directory (full outputs) before exit.
    backend = PodmanBackend(
        _PodmanDown(),  # type: ignore[arg-type]
        url="unix:///nonexistent/podman.sock",
        state_dir=tmp_path,
    )
    try:
        name = "mcp-bridge-box-0"
        channel = ChannelDir.create(backend._sandboxes, name)
        init_fd, other_end = os.pipe()  # stands in for its init's pidfd
        os.close(other_end)
        backend._reaper.inits[name] = HeldInit(init_fd, pid=0)
        sandbox = ContainerSandbox(name=name, stream=_Connection(), spec=SPEC, channel=channel)
        backend._live[name] = sandbox
        with anyio.fail_after(5), pytest.raises(APIError):
            await end(backend, sandbox)
        assert name not in backend._reaper.inits  # its pidfd was closed
        assert not channel.path.exists()
    finally:
        await backend.aclose()

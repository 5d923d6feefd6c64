"""What the backends share (:mod:`bridge_core.runtime._engine`), with fakes: the start on a
channel every backend uses (what a backend launches and undoes). A start cancelled at any point
leaves nothing on the host."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.abc import ByteStream
from bridge_core.runtime import _engine
from bridge_core.runtime._channel import ChannelDir
from bridge_core.runtime._engine import Watch, start_on_channel
from bridge_core.runtime._peer import PeerCredentials
from bridge_core.runtime.base import SandboxSpec

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

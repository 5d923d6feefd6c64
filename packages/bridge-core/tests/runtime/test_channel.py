import os
import stat
import struct
from pathlib import Path

import anyio
import pytest
from bridge_core.errors import SandboxStartError
from bridge_core.runtime._channel import ChannelDir, accept_channel


async def _alive() -> str | None:
    return None


def _connect(path: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(path) if len(str(path)) < 100 else path.name)
        client.sendall(struct.pack(">I", 7))


@pytest.fixture
def deep_root(tmp_path: Path) -> Path:
    # Deeper than a unix socket path may be (108 bytes).
    return tmp_path / ("d" * 60) / ("e" * 60)


async def test_channel_dir_and_socket_are_reachable_by_the_sandbox_uid(tmp_path: Path) -> None:
    channel = ChannelDir.create(tmp_path / "sandboxes", "box")
    listener = await channel.listen()
    try:
        assert stat.S_IMODE(channel.path.stat().st_mode) == 0o755
        assert stat.S_IMODE(channel.socket_path.stat().st_mode) == 0o666
    finally:
        await listener.aclose()
        channel.remove()
    assert not channel.path.exists()


async def test_one_connection_is_accepted_even_on_a_path_too_long_for_bind(
    deep_root: Path,
) -> None:
    channel = ChannelDir.create(deep_root, "box")
    assert len(str(channel.socket_path)) > 108
    listener = await channel.listen()
    cwd = os.getcwd()
    os.chdir(channel.path)  # the client side connects by relative path, as a sandbox would
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, _connect, channel.socket_path)
            with anyio.fail_after(5):
                stream = await accept_channel(
                    listener, exited=_alive, what="test sandbox", connect_timeout=5
                )
            assert await stream.receive() == struct.pack(">I", 7)
            await stream.aclose()
    finally:
        os.chdir(cwd)
        await listener.aclose()
        channel.remove()


async def test_a_sandbox_that_dies_before_connecting_fails_the_start_early(
    tmp_path: Path,
) -> None:
    channel = ChannelDir.create(tmp_path, "box")
    listener = await channel.listen()

    async def dead() -> str:
        return "exit status 3"

    try:
        with anyio.fail_after(5), pytest.raises(SandboxStartError, match="exit status 3"):
            await accept_channel(listener, exited=dead, what="test sandbox", connect_timeout=60)
    finally:
        await listener.aclose()


async def test_nothing_connecting_within_the_timeout_is_a_start_error(tmp_path: Path) -> None:
    channel = ChannelDir.create(tmp_path, "box")
    listener = await channel.listen()
    try:
        with pytest.raises(SandboxStartError, match="did not connect its channel within"):
            await accept_channel(listener, exited=_alive, what="t", connect_timeout=0.05)
    finally:
        await listener.aclose()

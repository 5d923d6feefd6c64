import os
import socket
import stat
import struct
from pathlib import Path

import anyio
import pytest
from bridge_core.errors import SandboxStartError
from bridge_core.runtime._channel import ChannelDir, accept_channel
from bridge_core.runtime._peer import PeerCredentials


async def _alive() -> str | None:
    return None


async def _anyone(peer: PeerCredentials) -> str | None:
    return None


def _connect(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(path) if len(str(path)) < 100 else path.name)
        client.sendall(struct.pack(">I", 7))


def _closed_without_a_byte(sock: socket.socket) -> bool:
    """EOF, or a reset (the bridge closed it with the peer's bytes unread), before any data."""
    sock.settimeout(5)
    try:
        return sock.recv(16) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def deep_root(tmp_path: Path) -> Path:
    # Deeper than a unix socket path may be (108 bytes).
    return tmp_path / ("d" * 60) / ("e" * 60)


async def test_only_the_container_dir_lets_the_sandbox_uid_pass_and_its_parents_are_private(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runtime" / "sandboxes"
    channel = ChannelDir.create(root, "box")
    listener = await channel.listen()
    try:
        assert stat.S_IMODE(channel.path.stat().st_mode) == 0o711
        assert stat.S_IMODE(channel.socket_path.stat().st_mode) == 0o666
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        assert stat.S_IMODE(root.parent.stat().st_mode) == 0o700
    finally:
        await listener.aclose()
        channel.remove()
    assert not channel.path.exists()


async def test_a_local_sandbox_channel_is_private_to_the_bridge_user(tmp_path: Path) -> None:
    channel = ChannelDir.create(tmp_path / "sandboxes", "box", shared=False)
    listener = await channel.listen()
    try:
        assert stat.S_IMODE(channel.path.stat().st_mode) == 0o700
        assert stat.S_IMODE(channel.socket_path.stat().st_mode) == 0o600
    finally:
        await listener.aclose()
        channel.remove()


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
                    listener,
                    exited=_alive,
                    check_peer=_anyone,
                    what="test sandbox",
                    connect_timeout=5,
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
            await accept_channel(
                listener, exited=dead, check_peer=_anyone, what="test sandbox", connect_timeout=60
            )
    finally:
        await listener.aclose()


async def test_nothing_connecting_within_the_timeout_is_a_start_error(tmp_path: Path) -> None:
    channel = ChannelDir.create(tmp_path, "box")
    listener = await channel.listen()
    try:
        with pytest.raises(SandboxStartError, match="did not connect its channel within"):
            await accept_channel(
                listener, exited=_alive, check_peer=_anyone, what="t", connect_timeout=0.05
            )
    finally:
        await listener.aclose()


async def test_a_refused_peer_is_closed_unread_and_the_sandbox_connecting_after_it_is_accepted(
    tmp_path: Path,
) -> None:
    channel = ChannelDir.create(tmp_path, "box")
    listener = await channel.listen()
    intruder = socket.socket(socket.AF_UNIX)
    sandbox = socket.socket(socket.AF_UNIX)
    seen: list[PeerCredentials] = []

    async def first_is_an_intruder(peer: PeerCredentials) -> str | None:
        seen.append(peer)
        return "not the sandbox" if len(seen) == 1 else None

    try:
        intruder.connect(str(channel.socket_path))
        intruder.sendall(b"forged")
        sandbox.connect(str(channel.socket_path))
        sandbox.sendall(b"real")
        with anyio.fail_after(5):
            stream = await accept_channel(
                listener,
                exited=_alive,
                check_peer=first_is_an_intruder,
                what="t",
                connect_timeout=5,
            )
        assert await stream.receive() == b"real"
        await stream.aclose()
        assert _closed_without_a_byte(intruder)
        assert seen[0] == PeerCredentials(os.getpid(), os.geteuid(), os.getegid())
    finally:
        intruder.close()
        sandbox.close()
        await listener.aclose()


async def test_a_refused_peer_is_named_when_the_sandbox_never_connects(tmp_path: Path) -> None:
    channel = ChannelDir.create(tmp_path, "box")
    listener = await channel.listen()

    async def nobody(peer: PeerCredentials) -> str | None:
        return "wrong pid namespace"

    with socket.socket(socket.AF_UNIX) as intruder:
        intruder.connect(str(channel.socket_path))
        try:
            with pytest.raises(SandboxStartError) as caught:
                await accept_channel(
                    listener, exited=_alive, check_peer=nobody, what="t", connect_timeout=0.5
                )
        finally:
            await listener.aclose()
    assert "refused 1 connection(s) from other processes" in str(caught.value)
    assert f"pid {os.getpid()}" in str(caught.value)
    assert "wrong pid namespace" in str(caught.value)

"""The channel over a container's attached stdio (``MCP_BRIDGE_CHANNEL=stdio``), on real podman.

It needs nothing shared with the bridge's machine: no bind mount, no container log. What code in
the sandbox writes to its stdout, by any route, must stay output and never reach the channel;
closing the bridge's end must end the sandbox (EOF on its stdin), and the sandbox ending must be
end of stream for the bridge.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.channel import Channel, ChannelClosed
from bridge_core.errors import SandboxStartError
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_protocol import Execute, Output, Result, Shutdown
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR

pytestmark = [pytest.mark.container, pytest.mark.engine]

_shared = importlib.import_module("integration-tests.conftest")
START_TIMEOUT = 60


@pytest.fixture
async def stdio_backend(tmp_path: Path) -> AsyncIterator[PodmanBackend]:
    """A podman backend whose sandboxes use the stdio channel (local, or the remote settings)."""
    settings = {**_shared.remote_settings(), "channel": "stdio"}
    backend = await PodmanBackend.connect(state_dir=tmp_path / "state", **settings)
    try:
        yield backend
    finally:
        await backend.aclose()


async def _start(backend: PodmanBackend, image: str, name: str) -> tuple[object, Channel]:
    spec = SandboxSpec(name=name, image=image, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT):
        sandbox = await backend.start(spec)
        channel = Channel(sandbox.stream)
        await channel.handshake(name)
    return sandbox, channel


async def _run(channel: Channel, code: str, execution_id: str) -> tuple[Result, str]:
    await channel.send(Execute(execution_id, code))
    printed = []
    with anyio.fail_after(60):
        while True:
            message = await channel.receive()
            if isinstance(message, Output):
                printed.append(message.text)
            elif isinstance(message, Result) and message.execution_id == execution_id:
                return message, "".join(printed)


STDOUT_ROUTES = """
import os, subprocess, sys
print("via print")
os.write(1, b"via fd 1\\n")
sys.__stdout__.write("via sys.__stdout__\\n"); sys.__stdout__.flush()
subprocess.run(["sh", "-c", "echo via a child; echo via /proc/self/fd/1 > /proc/self/fd/1"])
os.write(1, bytes([0xD9, 0xF7, 0x00, 0x00, 0x00, 0x08]) + b"garbage!")  # a frame-like prefix
"done"
"""


async def test_stdout_by_any_route_stays_output_and_the_channel_survives(
    stdio_backend: PodmanBackend, sandbox_image: str
) -> None:
    sandbox, channel = await _start(stdio_backend, sandbox_image, "stdio-routes")
    try:
        result, printed = await _run(channel, STDOUT_ROUTES, "e1")
        assert result.status == "ok", (result, printed)
        for route in ("via print", "via fd 1", "via sys.__stdout__", "via a child"):
            assert route in printed
        # The channel still frames correctly after all that.
        again, _ = await _run(channel, "6 * 7", "e2")
        assert again.value == "42"
    finally:
        await stdio_backend.kill(sandbox)  # type: ignore[arg-type]


async def test_nothing_of_the_bridge_machine_is_mounted_and_no_log_is_kept(
    stdio_backend: PodmanBackend, sandbox_image: str
) -> None:
    sandbox, channel = await _start(stdio_backend, sandbox_image, "stdio-mounts")
    try:
        # Files for the sandbox's code (full outputs) are copied in through the engine, never
        # a host directory mounted.
        shared = sandbox.shared_dir  # type: ignore[attr-defined]
        assert shared is None or shared.copy_in is not None
        attrs = await anyio.to_thread.run_sync(
            api.inspect,
            stdio_backend._client,
            sandbox.name,  # type: ignore[attr-defined]
        )
        binds = [m for m in attrs.get("Mounts") or () if m.get("Type") == "bind"]
        assert binds == []
        assert attrs["HostConfig"]["LogConfig"]["Type"] == "none"
        result, _ = await _run(
            channel,
            f"import os\nd = {SANDBOX_CHANNEL_DIR!r}\nos.listdir(d) if os.path.isdir(d) else []",
            "e1",
        )
        assert result.value == "[]"  # the image's empty mount point at most
    finally:
        await stdio_backend.kill(sandbox)  # type: ignore[arg-type]


async def test_closing_the_bridge_end_ends_the_sandbox(
    stdio_backend: PodmanBackend, sandbox_image: str
) -> None:
    sandbox, channel = await _start(stdio_backend, sandbox_image, "stdio-eof")
    await channel.aclose()  # the attach connection ends: conmon closes the sandbox's stdin
    with anyio.fail_after(60):
        while (await stdio_backend.status(sandbox)).running:  # type: ignore[arg-type]  # noqa: ASYNC110
            await anyio.sleep(0.05)
    state = await stdio_backend.status(sandbox)  # type: ignore[arg-type]
    # It left by itself with status 0 (or is already auto-removed): nobody killed it.
    assert (state.exit_code, state.oom_killed) in ((0, False), (None, False)), state
    await stdio_backend.kill(sandbox)  # type: ignore[arg-type]


async def test_a_sandbox_that_exits_before_speaking_fails_with_its_status_and_stderr(
    stdio_backend: PodmanBackend, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = api.create_kwargs

    def bad_arguments(*args: Any, **kwargs: Any) -> dict[str, Any]:
        created = real(*args, **kwargs)
        created["command"] = ["--stdio", "--no-such-option"]  # the client exits with status 2
        return created

    monkeypatch.setattr(api, "create_kwargs", bad_arguments)
    spec = SandboxSpec(name="stdio-dies", image=sandbox_image, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT), pytest.raises(SandboxStartError) as caught:
        await stdio_backend.start(spec)
    message = str(caught.value)
    assert "exited before speaking" in message
    assert "status 2" in message
    assert "unrecognized arguments: --no-such-option" in message  # its stderr, via the stream


async def test_the_sandbox_ending_is_end_of_stream(
    stdio_backend: PodmanBackend, sandbox_image: str
) -> None:
    sandbox, channel = await _start(stdio_backend, sandbox_image, "stdio-exit")
    try:
        await channel.send(Shutdown("test"))
        with anyio.fail_after(30):
            while True:
                try:
                    await channel.receive()
                except ChannelClosed:
                    break
    finally:
        await stdio_backend.kill(sandbox)  # type: ignore[arg-type]

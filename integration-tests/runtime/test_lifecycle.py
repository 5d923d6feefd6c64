"""Start, stop, kill, status, leftovers and cancellation of real podman sandboxes."""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream, Process
from bridge_core._ownership import Owner, current_owner, process_start_time
from bridge_core.channel import Channel, ChannelClosed
from bridge_core.errors import SandboxStartError
from bridge_core.runtime import _channel, _engine, _podman_api
from bridge_core.runtime._attach import AttachedStream
from bridge_core.runtime.base import OWNER_LABEL, RuntimeBackend, SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_protocol import Execute, Shutdown

from .conftest import START_TIMEOUT, Shell, StartShell

pytestmark = [pytest.mark.container, pytest.mark.engine]

# The shared conftest of integration-tests (a module named after its path under importlib mode).
_shared = importlib.import_module("integration-tests.conftest")


async def _container_names(runtime: str, *filters: str) -> set[str]:
    args = [runtime, "ps", "--all", "--format={{.Names}}", *(f"--filter={f}" for f in filters)]
    return set((await anyio.run_process(args)).stdout.decode().split())


async def _podman_names(*filters: str) -> set[str]:
    return await _container_names("podman", *filters)


def _sandbox_dirs(backend: PodmanBackend, tmp_path: Path) -> list[Path]:
    """What the host keeps for sandboxes (channel dirs, logs) in every owner's directory."""
    return list((tmp_path / "state" / "sandboxes").glob("*/*"))


def _sandbox_dir_exists(tmp_path: Path, name: str) -> bool:
    return any(tmp_path.glob(f"*/sandboxes/*/{name}*"))


def _cgroup_exists(name: str) -> bool:
    return Path(f"/sys/fs/cgroup/memory/mcp-bridge/{name}").exists()


async def test_variables_persist_between_executions_in_one_sandbox(start_shell: StartShell) -> None:
    shell = await start_shell()
    await shell.value("counter = 41\n0")
    assert await shell.value("counter += 1\ncounter") == 42


async def test_stopped_sandbox_leaves_no_container_directory_or_cgroup(
    start_shell: StartShell, tmp_path: Path
) -> None:
    shell = await start_shell()
    runtime, name = shell.backend.name, shell.sandbox.name
    assert name in await _container_names(runtime, f"name={name}")
    await shell.backend.stop(shell.sandbox, grace=1)
    assert await _container_names(runtime, f"name={name}") == set()
    assert not _sandbox_dir_exists(tmp_path, name)
    assert not _cgroup_exists(name)
    assert (await shell.backend.status(shell.sandbox)).error == "container is gone"


async def test_a_sandbox_that_exits_reports_its_exit_status(start_shell: StartShell) -> None:
    shell = await start_shell()
    await shell.channel.send(Shutdown("test"))
    with pytest.raises(ChannelClosed), anyio.fail_after(30):
        await shell.channel.receive()
    with anyio.fail_after(30):
        # The channel closes before the runtime has recorded the exit; nothing to wait on.
        while (state := await shell.backend.status(shell.sandbox)).running:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    assert (state.exit_code, state.oom_killed) == (0, False)


async def test_kill_removes_a_busy_sandbox_at_once(start_shell: StartShell) -> None:
    shell = await start_shell()
    await shell.channel.send(Execute("spin", "while True: pass"))
    await shell.backend.kill(shell.sandbox)
    runtime, name = shell.backend.name, shell.sandbox.name
    assert await _container_names(runtime, f"name={name}") == set()


async def _stand_in_bridge() -> Process:
    """A process to own sandboxes as if it were another bridge."""
    return await anyio.open_process([sys.executable, "-c", "import time; time.sleep(600)"])


async def test_leftovers_of_a_dead_bridge_are_removed_and_a_live_bridges_are_kept(
    podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path
) -> None:
    # Both owners are alive while their sandboxes start: another bridge on this host (e.g. a
    # concurrent test run) sweeping leftovers must not take them away mid-start.
    crashing, alive = await _stand_in_bridge(), await _stand_in_bridge()
    spec = SandboxSpec(name="leftover", image=sandbox_image, connect_timeout=60)
    started = {}
    try:
        for label, process in (("dead", crashing), ("alive", alive)):
            start_time = process_start_time(process.pid)
            assert start_time is not None
            podman_backend.owner = Owner(process.pid, start_time)
            started[label] = await podman_backend.start(spec)
        podman_backend.owner = current_owner()
        crashing.kill()
        await crashing.wait()

        # Any bridge on this host may be the one that removes a dead owner's container, so
        # the count is not asserted, only the outcome.
        await podman_backend.remove_leftovers()

        assert await _podman_names(f"name={started['dead'].name}") == set()
        assert await _podman_names(f"name={started['alive'].name}") == {started["alive"].name}
        assert (await podman_backend.status(started["alive"])).running
    finally:
        for process in (crashing, alive):
            if process.returncode is None:
                process.kill()
                await process.wait()
    # Now the second owner is dead as well: a new bridge's start-up removes its sandbox too.
    second = await PodmanBackend.connect(state_dir=tmp_path / "state")
    await second.aclose()
    assert await _podman_names(f"name={started['alive'].name}") == set()
    assert _sandbox_dirs(podman_backend, tmp_path) == []


async def test_cancelled_start_leaves_no_container_socket_or_directory(
    podman_backend: PodmanBackend,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Hold start() right where the container runs and its channel is awaited, then cancel.
    reached = anyio.Event()

    async def wait_forever(*args: object, **kwargs: object) -> None:
        reached.set()
        await anyio.sleep_forever()

    monkeypatch.setattr(_engine, "accept_channel", wait_forever)
    monkeypatch.setattr(AttachedStream, "wait_started", wait_forever)  # the stdio channel's
    ours = f"label={OWNER_LABEL}={podman_backend.owner.label}"
    spec = SandboxSpec(name="cancelled", image=sandbox_image)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(podman_backend.start, spec)
            await reached.wait()
            started = {name for name in await _podman_names(ours) if "cancelled" in name}
            assert started
            cancelled = time.time()
            tg.cancel_scope.cancel()
    # Killed on cancellation; podman's auto-removal deletes it.
    await _shared.wait_until_removed(started, since=cancelled)
    assert not any("cancelled" in name for name in await _podman_names(ours))
    assert _sandbox_dirs(podman_backend, tmp_path) == []


async def test_a_start_cancelled_as_its_sandbox_connects_leaves_no_container_or_directory(
    backend: RuntimeBackend,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The caller gives up just as the real sandbox's connection is accepted (a start deadline
    # passing during the peer check, the shutdown cancelling a pool refill): the cancellation
    # reaches the start after the accept, and the start must still undo everything.
    if isinstance(backend, PodmanBackend) and backend.channel == "stdio":
        pytest.skip("a socket-channel test: the stdio channel accepts nothing")
    accept = _channel.accept_channel  # the real one, which _engine calls
    caller = anyio.CancelScope()
    connections: list[ByteStream] = []

    async def accepted_as_the_caller_gives_up(*args: Any, **kwargs: Any) -> ByteStream:
        connection = await accept(*args, **kwargs)
        connections.append(connection)
        caller.cancel()
        return connection

    monkeypatch.setattr(_engine, "accept_channel", accepted_as_the_caller_gives_up)
    spec = SandboxSpec(name="giveup", image=sandbox_image, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT), caller:
        await backend.start(spec)
    cancelled = time.time()
    assert caller.cancelled_caught
    (connection,) = connections
    with pytest.raises(anyio.ClosedResourceError):
        await connection.send(b"\0")  # the bridge closed its end
    ours = f"label={OWNER_LABEL}={backend.owner.label}"  # type: ignore[attr-defined]
    started = {name for name in await _container_names(backend.name, ours) if "giveup" in name}
    await _shared.wait_until_removed(started, since=cancelled, runtime=backend.name)
    assert not any("giveup" in name for name in await _container_names(backend.name, ours))
    assert not _sandbox_dir_exists(tmp_path, "mcp-bridge-giveup")


async def test_a_sandbox_that_exits_before_connecting_fails_with_its_status_and_output(
    podman_backend: PodmanBackend,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if podman_backend.channel == "stdio":
        pytest.skip("a socket-channel test; test_stdio_channel.py has the stdio twin")
    monkeypatch.setattr(_channel, "SOCKET_MODE", 0o600)  # uid 65534 may not connect
    spec = SandboxSpec(name="refused", image=sandbox_image)
    with anyio.fail_after(60), pytest.raises(SandboxStartError) as caught:
        await podman_backend.start(spec)
    message = str(caught.value)
    assert "exited before connecting its channel" in message
    assert "status 1" in message
    assert "Permission denied" in message  # the sandbox client's own output
    assert _sandbox_dirs(podman_backend, tmp_path) == []


async def test_a_missing_image_is_a_start_error_naming_it(
    podman_backend: PodmanBackend, tmp_path: Path
) -> None:
    spec = SandboxSpec(name="noimage", image="localhost/mcp-bridge-no-such-image:0")
    with pytest.raises(SandboxStartError, match="mcp-bridge-no-such-image"):
        await podman_backend.start(spec)
    assert _sandbox_dirs(podman_backend, tmp_path) == []


async def test_a_sandbox_starts_from_the_checked_image_id_when_the_name_no_longer_holds_it(
    backend: RuntimeBackend, sandbox_image: str
) -> None:
    # Issue 34: the image is checked under its name before the first sandbox; a name moved
    # after that check (here: to no image at all) must not change what a sandbox starts from.
    listed = await anyio.run_process(
        [backend.name, "image", "inspect", "--format={{.Id}}", sandbox_image]
    )
    checked = "sha256:" + listed.stdout.decode().strip().removeprefix("sha256:")
    moved = f"localhost/mcp-bridge-moved-{os.getpid()}:0"
    spec = SandboxSpec(name="moved", image=moved, image_id=checked, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT):
        sandbox = await backend.start(spec)
    try:
        channel = Channel(sandbox.stream)
        with anyio.fail_after(START_TIMEOUT):
            await channel.handshake(spec.name)
            assert await Shell(backend, sandbox, channel).value("6 * 7") == 42
    finally:
        await backend.kill(sandbox)


async def _image_of(container: str) -> str:
    inspected = await anyio.run_process(
        ["podman", "container", "inspect", "--format={{.Image}}", container]
    )
    return "sha256:" + inspected.stdout.decode().strip().removeprefix("sha256:")


async def test_a_name_retagged_to_another_image_after_the_check_still_starts_the_checked_one(
    podman_backend: PodmanBackend, sandbox_image: str
) -> None:
    # Issue 34 point 9: checked under its name, then the name moved to another image (one label
    # more: another ID). The sandbox runs the checked ID; started by name, it would run the other.
    listed = await anyio.run_process(
        ["podman", "image", "inspect", "--format={{.Id}}", sandbox_image]
    )
    checked = "sha256:" + listed.stdout.decode().strip().removeprefix("sha256:")
    retagged = f"localhost/mcp-bridge-retagged-{os.getpid()}:0"
    await anyio.run_process(
        ["podman", "build", "--network=none", "--label", "retagged=1", "-t", retagged, "-"],
        input=f"FROM {sandbox_image}\n".encode(),
    )
    try:
        other = await anyio.run_process(
            ["podman", "image", "inspect", "--format={{.Id}}", retagged]
        )
        assert "sha256:" + other.stdout.decode().strip().removeprefix("sha256:") != checked
        started = []
        for image_id in (checked, None):
            spec = SandboxSpec(
                name="retagged", image=retagged, image_id=image_id, connect_timeout=START_TIMEOUT
            )
            with anyio.fail_after(START_TIMEOUT):
                sandbox = await podman_backend.start(spec)
            try:
                started.append(await _image_of(sandbox.name))
            finally:
                await podman_backend.kill(sandbox)
        assert started[0] == checked
        assert started[1] != checked  # by name: what the name holds now
    finally:
        # By its full name: `podman untag IMAGE` alone removes every tag of the image.
        await anyio.run_process(["podman", "rmi", retagged], check=False)


async def test_a_private_api_service_is_started_when_none_answers_and_stopped_on_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        _podman_api, "socket_candidates", lambda env, euid: [f"unix://{tmp_path}/none.sock"]
    )
    backend = await PodmanBackend.connect(state_dir=tmp_path / "private")
    try:
        assert backend.url == f"unix://{tmp_path}/private/podman-{os.getpid()}.sock"
        info = await backend.info()
        assert info.backend == "podman"
        assert "private service" in info.detail
    finally:
        await backend.aclose()
    assert not (tmp_path / "private" / f"podman-{os.getpid()}.sock").exists()


async def test_closing_the_backend_kills_sandboxes_still_running(
    podman_backend: PodmanBackend, sandbox_image: str
) -> None:
    spec = SandboxSpec(name="unstopped", image=sandbox_image, connect_timeout=60)
    sandbox = await podman_backend.start(spec)
    closed = time.time()
    await podman_backend.aclose()
    # Killed at once; podman's auto-removal deletes it (the backend does not wait for that).
    await _shared.wait_until_removed({sandbox.name}, since=closed)
    assert await _podman_names(f"name={sandbox.name}") == set()

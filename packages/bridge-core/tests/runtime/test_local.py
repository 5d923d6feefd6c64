"""The local backend with the real sandbox client as a host subprocess (no container)."""

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from bridge_core.channel import Channel
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.local import LocalBackend, LocalSandbox
from bridge_protocol import Execute, Result

SPEC = SandboxSpec(name="local-test", image="unused", connect_timeout=30)


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(state_dir=tmp_path)
    try:
        yield backend
    finally:
        await backend.aclose()
    assert list((tmp_path / "sandboxes").iterdir()) == []


async def _run(channel: Channel, code: str, execution_id: str) -> Result:
    await channel.send(Execute(execution_id, code))
    while True:
        message = await channel.receive()
        if isinstance(message, Result) and message.execution_id == execution_id:
            return message


def _process_gone(pid: int) -> bool:
    """Gone or a zombie (dead, waiting for whoever inherited it to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _pid_announced(pid_file: Path) -> bool:
    return pid_file.exists() and bool(pid_file.read_text().strip())


async def test_local_sandbox_runs_code_and_keeps_its_namespace(backend: LocalBackend) -> None:
    with anyio.fail_after(30):
        sandbox = await backend.start(SPEC)
        channel = Channel(sandbox.stream)
        await channel.handshake("local-test")
        first = await _run(channel, "x = 40 + 2", "e1")
        second = await _run(channel, "x", "e2")
    assert first.status == "ok"
    assert second.value == "42"
    assert (await backend.status(sandbox)).running
    await backend.stop(sandbox, grace=2)


async def test_stop_ends_the_whole_process_group(backend: LocalBackend) -> None:
    with anyio.fail_after(30):
        sandbox = await backend.start(SPEC)
        assert isinstance(sandbox, LocalSandbox)
        channel = Channel(sandbox.stream)
        await channel.handshake("local-test")
        spawned = await _run(
            channel,
            "import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "child.pid",
            "e1",
        )
        assert spawned.value is not None
        grandchild = int(spawned.value)
        await backend.stop(sandbox, grace=1)
    assert sandbox.process.returncode is not None
    with anyio.fail_after(5):
        # SIGKILL is delivered asynchronously; nothing to wait on for a non-child process.
        while not _process_gone(grandchild):  # noqa: ASYNC110
            await anyio.sleep(0.01)
    assert not (await backend.status(sandbox)).running


async def test_kill_reports_the_signal_like_a_container_exit_code(backend: LocalBackend) -> None:
    with anyio.fail_after(30):
        sandbox = await backend.start(SPEC)
        assert isinstance(sandbox, LocalSandbox)
        await backend.kill(sandbox)
    assert sandbox.process.returncode == -9


async def test_cancelled_start_leaves_no_process_and_no_directory(tmp_path: Path) -> None:
    # A "python" that never connects, so the cancellation lands while start() waits for it.
    pid_file = tmp_path / "pid"
    fake_python = tmp_path / "never-connects"
    fake_python.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    fake_python.chmod(0o755)
    backend = LocalBackend(state_dir=tmp_path / "state", python=str(fake_python))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(backend.start, SPEC)
            # The child announces itself through the file; bounded by fail_after.
            while not _pid_announced(pid_file):  # noqa: ASYNC110
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert _process_gone(int(pid_file.read_text()))
    assert list((tmp_path / "state" / "sandboxes").iterdir()) == []

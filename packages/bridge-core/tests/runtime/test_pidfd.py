import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
from bridge_core.runtime._pidfd import HeldInit, open_init, send_kill


def test_a_process_whose_cgroup_does_not_name_the_container_is_refused() -> None:
    assert open_init(os.getpid(), "f" * 64) is None


def test_a_pid_that_does_not_exist_is_refused() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert open_init(child.pid, "anything") is None
    assert open_init(0, "anything") is None


def test_a_matching_process_is_held_and_killed_through_its_pidfd(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # A stand-in /proc whose cgroup file names the "container" the way podman's does.
        fake = tmp_path / str(child.pid)
        fake.mkdir()
        (fake / "cgroup").write_text("0::/mcp-bridge/box/libpod-abc123\n")
        fd = open_init(child.pid, "abc123", proc=tmp_path)
        assert fd is not None
        try:
            assert send_kill(fd)
            assert child.wait(timeout=20) == -signal.SIGKILL
            assert send_kill(fd)  # dead already: still "dead or dying"
        finally:
            os.close(fd)
    finally:
        child.kill()
        child.wait()


async def test_a_held_init_tells_when_its_process_exits() -> None:
    async with await anyio.open_process([sys.executable, "-c", "input()"]) as child:
        held = HeldInit(os.pidfd_open(child.pid), child.pid)
        try:
            assert held.alive()
            with anyio.move_on_after(0.2) as waited:
                await held.exited()
            assert waited.cancelled_caught  # still running: the wait goes on
            assert child.stdin is not None
            await child.stdin.aclose()
            with anyio.fail_after(20):
                await held.exited()
            assert not held.alive()
        finally:
            os.close(held.fd)

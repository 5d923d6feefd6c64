"""A podman API reached at a non-unix URL (``CONTAINER_HOST=tcp://...``, as a remote or forwarded
service is) serves sandboxes when it runs containers on this kernel, without the host-only extras.

The checks that refuse a runtime in a VM or on another machine compare kernels: this test proves
they let a same-kernel service through whatever its URL, and that nothing on that path assumes a
unix socket: OOM tracking (a host cgroup path) is off, and the bridge's seccomp profile, a file
the service may not see, is not passed; the sandbox runs under a profile named in the settings
(``MCP_BRIDGE_SECURITY_OPT=seccomp=PATH``, as a user of a remote service names one on it).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.streams.text import TextReceiveStream
from bridge_core.channel import Channel
from bridge_core.runtime import detect_runtime
from bridge_core.runtime._seccomp import write_profile
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_protocol import Execute, Result

pytestmark = [pytest.mark.container, pytest.mark.engine]

_LISTENING = re.compile(r'API service listening on \\?"([0-9.]+:[0-9]+)\\?"')
SERVICE_TIMEOUT = 60  # seconds for the service to listen (first use migrates storage)


@pytest.fixture
async def tcp_service() -> AsyncIterator[str]:
    """A ``podman system service`` on an ephemeral loopback TCP port; its URL."""
    podman = shutil.which("podman")
    assert podman is not None
    # Port 0: the kernel picks a free port, and podman's log line names it (no race, no poll).
    command = [podman, "--log-level=info", "system", "service", "--time=0", "tcp://127.0.0.1:0"]
    async with await anyio.open_process(command) as process, anyio.create_task_group() as tg:
        assert process.stderr is not None
        lines = TextReceiveStream(process.stderr)
        address = None
        with anyio.fail_after(SERVICE_TIMEOUT):
            async for chunk in lines:
                if found := _LISTENING.search(chunk):
                    address = found.group(1)
                    break
        assert address is not None, "podman system service exited before listening"

        async def drain() -> None:  # a full pipe would block the service's logging
            async for _ in lines:
                pass

        tg.start_soon(drain)
        try:
            yield f"tcp://{address}"
        finally:
            process.terminate()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
            tg.cancel_scope.cancel()


async def test_a_same_kernel_service_at_a_tcp_url_runs_sandboxes(
    tcp_service: str, sandbox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTAINER_HOST", tcp_service)
    backend = await detect_runtime("podman", state_dir=tmp_path)
    assert isinstance(backend, PodmanBackend)
    try:
        assert backend.url == tcp_service
        assert backend.seccomp is None
        assert "not on this machine" in backend.seccomp_problem
        assert backend.track_oom is False
        profile = write_profile(tmp_path / "profile")
        spec = SandboxSpec(
            name="tcp-url",
            image=sandbox_image,
            security_opt=(f"seccomp={profile.path}",),
            connect_timeout=SERVICE_TIMEOUT,
        )
        with anyio.fail_after(SERVICE_TIMEOUT):
            sandbox = await backend.start(spec)
            try:
                channel = Channel(sandbox.stream)
                await channel.handshake(spec.name)
                await channel.send(Execute("e1", "6 * 7"))
                while not isinstance(message := await channel.receive(), Result):
                    pass
            finally:
                await backend.kill(sandbox)
        assert message.status == "ok"
        assert message.value == "42"
    finally:
        await backend.aclose()

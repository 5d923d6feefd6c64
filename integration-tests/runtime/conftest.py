"""Fixtures of the runtime tests: a backend per runtime, and sandboxes spoken to over the real
channel with the real protocol (``Hello``/``Welcome``, ``Execute`` → ``Result``)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.channel import Channel
from bridge_core.runtime.base import (
    OWNER_LABEL,
    RuntimeBackend,
    Sandbox,
    SandboxLimits,
    SandboxSpec,
)
from bridge_core.runtime.docker import DockerBackend
from bridge_core.runtime.podman import PodmanBackend
from bridge_protocol import Execute, Output, Result

_shared = importlib.import_module("integration-tests.conftest")
require_docker = _shared.require_docker

START_TIMEOUT = 60  # seconds: first start after an image build also sets up storage


@dataclass
class Shell:
    """A started sandbox and its handshaken channel; :meth:`run` executes code in it."""

    backend: RuntimeBackend
    sandbox: Sandbox
    channel: Channel
    _count: int = field(default=0)

    async def execute(self, code: str) -> tuple[Result, str]:
        """Run ``code``; return its result and the stdout+stderr it printed."""
        self._count += 1
        execution_id = f"t{self._count}"
        await self.channel.send(Execute(execution_id, code))
        printed = []
        while True:
            message = await self.channel.receive()
            if isinstance(message, Output):
                printed.append(message.text)
            elif isinstance(message, Result) and message.execution_id == execution_id:
                return message, "".join(printed)

    async def value(self, code: str) -> Any:
        """Run ``code`` and return the Python value of its trailing expression."""
        result, printed = await self.execute(code)
        assert result.status == "ok", (result, printed)
        assert result.value is not None, (result, printed)
        return ast.literal_eval(result.value)


StartShell = Callable[..., Awaitable[Shell]]


def _docker_has_image(image: str) -> bool:
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=30)
    return found.returncode == 0


async def _docker_containers(owner_label: str) -> set[str]:
    with anyio.fail_after(30):
        listed = await anyio.run_process(
            [
                "docker",
                "ps",
                "--all",
                "--format={{.Names}}",
                f"--filter=label={OWNER_LABEL}=" + owner_label,
            ]
        )
    return set(listed.stdout.decode().split())


@pytest.fixture(params=["podman", pytest.param("docker", marks=pytest.mark.docker)])
async def backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sandbox_image: str,
    podman_backend: PodmanBackend,
) -> AsyncIterator[RuntimeBackend]:
    """Each runtime in turn: podman always (container tests), docker where a daemon answers
    (required with ``BRIDGE_REQUIRE_DOCKER=1``); no container of it may outlive the test."""
    if request.param == "podman":
        yield podman_backend
        return
    if not _docker_has_image(sandbox_image):
        require_docker(
            f"{sandbox_image} is not in docker's image store (scripts/prepare-docker loads it)"
        )
    docker = await DockerBackend.connect(state_dir=tmp_path / "docker-state")
    try:
        yield docker
    finally:
        closed = time.time()
        await docker.aclose()
    # Sandboxes are auto-removed once killed, which docker may finish a moment later.
    await _shared.wait_until_removed(
        await _docker_containers(docker.owner.label), since=closed, runtime="docker"
    )
    left = await _docker_containers(docker.owner.label)
    for name in left:  # clean up first, then fail: a failed test must not leak either
        await anyio.run_process(["docker", "rm", "--force", name], check=False)
    assert not left, f"containers left behind by the test: {sorted(left)}"


@pytest.fixture
async def start_shell(
    backend: RuntimeBackend, sandbox_image: str, request: pytest.FixtureRequest
) -> AsyncIterator[StartShell]:
    """``await start_shell(**limits)`` → a :class:`Shell`; every sandbox is killed afterwards."""
    started: list[Sandbox] = []

    async def start(**limits: Any) -> Shell:
        spec = SandboxSpec(
            name=f"rt-{request.node.name[:20]}",
            image=sandbox_image,
            limits=SandboxLimits(**limits),
            connect_timeout=START_TIMEOUT,
        )
        with anyio.fail_after(START_TIMEOUT):
            sandbox = await backend.start(spec)
            started.append(sandbox)
            channel = Channel(sandbox.stream)
            await channel.handshake(spec.name)
        return Shell(backend, sandbox, channel)

    try:
        yield start
    finally:
        for sandbox in started:
            await backend.kill(sandbox)

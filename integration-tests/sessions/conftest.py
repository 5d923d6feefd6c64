"""Fixtures of the session tests: a real SessionManager over real podman and the real image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.gateway import NullGateway
from bridge_core.runtime.base import OWNER_LABEL, SandboxLimits
from bridge_core.runtime.podman import PodmanBackend
from bridge_core.sessions import SessionConfig, SessionManager

MakeManager = Callable[..., SessionManager]

MiB = 1024 * 1024


@pytest.fixture
def make_manager(podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path) -> MakeManager:
    """``make_manager(**config)`` → an unentered SessionManager on the test's podman backend."""

    def make(**overrides: Any) -> SessionManager:
        settings: dict[str, Any] = {
            "image": sandbox_image,
            "pool_size": 0,
            "interrupt_grace": 1.0,
            "limits": SandboxLimits(memory_bytes=256 * MiB),
        }
        settings.update(overrides)
        return SessionManager(
            SessionConfig(**settings),
            runtime=podman_backend,
            gateway=NullGateway(),
            state_dir=tmp_path / "sessions",
        )

    return make


async def our_containers(backend: PodmanBackend) -> set[str]:
    """Names of the containers (running or not) this test's backend created."""
    with anyio.fail_after(30):
        listed = await anyio.run_process(
            [
                "podman",
                "ps",
                "--all",
                "--format={{.Names}}",
                f"--filter=label={OWNER_LABEL}={backend.owner.label}",
            ]
        )
    return set(listed.stdout.decode().split())

"""Our test MCP servers (integration-tests/servers/: the probe and the hostile one) as real
subprocesses."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from bridge_core.servers import ServerSpec

SERVERS = Path(__file__).resolve().parents[4] / "integration-tests" / "servers"
PROBE_SERVER = SERVERS / "probe_server.py"
HOSTILE_SERVER = SERVERS / "hostile_server.py"

ProbeFactory = Callable[..., ServerSpec]


@pytest.fixture
def probe() -> ProbeFactory:
    """Build a spec for the probe server: ``probe(*args, name=..., env=...)``."""

    def make(*args: str, name: str = "probe", env: dict[str, str] | None = None) -> ServerSpec:
        return ServerSpec(
            name=name,
            transport="stdio",
            command=sys.executable,
            args=(str(PROBE_SERVER), *args),
            env=env or {},
        )

    return make


@pytest.fixture
def hostile() -> ProbeFactory:
    """Build a spec for the hostile server: ``hostile(*args, name=...)``."""

    def make(*args: str, name: str = "hostile") -> ServerSpec:
        return ServerSpec(
            name=name, transport="stdio", command=sys.executable, args=(str(HOSTILE_SERVER), *args)
        )

    return make


class FakeClock:
    """A clock the test moves by hand, for backoff and cooldown without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def exited(pid: int) -> bool:
    """Wait (bounded) until ``pid`` has exited: a pidfd turns readable at exit (zombie included,
    as a killed grandchild waits for init to reap it)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        with anyio.move_on_after(10):
            await anyio.wait_readable(fd)
            return True
        return False
    finally:
        os.close(fd)

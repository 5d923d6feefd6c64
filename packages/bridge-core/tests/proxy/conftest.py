"""Our test MCP servers (integration-tests/servers/: the probe and the hostile one) as real
subprocesses."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

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

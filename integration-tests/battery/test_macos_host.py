"""The bridge as it runs on a Mac, for real on Linux: the platform faked as ``darwin``.

On macOS the engine is podman machine's Linux VM, which the bridge reaches over ssh with the
stdio channel, as any remote engine. Here the real bridge process (``python -m
mcp_code_execution_mode`` with one function replaced: ``host_system``, where the bridge reads its
operating system) is pointed at the podman over ssh that ``scripts/prepare-remote`` runs on this
machine, configured the way docs/platforms.md tells a Mac user to (the URL in the client's
environment, identity and known_hosts in bridge.toml):

* run_python runs in a sandbox on that engine, over the stdio channel (nothing of this machine
  mounted at /run/bridge), and its state carries to the next call;
* without an ssh URL the same bridge starts and answers run_python with the settings to use,
  instead of starting a sandbox it could not reach.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import BridgeClient, bridge_env, bridge_pids, code_text, containers_left

pytestmark = [pytest.mark.container, pytest.mark.engine]

_shared = importlib.import_module("integration-tests.conftest")
REPO = Path(__file__).resolve().parents[2]
PREPARED = REPO / ".state" / "remote" / "env"

AS_DARWIN = (
    "import runpy\n"
    "from bridge_core.runtime import _locality\n"
    "_locality.host_system = lambda: 'darwin'\n"
    "runpy.run_module('mcp_code_execution_mode', run_name='__main__', alter_sys=True)\n"
)
"""``python -c`` code: the bridge's own entry point, on a platform that says it is macOS."""


def _remote_env() -> dict[str, str]:
    """The ssh engine's settings: from the environment, else what scripts/prepare-remote wrote."""
    if _shared.TEST_RUNTIME != "podman":
        pytest.skip("podman machine is podman: nothing to learn on the docker leg")
    found = {k: v for k in _shared.REMOTE_VARIABLES if (v := os.environ.get(k))}
    if not found.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://") and PREPARED.is_file():
        found = _shared._read_env_file(PREPARED)
    if not found.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://"):
        message = "no ssh engine: run scripts/prepare-remote (as root) first"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _write_config(work: Path, settings: str) -> Path:
    """An empty servers file and ``settings`` as the bridge.toml beside it; the servers file."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "servers.json"
    config.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    (work / "bridge.toml").write_text(settings, encoding="utf-8")
    return config


@asynccontextmanager
async def open_darwin_bridge(
    work: Path, env: Mapping[str, str], settings: str = ""
) -> AsyncIterator[BridgeClient]:
    """The bridge, believing it runs on macOS, with ``settings`` as its bridge.toml; afterwards
    no container of it may be left."""
    config = await anyio.to_thread.run_sync(_write_config, work, settings)
    state_dir = work / "state"
    environment = bridge_env({"MCP_BRIDGE_CONFIG": str(config), **env})
    for name in (*_shared.REMOTE_VARIABLES, "CONTAINER_HOST"):  # only what this test gives
        if name not in env:
            environment.pop(name, None)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", AS_DARWIN, "--state-dir", str(state_dir)],
        env=environment,
    )
    pids: list[int] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
        pids = bridge_pids(state_dir)
        yield BridgeClient(session, state_dir)
        closing = time.time()
    for pid in pids:
        assert await containers_left(pid, since=closing) == [], f"bridge {pid} left containers"


async def test_on_macos_run_python_runs_on_podman_machine_over_ssh_with_the_stdio_channel(
    tmp_path: Path,
) -> None:
    remote = _remote_env()
    settings = (
        "[engine]\n"
        f"identity = {json.dumps(remote['MCP_BRIDGE_RUNTIME_IDENTITY'])}\n"
        f"known_hosts = {json.dumps(remote['MCP_BRIDGE_RUNTIME_KNOWN_HOSTS'])}\n"
    )
    env = {"MCP_BRIDGE_RUNTIME_URL": remote["MCP_BRIDGE_RUNTIME_URL"], "MCP_BRIDGE_POOL_SIZE": "0"}
    async with open_darwin_bridge(tmp_path, env, settings) as bridge:
        first = await bridge.run(
            "mounts = [line.split() for line in open('/proc/mounts')]\n"
            "kept = 41\n"
            "print([m[2] for m in mounts if m[1] == '/run/bridge'])"
        )
        second = await bridge.run("kept + 1")
        log = await anyio.Path(bridge.state_dir / "logs" / "bridge.log").read_text()
    assert "the bridge runs on darwin" in log  # the fake took: this was the macOS path
    assert first.is_error is False, first
    # The stdio channel's own tmpfs: no directory of the bridge's machine is bind-mounted there.
    assert code_text(first) == "['tmpfs']"
    assert second.is_error is False, second
    assert second.content[0].text.endswith("42")


async def test_on_macos_without_an_ssh_engine_run_python_says_what_to_set(
    tmp_path: Path,
) -> None:
    if _shared.TEST_RUNTIME != "podman":
        pytest.skip("podman machine is podman: nothing to learn on the docker leg")
    async with open_darwin_bridge(tmp_path, {}) as bridge:
        result = await bridge.run("1 + 1")
    assert result.is_error is True
    assert result.structured_content["status"] == "unavailable"
    text = " ".join(block.text for block in result.content if block.type == "text")
    assert "podman system connection list --format json" in text
    assert "MCP_BRIDGE_RUNTIME_URL" in text

"""Shared fixtures of the battery (hostile code, host-side faults, chaos).

Everything here drives the real bridge — ``python -m mcp_code_execution_mode`` over stdio with the
official MCP SDK client — through the helpers of ``integration-tests/server/conftest.py``, which
are imported, not copied:

* :func:`open_bridge` — start a bridge (private state dir, our servers file, extra env) and yield
  a connected :class:`BridgeClient`; afterwards no container of that bridge may be left.
* :func:`open_http_bridge` — the same bridge serving streamable HTTP (``serve --http``); the
  :class:`HttpBridge` it yields opens SDK client sessions (with a bearer token if given).
* :func:`text_of` — the first text block of a ``CallToolResult``.
* :func:`code_text` / :func:`bridge_text` — the code's block and the bridge's block of a
  run_python result (what the code printed and returned; the status line and notices).
* :func:`host_marker` — a path on the host that sandbox code names in an escape attempt; the
  test asserts it was never created.

Other battery modules may add fixtures here: keep additions small, documented and independent.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

# The server tests' conftest holds the bridge-over-stdio helpers. Under --import-mode=importlib it
# is a module named after its path below the rootdir; a relative import from a parent package is
# banned by the lint rules (TID252) and the hyphenated folder cannot be imported absolutely.
_server = importlib.import_module("integration-tests.server.conftest")

BridgeClient = _server.BridgeClient
CALL_TIMEOUT: float = _server.CALL_TIMEOUT
bridge_env = _server.bridge_env
bridge_pids = _server.bridge_pids
containers_left = _server.containers_left
bridge_text = _server.bridge_text
code_text = _server.code_text
HttpBridge = _server.HttpBridge
open_bridge = _server.open_bridge
open_http_bridge = _server.open_http_bridge
owned_containers = _server.owned_containers
TEST_RUNTIME: str = _server._shared.TEST_RUNTIME
RUNTIME_INIT = {"podman": "/run/podman-init", "docker": "/sbin/docker-init"}[TEST_RUNTIME]
"""The init process the runtime puts at PID 1 of a sandbox (``--init``)."""

__all__ = [
    "CALL_TIMEOUT",
    "RUNTIME_INIT",
    "TEST_RUNTIME",
    "BridgeClient",
    "HttpBridge",
    "bridge_env",
    "bridge_pids",
    "containers_left",
    "bridge_text",
    "code_text",
    "host_marker",
    "open_bridge",
    "open_http_bridge",
    "owned_containers",
    "stdout_of",
    "payload_of",
    "text_of",
]


def sandboxes_over_stdio() -> bool:
    """Whether the bridges these tests start talk to their sandboxes over the container's stdio
    (a remote engine, or ``MCP_BRIDGE_CHANNEL=stdio``): no channel directory is shared then."""
    env = os.environ
    return env.get("MCP_BRIDGE_CHANNEL") == "stdio" or bool(env.get("MCP_BRIDGE_RUNTIME_URL"))


def stdout_of(result: types.CallToolResult) -> str:
    """What the code printed to stdout: its block up to the ``[stderr]`` (or other) section."""
    text = code_text(result)
    if text.startswith(("[stderr]\n", "[traceback]\n")):
        return ""
    for section in ("\n[stderr]\n", "\n[result] ", "\n[traceback]\n"):
        text = text.split(section, 1)[0]
    return text


def text_of(result: types.CallToolResult) -> str:
    """The first content block of ``result``, which must be text."""
    block = result.content[0]
    assert isinstance(block, types.TextContent), f"first block is not text: {block!r}"
    return block.text


def payload_of(result: types.CallToolResult) -> dict[str, Any]:
    """The structured content of ``result`` (the run_python result object)."""
    assert result.structured_content is not None, f"no structured content: {result!r}"
    return dict(result.structured_content)


@pytest.fixture
def host_marker(tmp_path: Path) -> Path:
    """A path on the host that must never come into existence (sandbox code tries to write it)."""
    marker = tmp_path / "escaped-marker"
    assert not marker.exists()
    return marker


def peak_rss_mib(pid: int) -> float:
    """The peak resident memory of process ``pid`` (the bridge), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise LookupError(f"no VmHWM for {pid}")

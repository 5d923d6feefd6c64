"""The ``doctor`` and ``demo`` commands, run as a user would, against the real runtime."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import bridge_env, real_servers

TEST_RUNTIME = importlib.import_module("integration-tests.conftest").TEST_RUNTIME

pytestmark = pytest.mark.container


def _run(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip


def test_doctor_reports_runtime_image_limits_and_each_server(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = {
        "time": real_servers(third_party, tmp_path)["time"],
        "broken": {"command": "/nonexistent/mcp-server"},
    }
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    env = bridge_env({"MCP_BRIDGE_CONFIG": str(config), "MCP_BRIDGE_STATE_DIR": str(tmp_path)})
    done = _run("doctor", env=env)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert f"[ok]   runtime: {TEST_RUNTIME}" in out  # the engine under test
    assert f"[ok]   image: {sandbox_image}" in out
    assert "[ok]   sandbox: ran code" in out
    assert "limits" in out
    assert "[ok]   seccomp: bridge profile sha256:" in out
    assert (
        "[ok]   seccomp in the sandbox: mode 2 (filtering); creating a user namespace: EPERM, "
        "an AF_VSOCK socket: EAFNOSUPPORT"
    ) in out
    assert "[ok]   server 'time': starts, lists 2 tool(s)" in out
    assert "[warn] server 'broken'" in out


def test_doctor_fails_with_the_fix_when_the_image_is_missing(tmp_path: Path) -> None:
    env = bridge_env(
        {"MCP_BRIDGE_IMAGE": "localhost/no-such-image:0", "MCP_BRIDGE_STATE_DIR": str(tmp_path)}
    )
    done = _run("doctor", env=env)
    assert done.returncode == 1
    assert "[FAIL] image: localhost/no-such-image:0 is not present" in done.stdout
    build = "mcp-code-execution-mode image build --tag localhost/no-such-image:0"
    assert f"fix: build it: `{build}`" in done.stdout


def test_demo_runs_every_step_against_real_servers(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    env = bridge_env({"MCP_TEST_SERVERS_DIR": third_party["MCP_TEST_SERVERS_DIR"]})
    done = _run("demo", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "demo finished: all steps ok" in done.stdout
    assert "(skipped" not in done.stdout
    assert "revenue by region: {'north': 405, 'south': 280, 'west': 600}; best: west" in done.stdout

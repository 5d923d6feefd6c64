"""The released artefacts work for someone who never saw the repository.

The release folder (``scripts/release.py build``: our wheels, sdists and the wheelhouse of their
third-party dependencies) installs into a fresh venv with pip and NO package index; then
``python -m mcp_code_execution_mode --help`` runs from it, and it serves a real MCP client's
``run_python`` call in a real podman sandbox. Nothing from the checkout is importable in the venv:
the bridge runs from the installed wheels only. (pipx and ``uv tool``: test_install.py.)
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import time
import venv
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core.runtime.base import OWNER_LABEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import stranger_env

pytestmark = pytest.mark.container

REPO = Path(__file__).resolve().parents[2]
SIBLINGS = (
    "mcp-bridge-protocol",
    "mcp-bridge-core",
    "mcp-bridge-image",
    "mcp-code-execution-mode",
)
INSTALL_TIMEOUT = 600


def _run(
    command: list[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=timeout, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def installed_python(release_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding the server as installed from the release folder."""
    work = tmp_path_factory.mktemp("wheels")
    venv.create(work / "venv", with_pip=True, clear=True)
    python = work / "venv" / "bin" / "python"
    # The documented pip route: the folder alone, every connection refused, so no index (for our
    # names or any other) can take part.
    installed = _run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
         str(release_dist), "mcp-code-execution-mode"],
        timeout=INSTALL_TIMEOUT,
        env=stranger_env(work, offline=True),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    return python


def test_installed_wheels_come_from_the_built_folder_not_the_checkout(
    installed_python: Path,
) -> None:
    code = (
        "import json, importlib.metadata as m, mcp_code_execution_mode as s; "
        "print(json.dumps({'file': s.__file__, 'versions': "
        f"{{n: m.version(n) for n in {SIBLINGS!r}}}}}))"
    )
    probe = _run(
        [str(installed_python), "-I", "-c", code],
        cwd=installed_python.parents[2],
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert "site-packages" in found["file"]
    assert set(found["versions"].values()) == {"0.1.0"}


def test_installed_server_prints_its_help(installed_python: Path) -> None:
    helped = _run(
        [str(installed_python), "-m", "mcp_code_execution_mode", "--help"],
        cwd=installed_python.parents[2],
        timeout=120,
    )
    assert helped.returncode == 0, helped.stderr
    assert "usage:" in helped.stdout
    assert "serve" in helped.stdout  # the subcommands of the installed CLI are listed


# The shared conftest of integration-tests (a module named after its path under importlib mode).
_shared = importlib.import_module("integration-tests.conftest")


def _owned_containers(pid: int) -> list[str]:
    """Containers (running or not) whose owner label names bridge process ``pid``."""
    listed = _run(
        ["podman", "ps", "--all", "--filter", f"label={OWNER_LABEL}", "--format", "json"],
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    return [
        c["Names"][0]
        for c in json.loads(listed.stdout or "[]")
        if str((c.get("Labels") or {}).get(OWNER_LABEL, "")).startswith(f"{pid}:")
    ]


def _bridge_pid(state_dir: Path) -> int | None:
    """The bridge process started with ``MCP_BRIDGE_STATE_DIR=state_dir`` (from /proc)."""
    marker = f"MCP_BRIDGE_STATE_DIR={state_dir}".encode()
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            argv = (process / "cmdline").read_bytes().split(b"\0")
            environ = (process / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp_code_execution_mode" in argv and marker in environ:
            return int(process.name)
    return None


def _readme_client_config() -> dict[str, Any]:
    """The ``code-execution`` entry of the client config snippet in README.md."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- client-config -->\s*```json\n(.*?)```", readme, re.DOTALL)
    assert block is not None, "README.md lost its <!-- client-config --> JSON snippet"
    entry: dict[str, Any] = json.loads(block.group(1))["mcpServers"]["code-execution"]
    return entry


async def test_installed_server_answers_run_python_with_the_readme_client_config(
    installed_python: Path, tmp_path: Path, sandbox_image: str
) -> None:
    entry = _readme_client_config()
    # As written, except the venv path (the README's is a placeholder for the reader's) and
    # three additions that keep the test hermetic: the image under test, no discovery of this
    # machine's client configs, and a private state dir.
    assert entry["command"].endswith("/bin/python")
    state_dir = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    env.update(entry.get("env", {}))
    env.update(
        {
            "MCP_BRIDGE_IMAGE": sandbox_image,
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_STATE_DIR": str(state_dir),
        }
    )
    params = StdioServerParameters(
        command=str(installed_python), args=entry["args"], env=env, cwd=str(tmp_path)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
        pid = _bridge_pid(state_dir)
        assert pid is not None
        with anyio.fail_after(180):
            result = await session.call_tool(
                "run_python", {"code": "print(1+1)"}, read_timeout_seconds=170
            )
        closing = time.time()
    # Podman finishes removing the sandboxes the bridge killed on its way out.
    await _shared.wait_until_removed(_owned_containers(pid), since=closing)
    assert result.is_error is False
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text.strip() == "2"
    assert _owned_containers(pid) == [], "the installed bridge left containers behind"

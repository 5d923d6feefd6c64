"""Installing without a clone: the console script from the release folder with pipx and with
``uv tool``, exactly as the README says, for a user who has neither the repository nor hatch.

Each route installs into a scratch home with every network connection refused (so no package
index can be consulted, for our names or any other), then runs ``--help``, ``image status``,
``doctor`` and a real MCP client's ``run_python`` against the installed command. The installed
package also builds the sandbox image itself, and builds the very image the checkout builds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from bridge_image import builder
from bridge_image.names import LABEL_INPUTS_HASH, LABEL_REVISION
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import REPO, run, stranger_env

pytestmark = pytest.mark.container

INSTALL_COMMANDS = {
    "pipx": 'pipx install --pip-args="--no-index --find-links dist" mcp-code-execution-mode',
    "uv": "uv tool install --no-index --find-links dist mcp-code-execution-mode",
}
"""The README's install commands, run as written from the folder holding ``dist``."""
SANDBOX_TIMEOUT = 240.0
"""Bound on doctor's and run_python's first sandbox (under load the first start is slow)."""


@dataclass(frozen=True)
class Installed:
    route: str
    home: Path
    command: Path
    """The installed ``mcp-code-execution-mode`` console script."""

    def env(self, **extra: str) -> dict[str, str]:
        return stranger_env(self.home, offline=False, **extra)


def _readme_install_lines() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return [line.strip() for line in readme.splitlines()]


@pytest.fixture(scope="module", params=sorted(INSTALL_COMMANDS))
def installed(
    request: pytest.FixtureRequest,
    release_dist: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Installed:
    route = request.param
    command = INSTALL_COMMANDS[route]
    assert command in _readme_install_lines(), f"README.md no longer says: {command}"
    home = tmp_path_factory.mktemp(f"home-{route}")
    env = stranger_env(home, offline=True, UV_PYTHON=sys.executable)
    done = subprocess.run(
        command,
        shell=True,
        env=env,
        cwd=release_dist.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, f"{route} install failed:\n{done.stdout}\n{done.stderr}"
    script = home / ".local/bin/mcp-code-execution-mode"
    assert script.is_file(), f"{route} put no mcp-code-execution-mode in ~/.local/bin"
    return Installed(route, home, script)


def test_the_installed_command_runs_from_its_own_environment_not_the_checkout(
    installed: Installed,
) -> None:
    helped = run([str(installed.command), "--help"], env=installed.env(), cwd=installed.home)
    assert helped.returncode == 0, helped.stderr
    for command in ("serve", "doctor", "setup", "image"):
        assert command in helped.stdout
    # The command is a link into the tool's own venv, beside that venv's python.
    python = installed.command.resolve().parent / "python"
    where = run(
        [str(python), "-I", "-c", "import mcp_code_execution_mode as m, bridge_image as b; "
         "print(m.__file__); print(b.__file__)"],
        env=installed.env(),
        cwd=installed.home,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    for line in where.stdout.splitlines():
        assert str(installed.home) in line, line
        assert str(REPO) not in line, line


def test_image_status_reads_the_recipe_packaged_with_the_install(installed: Installed) -> None:
    offline = builder.default_offline()
    flag = "--offline" if offline else "--no-offline"
    status = run(
        [str(installed.command), "image", "status", flag], env=installed.env(), cwd=installed.home
    )
    assert status.returncode in (0, 1), status.stderr  # 1: the shared image is stale or missing
    recipe = re.search(r"^  recipe: (.+)$", status.stdout, re.MULTILINE)
    assert recipe is not None, status.stdout
    assert recipe.group(1).startswith(str(installed.home))
    assert recipe.group(1).endswith("site-packages/bridge_image/_recipe")
    expected = builder.inputs_hash("standard", offline=offline, repo=REPO)
    assert f"(inputs {expected[:12]})" in status.stdout, "the packaged recipe differs"


def test_doctor_of_the_installed_command_finds_runtime_image_and_a_working_sandbox(
    installed: Installed, sandbox_image: str
) -> None:
    env = installed.env(MCP_BRIDGE_IMAGE=sandbox_image)
    doctor = run([str(installed.command), "doctor"], env=env, cwd=installed.home, timeout=600)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "[ok]   runtime: podman" in doctor.stdout
    assert f"[ok]   image: {sandbox_image}" in doctor.stdout
    assert "[ok]   sandbox: ran code" in doctor.stdout


def test_a_real_mcp_client_runs_python_through_the_installed_command(
    installed: Installed, sandbox_image: str
) -> None:
    # A plain test that runs its client with anyio.run: as an anyio test (parametrized by the
    # session-wide backend) it made pytest install each route twice.
    env = installed.env(
        MCP_BRIDGE_IMAGE=sandbox_image,
        MCP_BRIDGE_DISCOVER="false",
        MCP_BRIDGE_POOL_SIZE="0",
    )
    params = StdioServerParameters(
        command=str(installed.command), args=[], env=env, cwd=str(installed.home)
    )

    async def client() -> tuple[types.ListToolsResult, types.CallToolResult]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                listed = await session.list_tools()
            with anyio.fail_after(SANDBOX_TIMEOUT):
                result = await session.call_tool(
                    "run_python",
                    {"code": "import sys; print(sys.prefix, 6 * 7)"},
                    read_timeout_seconds=SANDBOX_TIMEOUT,
                )
        return listed, result

    listed, result = anyio.run(client)
    assert [t.name for t in listed.tools] == ["run_python"]
    assert result.is_error is False, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text.strip() == "/opt/bridge/venv 42"


# Once, with the README's first installer: both put the same wheel's recipe in place (its
# package data), and three image builds take a minute of the suite per installer.
@pytest.mark.parametrize("installed", ["pipx"], indirect=True)
def test_the_installed_package_builds_and_verifies_the_image_the_checkout_builds(
    installed: Installed, tmp_path: Path
) -> None:
    offline = builder.default_offline()
    flag = "--offline" if offline else "--no-offline"
    token = uuid.uuid4().hex[:10]
    from_install = f"localhost/mcp-bridge-sandbox-slim:installed-{token}"
    from_checkout = f"localhost/mcp-bridge-sandbox-slim:checkout-{token}"
    try:
        built = run(
            [str(installed.command), "image", "build", "--slim", flag, "--tag", from_install],
            env=installed.env(),
            cwd=installed.home,
            timeout=900,
        )
        assert built.returncode == 0, built.stderr[-3000:]
        image_id = re.search(r"^image-id: (\S+)$", built.stdout, re.MULTILINE)
        assert image_id is not None, built.stdout
        # Downloads went to the user's cache, nothing was written into the installation.
        assert (installed.home / ".cache/mcp-code-execution-mode/bridge-image/wheels").is_dir()
        reference = builder.build("slim", offline=offline, tag=from_checkout, repo=REPO)
        assert image_id.group(1) == reference.image_id, "the installed recipe built another image"
        labels = _labels(from_install)
        assert labels[LABEL_INPUTS_HASH] == builder.inputs_hash("slim", offline=offline, repo=REPO)
        assert labels[LABEL_REVISION] == reference.labels[LABEL_REVISION]
        # The image the checkout built is current for the installed package.
        status = run(
            [str(installed.command), "image", "status", "--slim", flag, "--tag", from_checkout],
            env=installed.env(),
            cwd=installed.home,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert "status: current" in status.stdout
        verified = run(
            [str(installed.command), "image", "verify", "--slim", flag, "--tag", from_install],
            env=installed.env(),
            cwd=installed.home,
            timeout=900,
        )
        assert verified.returncode == 0, verified.stderr[-3000:]
        assert "verified: a rebuild from scratch gave the same image" in verified.stdout
    finally:
        for tag in (from_install, from_checkout):
            # rmi by name: only untags while another name still points at the image
            subprocess.run(["podman", "rmi", tag], capture_output=True, check=False)


def _labels(image: str) -> dict[str, str]:
    found = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{json .Labels}}", image],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    labels: dict[str, str] = json.loads(found.stdout)
    return labels

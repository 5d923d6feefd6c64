"""Fixtures of the packaging tests: the release folder, and environments that are a stranger's.

* ``release_dist`` — ``scripts/release.py build`` into a temporary folder, once per session: our
  wheels and sdists plus the wheelhouse, for the Python running the tests (the one pipx and uv
  install with here).
* :func:`stranger_env` — the environment of a user who never saw the repository: a scratch
  ``HOME``, no pip or uv configuration of this machine, no ``MCP_BRIDGE_*`` or ``XDG_*``
  variables; with ``offline=True`` every HTTP(S) connection goes through a proxy on a closed
  local port, so an install that consults any package index fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = Path(sys.executable).parent
"""The tests environment's scripts: pipx and uv are installed there (hatch.toml)."""
BUILD_TIMEOUT = 900
"""Seconds for a release build: five hatch builds, then the wheelhouse downloads."""
_CLOSED_PORT_PROXY = "http://127.0.0.1:9"
_DROPPED_PREFIXES = ("PIP_", "PIPX_", "UV_", "MCP_BRIDGE_", "XDG_", "VIRTUAL_ENV", "HATCH_")


def _user_tools(home: Path) -> Path:
    """A folder holding only pipx and uv (a user installs them with apt, brew or pip): the tests
    environment's own folder also holds an editable ``mcp-code-execution-mode``."""
    folder = home / ".user-tools"
    folder.mkdir(parents=True, exist_ok=True)
    for tool in ("pipx", "uv"):
        if not (folder / tool).exists():
            (folder / tool).symlink_to(TOOLS / tool)
    return folder


def stranger_env(home: Path, *, offline: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a user with nothing but ``home`` (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != TOOLS]
    env.update(
        HOME=str(home),
        # Where pipx and uv put commands by default, first on PATH as their docs ask.
        PATH=os.pathsep.join([str(home / ".local/bin"), str(_user_tools(home)), *path]),
        PIP_CONFIG_FILE=os.devnull,  # this machine's pip.conf adds find-links and indexes
        UV_NO_CONFIG="1",
    )
    if offline:
        # Not ALL_PROXY: requests would send the podman API's http+unix requests there too.
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env[name] = _CLOSED_PORT_PROXY
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
    env.update(extra)
    return env


def developer_env() -> dict[str, str]:
    """This shell's environment without the tests environment's activation (a developer runs
    ``hatch run ...`` from a plain shell)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("HATCH_", "VIRTUAL_ENV"))}


def run(
    command: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``command``, capturing its output (never raises on a non-zero exit)."""
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, check=False, timeout=timeout
    )


@pytest.fixture(scope="session")
def release_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release folder: every member's wheel and sdist, and their third-party wheels."""
    dist = tmp_path_factory.mktemp("release") / "dist"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    release = [sys.executable, str(REPO / "scripts/release.py"), "build", "--out", str(dist)]
    built = subprocess.run(
        [*release, "--python", python],
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return dist

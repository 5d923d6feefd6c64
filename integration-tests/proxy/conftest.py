"""The third-party MCP servers installed by ``scripts/prepare-servers`` (read from its env file).

Missing cache: skipped, unless ``BRIDGE_REQUIRE_RUNTIME=1`` (CI), where it is a failure that says
what to run.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV_FILE = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"


def _read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            name, _, raw = line.removeprefix("export ").partition("=")
            parts = shlex.split(raw)
            values[name] = parts[0] if parts else ""
    return values


@pytest.fixture(scope="session")
def third_party() -> dict[str, str]:
    """``{"MCP_SERVER_EVERYTHING": path, ...}`` as written by scripts/prepare-servers."""
    problem = None
    if not ENV_FILE.is_file():
        problem = f"{ENV_FILE} is missing: run scripts/prepare-servers"
    else:
        values = _read_env_file(ENV_FILE)
        missing = [name for name, path in values.items() if not Path(path).exists()]
        if missing:
            problem = (
                f"{', '.join(missing)} from {ENV_FILE} do not exist: re-run scripts/prepare-servers"
            )
    if problem is not None:
        if os.environ.get("BRIDGE_REQUIRE_RUNTIME") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return values

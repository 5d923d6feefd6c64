"""The echo servers the call benchmarks measure: our probe server, and the Node
``server-everything`` when ``scripts/prepare-servers`` installed it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bridge_core.servers import ServerSpec

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "integration-tests" / "servers" / "probe_server.py"
ENV_FILE = REPO / ".cache" / "servers" / "env"


def echo_targets() -> list[tuple[ServerSpec, str, dict[str, Any]]]:
    """``(server spec, echo tool name, its arguments)`` for every server available here."""
    targets = [
        (
            ServerSpec(name="probe", transport="stdio", command=sys.executable, args=(str(PROBE),)),
            "echo",
            {"text": "ping"},
        )
    ]
    if ENV_FILE.is_file():
        for line in ENV_FILE.read_text().splitlines():
            if line.startswith("export MCP_SERVER_EVERYTHING="):
                command = line.split("=", 1)[1].strip("'\"")
                spec = ServerSpec(
                    name="everything", transport="stdio", command=command, args=("stdio",)
                )
                targets.append((spec, "echo", {"message": "ping"}))
    return targets

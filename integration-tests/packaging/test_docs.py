"""The documentation site: the generated API reference matches the code it documents."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "scripts" / "sandbox_api_reference.py"


def test_sandbox_api_reference_page_matches_the_sandbox_client_docstrings() -> None:
    checked = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr


def test_sandbox_api_reference_names_every_runtime_helper_and_exception() -> None:
    from bridge_sandbox_client import errors

    page = (REPO / "docs" / "sandbox-api-reference.md").read_text(encoding="utf-8")
    for name in ("discovered_servers", "list_tools", "query_tool_docs", "search_tool_docs"):
        assert f"### `runtime.{name}`" in page
        assert f"### `runtime.{name}_sync`" in page
    for name in errors.__all__:
        if name != "error_from_fault":
            assert f"| `{name}` |" in page


def test_configuration_page_states_the_default_of_every_setting_as_the_code_has_it() -> None:
    from mcp_code_execution_mode.settings import SETTINGS

    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(MCP_BRIDGE_\w+)` \| `--[\w-]+` \| ([^|]+?) \|", page, re.M)
    }
    for setting in SETTINGS:
        shown = documented.get(setting.env)
        assert shown is not None, f"{setting.env} is not in docs/configuration.md"
        if setting.default is None:
            # Unset, or for the state dir and the log file the place used when it is unset.
            assert shown == "unset" or setting.env in (
                "MCP_BRIDGE_STATE_DIR",
                "MCP_BRIDGE_LOG_FILE",
            ), setting.env
        else:
            assert shown == f"`{setting.default}`", setting.env

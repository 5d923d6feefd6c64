"""The Python spellings of MCP names, which the sandbox and the host must agree on."""

from __future__ import annotations

import pytest
from bridge_protocol.names import MAX_NAME_CHARS, alias_for, identifier_for, python_forms


@pytest.mark.parametrize(
    ("name", "identifier", "alias"),
    [
        ("github", "github", "mcp_github"),
        ("my-server", "my_server", "mcp_my_server"),
        ("get-user.info", "get_user_info", "mcp_get_user_info"),
        ("2fa", "_2fa", "mcp_2fa"),
        ("class", "class_", "mcp_class"),
        ("café", "caf_", "mcp_caf_"),
        ("", "_", "mcp_"),
    ],
)
def test_names_map_to_identifiers_and_aliases(name: str, identifier: str, alias: str) -> None:
    assert identifier_for(name) == identifier
    assert identifier.isidentifier()
    assert alias_for(name) == alias


def test_a_server_is_written_three_ways_and_a_tool_two() -> None:
    assert python_forms("my-server", server=True) == {"my-server", "my_server", "mcp_my_server"}
    assert python_forms("get-user.info", server=False) == {"get-user.info", "get_user_info"}


def test_the_name_cap_covers_every_name_mcp_recommends() -> None:
    assert MAX_NAME_CHARS >= 128

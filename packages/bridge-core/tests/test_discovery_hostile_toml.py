"""A TOML config file (Codex's ``config.toml``) nested thousands deep or holding an integer of
more digits than Python converts is reported as unreadable and skipped, like any malformed file,
instead of raising out of discovery and stopping the bridge."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_core.discovery import SourceUnreadable
from bridge_core.discovery._files import load_toml


@pytest.mark.parametrize(
    "text",
    ["x = " + "[" * 100_000 + "]" * 100_000, "[mcp_servers.a]\nx = " + "9" * 5000],
    ids=["deep", "huge-int"],
)
def test_a_toml_file_past_what_the_reader_handles_is_unreadable_not_a_crash(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceUnreadable):
        load_toml(path)

"""The persisted tool-list cache: keyed by configuration, atomic, corruption-tolerant."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from bridge_core.catalog import ToolCache, ToolDoc
from bridge_core.servers import ServerSpec
from mcp.types import Tool

SPEC = ServerSpec(
    name="time", transport="stdio", command="mcp-server-time", args=("--local-timezone", "UTC")
)


def docs(real_tools: dict[str, list[Tool]]) -> list[ToolDoc]:
    return [ToolDoc.from_tool("time", t) for t in real_tools["time"]]


def test_a_stored_tool_list_loads_back_identical(
    tmp_path: Path, real_tools: dict[str, list[Tool]]
) -> None:
    cache = ToolCache(tmp_path)
    cache.store(SPEC, docs(real_tools), description="Time and timezone conversion")
    loaded = ToolCache(tmp_path).load(SPEC)
    assert loaded is not None
    assert list(loaded.tools) == docs(real_tools)
    assert loaded.description == "Time and timezone conversion"
    assert loaded.saved_at > 0


def test_a_changed_configuration_misses_the_cache(
    tmp_path: Path, real_tools: dict[str, list[Tool]]
) -> None:
    cache = ToolCache(tmp_path)
    cache.store(SPEC, docs(real_tools))
    changed = ServerSpec(name="time", transport="stdio", command="mcp-server-time", args=())
    assert cache.load(changed) is None
    renamed = ServerSpec(name="clock", transport="stdio", command=SPEC.command, args=SPEC.args)
    hit = cache.load(renamed)  # the name is not part of the key: same command, same tools
    assert hit is not None
    assert {d.server for d in hit.tools} == {"clock"}


def test_a_missing_cache_is_a_quiet_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert ToolCache(tmp_path / "nothing-here").load(SPEC) is None
    assert caplog.records == []


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[]",
        b'{"format": 99, "tools": []}',
        b'{"format": 1, "tools": {"a": 1}}',
        b'{"format": 1, "tools": [{"description": "no name"}]}',
        b'{"format": 1}',
        b"\xff\xfe",
    ],
)
def test_a_corrupt_cache_file_is_ignored_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    cache = ToolCache(tmp_path)
    cache.directory.mkdir(parents=True)
    (cache.directory / f"{SPEC.cache_key()}.json").write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert cache.load(SPEC) is None
    assert "ignoring tool cache" in caplog.text


def test_store_replaces_atomically_and_leaves_no_temporary_files(
    tmp_path: Path, real_tools: dict[str, list[Tool]]
) -> None:
    cache = ToolCache(tmp_path)
    cache.store(SPEC, docs(real_tools))
    cache.store(SPEC, docs(real_tools)[:1])
    assert [p.name for p in cache.directory.iterdir()] == [f"{SPEC.cache_key()}.json"]
    data = json.loads((cache.directory / f"{SPEC.cache_key()}.json").read_text())
    assert [t["name"] for t in data["tools"]] == ["get_current_time"]


def test_an_unwritable_cache_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, real_tools: dict[str, list[Tool]]
) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state directory should be")
    with caplog.at_level(logging.WARNING):
        ToolCache(blocker).store(SPEC, docs(real_tools))
    assert "cannot save tool cache" in caplog.text


def _many(count: int) -> list[ToolDoc]:
    return [ToolDoc("time", f"tool_{i}", "x" * 100) for i in range(count)]


def test_a_list_past_the_bounds_is_not_saved_and_replaces_no_older_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ToolCache(tmp_path, max_tools=10, max_bytes=64 * 1024)
    cache.store(SPEC, _many(5))
    with caplog.at_level(logging.WARNING):
        cache.store(SPEC, _many(11))
    assert "past the bounds" in caplog.text
    assert cache.load(SPEC) is None  # the older list is gone too: it no longer holds
    big = [ToolDoc("time", "big", "y" * 200_000)]
    cache.store(SPEC, big)
    assert cache.load(SPEC) is None


def test_a_cache_file_past_the_bounds_is_removed_without_being_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ToolCache(tmp_path, max_tools=5000).store(SPEC, _many(3000))  # by a bridge with higher bounds
    path = tmp_path / "tools" / f"{SPEC.cache_key()}.json"
    assert path.stat().st_size > 64 * 1024 + 64 * 1024
    with caplog.at_level(logging.WARNING):
        assert ToolCache(tmp_path, max_tools=5000, max_bytes=64 * 1024).load(SPEC) is None
    assert "removed, not read" in caplog.text
    assert not path.exists()
    ToolCache(tmp_path, max_tools=5000).store(SPEC, _many(3000))
    assert ToolCache(tmp_path, max_tools=100).load(SPEC) is None  # too many tools
    assert not path.exists()

"""The catalog answering the sandbox's discovery requests: lazy loading, cache, policy, errors."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import snowballstemmer
from bridge_core.catalog import (
    Catalog,
    CatalogError,
    SearchHit,
    ToolCache,
    ToolDoc,
    ToolIndex,
    UnknownServer,
    UnknownTool,
    _search,
)
from bridge_core.errors import UpstreamError
from bridge_core.gateway import CallFailed
from bridge_core.policy import Policy, PolicyDenied
from bridge_core.servers import ServerSpec
from bridge_protocol import ErrorCode
from mcp.types import Tool

NAMES = ("everything", "filesystem", "memory", "time", "git")


def specs(*names: str) -> dict[str, ServerSpec]:
    return {
        n: ServerSpec(
            name=n,
            transport="stdio",
            command=f"mcp-{n}",
            source=f"~/.cursor/mcp.json#mcpServers.{n}",
        )
        for n in names or NAMES
    }


class Upstream:
    """Stands in for the proxy: lists a server's tools, counting calls, optionally failing."""

    def __init__(self, tools: dict[str, list[Tool]], broken: Sequence[str] = ()) -> None:
        self.tools = tools
        self.broken = set(broken)
        self.calls: list[str] = []
        self.release: anyio.Event | None = None

    async def list_tools(self, server: str) -> list[Tool]:
        self.calls.append(server)
        if self.release is not None:
            await self.release.wait()
        if server in self.broken:
            raise UpstreamError(f"server {server!r} exited with status 1")
        return self.tools[server]


@pytest.fixture
def upstream(real_tools: dict[str, list[Tool]]) -> Upstream:
    return Upstream(real_tools)


async def test_listing_servers_starts_none_of_them(upstream: Upstream) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    assert await catalog.discovered_servers() == list(NAMES)
    detailed = await catalog.discovered_servers(detailed=True)
    assert detailed[1] == {
        "name": "filesystem",
        "description": "",
        "tool_count": None,
        "source": "~/.cursor/mcp.json#mcpServers.filesystem",
    }
    assert upstream.calls == []


async def test_tool_counts_come_from_the_cache_without_starting_servers(
    tmp_path: Path, upstream: Upstream
) -> None:
    first = Catalog(specs(), list_tools=upstream.list_tools, cache=ToolCache(tmp_path))
    await first.list_tools("filesystem")
    assert upstream.calls == ["filesystem"]

    fresh = Upstream(upstream.tools)
    second = Catalog(specs(), list_tools=fresh.list_tools, cache=ToolCache(tmp_path))
    counts = {d["name"]: d["tool_count"] for d in await second.discovered_servers(detailed=True)}
    assert counts == {
        "everything": None,
        "filesystem": 14,
        "memory": None,
        "time": None,
        "git": None,
    }
    assert await second.list_tools("filesystem") == [t.name for t in upstream.tools["filesystem"]]
    assert fresh.calls == []


async def test_a_tool_the_cached_list_lacks_is_looked_up_in_the_servers_own_list_once(
    tmp_path: Path, upstream: Upstream
) -> None:
    first = Catalog(specs(), list_tools=upstream.list_tools, cache=ToolCache(tmp_path))
    await first.list_tools("time")
    # The server was updated since: it has one tool more than its cached list.
    added = Tool(name="convert_to_unix", input_schema={"type": "object"})
    updated = Upstream({**upstream.tools, "time": [*upstream.tools["time"], added]})
    second = Catalog(specs(), list_tools=updated.list_tools, cache=ToolCache(tmp_path))
    assert (await second.tool("time", "get_current_time")).name == "get_current_time"
    assert updated.calls == []  # a name the cache knows starts nothing
    assert (await second.tool("time", "convert_to_unix")).name == "convert_to_unix"
    assert updated.calls == ["time"]
    with pytest.raises(UnknownTool):  # the server's own list said so: not asked again
        await second.tool("time", "convert_to_unixx")
    assert updated.calls == ["time"]


async def test_query_tool_docs_renders_summary_full_and_stub(upstream: Upstream) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    summary = await catalog.query_tool_docs("time")
    assert summary == {
        "server": "time",
        "tools": [
            {"name": "get_current_time", "description": "Get current time in a specific timezone"},
            {"name": "convert_time", "description": "Convert time between timezones"},
        ],
    }
    full = await catalog.query_tool_docs("time", "convert_time", "full")
    [tool] = full["tools"]
    assert tool["inputSchema"]["required"] == ["source_timezone", "time", "target_timezone"]
    assert "outputSchema" in tool
    stub = await catalog.query_tool_docs("time", "convert_time", "stub")
    assert stub["tools"][0]["stub"].startswith("async def convert_time(*, source_timezone: str")
    assert upstream.calls == ["time"]  # loaded once, then served from memory


async def test_reference_page_usage_works_on_the_reply_shapes(upstream: Upstream) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    docs = await catalog.handle_request("query_tool_docs", {"server": "filesystem"})
    assert "read_text_file" in [t["name"] for t in docs["tools"]]
    matches = await catalog.handle_request("search_tool_docs", {"query": "list files", "limit": 5})
    assert isinstance(matches, list)
    assert matches[0]["server"] == "filesystem"
    assert set(matches[0]) == {"server", "tool", "description", "score"}


async def test_unknown_server_and_tool_errors_carry_codes_and_closest_names(
    upstream: Upstream,
) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    with pytest.raises(UnknownServer) as server_error:
        await catalog.query_tool_docs("filesytem")
    assert server_error.value.code == ErrorCode.UNKNOWN_SERVER
    assert server_error.value.suggestions[0] == "filesystem"
    assert "'filesystem'" in server_error.value.message
    with pytest.raises(UnknownTool) as tool_error:
        await catalog.query_tool_docs("filesystem", "read_fille")
    assert tool_error.value.code == ErrorCode.UNKNOWN_TOOL
    assert tool_error.value.suggestions[0] == "read_file"
    assert isinstance(tool_error.value, CallFailed)  # the gateway can pass it through as is
    assert tool_error.value.data == {"suggestions": tool_error.value.suggestions}


async def test_an_unknown_name_far_from_everything_lists_what_exists() -> None:
    catalog = Catalog(specs("time", "git"))
    with pytest.raises(UnknownServer) as error:
        catalog.require_server("zzzzzzzz")
    assert error.value.suggestions == []
    assert "available: 'git', 'time'" in error.value.message


async def test_denied_servers_and_tools_are_hidden_and_refused(upstream: Upstream) -> None:
    policy = Policy.from_settings(deny_servers="memory", deny_tools="filesystem.write_*,git_reset")
    catalog = Catalog(specs(), list_tools=upstream.list_tools, policy=policy)
    assert "memory" not in await catalog.discovered_servers()
    names = await catalog.list_tools("filesystem")
    assert "write_file" not in names
    assert "read_file" in names
    hits = await catalog.search("write file", limit=50)
    assert ("filesystem", "write_file") not in [(h.server, h.tool) for h in hits]
    assert all(h.server != "memory" for h in hits)
    with pytest.raises(PolicyDenied) as denied:
        await catalog.query_tool_docs("filesystem", "write_file")
    assert denied.value.code == ErrorCode.POLICY_DENIED
    assert "[policy] deny_tools=filesystem.write_*" in denied.value.message
    with pytest.raises(PolicyDenied):
        await catalog.query_tool_docs("memory")
    with pytest.raises(PolicyDenied):
        catalog.check_call("git", "git_reset")
    assert catalog.check_call("git", "git_status").name == "git"
    assert "memory" not in upstream.calls


async def test_search_indexes_every_server_lazily_and_skips_broken_ones(
    real_tools: dict[str, list[Tool]], caplog: pytest.LogCaptureFixture
) -> None:
    upstream = Upstream(real_tools, broken=["git"])
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    hits = await catalog.search("current time")
    assert hits[0].tool == "get_current_time"
    assert sorted(upstream.calls) == sorted(NAMES)
    assert "search skips server 'git'" in caplog.text
    await catalog.search("commit")
    assert upstream.calls.count("time") == 1
    assert upstream.calls.count("git") == 2  # a broken server is retried on the next search


async def test_concurrent_requests_list_a_server_once(upstream: Upstream) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    upstream.release = anyio.Event()
    results: list[list[str]] = []

    async def ask() -> None:
        results.append(await catalog.list_tools("git"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            upstream.release.set()
    assert upstream.calls == ["git"]
    assert len(results) == 5
    assert all(r == results[0] for r in results)


async def test_set_tools_replaces_the_list_and_the_index(
    upstream: Upstream, tmp_path: Path
) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools, cache=ToolCache(tmp_path))
    assert [h.tool for h in await catalog.search("ehco")] == ["echo"]
    await catalog.set_tools("everything", [ToolDoc("everything", "shout", "Echo loudly")])
    assert [h.tool for h in await catalog.search("shout")] == ["shout"]
    assert await catalog.list_tools("everything") == ["shout"]
    cached = ToolCache(tmp_path).load(specs()["everything"])
    assert cached is not None
    assert [t.name for t in cached.tools] == ["shout"]
    with pytest.raises(UnknownServer):
        await catalog.set_tools("nope", [])


async def test_an_upstream_failure_on_a_direct_query_propagates(
    real_tools: dict[str, list[Tool]],
) -> None:
    catalog = Catalog(specs(), list_tools=Upstream(real_tools, broken=["git"]).list_tools)
    with pytest.raises(UpstreamError):
        await catalog.query_tool_docs("git")


async def test_without_a_lister_unknown_tool_lists_are_unavailable() -> None:
    catalog = Catalog(specs("time"))
    with pytest.raises(CallFailed) as error:
        await catalog.list_tools("time")
    assert error.value.code == ErrorCode.UPSTREAM_UNAVAILABLE
    assert await catalog.search("time") == []


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("list_tools", {}, ErrorCode.INVALID_ARGUMENTS),
        ("list_tools", {"server": 3}, ErrorCode.INVALID_ARGUMENTS),
        (
            "query_tool_docs",
            {"server": "time", "detail": "everything"},
            ErrorCode.INVALID_ARGUMENTS,
        ),
        ("query_tool_docs", {"server": "time", "tool": 5}, ErrorCode.INVALID_ARGUMENTS),
        ("search_tool_docs", {"query": "x", "limit": 0}, ErrorCode.INVALID_ARGUMENTS),
        ("search_tool_docs", {"query": "x", "limit": True}, ErrorCode.INVALID_ARGUMENTS),
        ("search_tool_docs", {"query": "x", "limit": 1000}, ErrorCode.INVALID_ARGUMENTS),
        ("search_tool_docs", {"limit": 5}, ErrorCode.INVALID_ARGUMENTS),
        ("search_tool_docs", {"query": "x" * 1001}, ErrorCode.INVALID_ARGUMENTS),
        ("discovered_servers", {"detailed": "yes"}, ErrorCode.INVALID_ARGUMENTS),
        ("drop_tables", {}, ErrorCode.UNKNOWN_METHOD),
    ],
)
async def test_bad_requests_are_refused_with_a_code(
    upstream: Upstream, method: str, params: dict[str, object], code: ErrorCode
) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    with pytest.raises(CallFailed) as error:
        await catalog.handle_request(method, params)
    assert error.value.code == code
    if code == ErrorCode.INVALID_ARGUMENTS:
        assert isinstance(error.value, CatalogError)


async def test_handle_request_answers_every_method(upstream: Upstream) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    assert await catalog.handle_request("discovered_servers", {}) == list(NAMES)
    assert await catalog.handle_request("list_tools", {"server": "time"}) == [
        "get_current_time",
        "convert_time",
    ]
    docs = await catalog.handle_request(
        "query_tool_docs", {"server": "time", "tool": None, "detail": "stub"}
    )
    assert len(docs["tools"]) == 2
    hits = await catalog.handle_request("search_tool_docs", {"query": "timezone convert"})
    assert hits[0]["tool"] == "convert_time"


async def test_nameless_and_repeated_tools_from_an_upstream_are_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = Catalog(specs("odd"))
    tools = [
        Tool(name="", input_schema={"type": "object"}),
        Tool(name="ok", description="first", input_schema={"type": "object"}),
        Tool(name="ok", description="second", input_schema={"type": "object"}),
    ]
    await catalog.set_tools("odd", tools)
    docs = await catalog.query_tool_docs("odd")
    assert docs["tools"] == [{"name": "ok", "description": "first"}]
    assert "unusable tool" in caplog.text
    assert "twice" in caplog.text


async def test_huge_names_from_the_sandbox_give_short_errors(upstream: Upstream) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    with pytest.raises(UnknownServer) as server_error:
        await catalog.query_tool_docs("f" * 1_000_000)
    assert len(server_error.value.message) < 400
    with pytest.raises(UnknownTool) as tool_error:
        await catalog.query_tool_docs("time", "x" * 1_000_000)
    assert len(tool_error.value.message) < 400


async def test_the_index_is_built_and_searched_off_the_event_loop_and_rebuilt_only_on_change(
    upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[frozenset[str], bool]] = []
    searched: list[bool] = []

    class Recording(ToolIndex):
        def __init__(self, docs: Sequence[ToolDoc], **kwargs: Any) -> None:
            on_loop = threading.current_thread() is main
            built.append((frozenset(d.server for d in docs), on_loop))
            super().__init__(docs, **kwargs)

        def search(self, query: str, limit: int = 5) -> list[SearchHit]:
            searched.append(threading.current_thread() is main)
            return super().search(query, limit)

    main = threading.current_thread()
    monkeypatch.setattr("bridge_core.catalog._catalog.ToolIndex", Recording)
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    assert [h.tool for h in await catalog.search("ehco")] == ["echo"]
    await catalog.search("commit")
    assert built == [(frozenset(NAMES), False)]  # once, in a worker thread, for every server
    await catalog.set_tools("everything", [ToolDoc("everything", "shout", "Echo loudly")])
    assert [h.tool for h in await catalog.search("shout")] == ["shout"]
    assert built[1:] == [(frozenset(NAMES), False)]  # a list changed: built again, off the loop
    assert searched == [False, False, False]


def test_stemming_from_many_threads_at_once_gives_each_word_its_own_stem() -> None:
    # Indexes are built and searched in worker threads; a stemmer keeps its word in its fields.
    words = [
        f"{stem}{suffix}"
        for stem in ("connect", "gener", "run", "index")
        for suffix in ("ing", "ed", "ion", "ions", "er", "ers", "ly", "ness", "ation", "ations")
    ] * 40
    expected = [snowballstemmer.stemmer("english").stemWord(w) for w in words]
    results: list[list[str]] = []

    def stem_all(offset: int) -> None:
        rotated = words[offset:] + words[:offset]
        stems = [_search._stem.__wrapped__(w) for w in rotated]  # uncached: the stemmer itself
        results.append(stems[len(words) - offset :] + stems[: len(words) - offset])

    threads = [threading.Thread(target=stem_all, args=(i * 7,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 8
    assert all(stems == expected for stems in results)

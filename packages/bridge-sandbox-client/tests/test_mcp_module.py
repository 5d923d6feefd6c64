"""The in-sandbox ``mcp`` module: every call and import form, results, errors, concurrency."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from bridge_protocol import Call, Request


def ok(host: Any, code: str) -> str | None:
    run = host.execute(code)
    assert run.result.status == "ok", run.result.error
    return run.result.value


# --- call forms --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "from mcp import mcp_servers\nawait mcp_servers['github'].create_issue(title='t')",
        "from mcp import mcp_github\nawait mcp_github.create_issue(title='t')",
        "import mcp_github\nawait mcp_github.create_issue(title='t')",
        "from mcp.servers.github import create_issue\nawait create_issue(title='t')",
        "import mcp.servers.github as gh\nawait gh.create_issue(title='t')",
        "await mcp_servers['github'].__getattr__('create_issue')(title='t')",
        "await mcp_servers['github']['create_issue'](title='t')",
        "await mcp_servers.github.create_issue({'title': 't'})",
        "await mcp_github.create_issue(title='t')",  # alias bound without import
        "mcp_servers['github'].create_issue.sync(title='t')",
        "from mcp.servers.github import create_issue\ncreate_issue.sync(title='t')",
    ],
)
def test_every_call_form_reaches_the_tool(host: Any, code: str) -> None:
    run = host.execute(code)
    assert run.result.status == "ok", run.result.error
    assert run.result.value == "{'number': 7, 'title': 't'}"
    (call,) = run.calls
    assert (call.server, call.tool, dict(call.arguments)) == (
        "github",
        "create_issue",
        {"title": "t"},
    )
    assert call.execution_id == run.result.execution_id


def test_reference_retry_pattern_works_as_written(host: Any) -> None:
    code = (
        "from mcp import mcp_servers\nimport asyncio\n\n"
        "async def safe_call(server, tool, **kwargs):\n"
        "    for attempt in range(3):\n"
        "        try:\n"
        "            return await mcp_servers[server].__getattr__(tool)(**kwargs)\n"
        "        except Exception as e:\n"
        "            if attempt == 2:\n"
        "                raise\n"
        "            await asyncio.sleep(0)\n\n"
        "result = await safe_call('github', 'create_issue', repo='o/r', title='Test', body='b')\n"
        "result['title']"
    )
    assert ok(host, code) == "'Test'"


def test_non_identifier_tool_and_server_names_are_reachable(host: Any) -> None:
    assert ok(host, "await mcp_servers['github']['get-user.info'](login='a')") == "{'login': 'a'}"
    assert ok(host, "from mcp import mcp_github\nawait mcp_github.get_user_info()") == (
        "{'login': 'octo'}"
    )
    assert ok(host, "from mcp import mcp_my_server\nawait mcp_my_server.ping()") == "'pong'"
    assert ok(host, "import mcp_my_server\nmcp_my_server.ping.sync()") == "'pong'"
    assert ok(host, "await mcp_servers['my-server'].ping()") == "'pong'"


def test_tool_names_are_fetched_once_per_server(host: Any) -> None:
    ok(host, "await mcp_github.create_issue(title='a')\nawait mcp_github.list_issues()")
    lists = [r for r in host.requests if r.method == "list_tools"]
    assert [dict(r.params) for r in lists] == [{"server": "github"}]


# --- results -----------------------------------------------------------------------------------


def test_text_content_is_parsed_as_json_when_it_is_json(host: Any) -> None:
    assert ok(host, "await mcp_github.list_issues()") == "[{'title': 'bug'}, {'title': 'crash'}]"


def test_text_content_that_is_not_json_stays_a_string(host: Any) -> None:
    assert ok(host, "await mcp_files.read_file(path='/data/sales.csv')") == (
        "'month,revenue\\n1,10\\n'"
    )


def test_image_content_becomes_bytes_with_a_mime_type(host: Any) -> None:
    value = ok(host, "img = await mcp_media.image()\n(type(img).__name__, img.mime_type, img.data)")
    assert value == repr(("Image", "image/png", host.png))


def test_several_contents_become_a_list(host: Any) -> None:
    assert ok(host, "await mcp_media.several()") == "['one', [2]]"


def test_no_content_becomes_none(host: Any) -> None:
    assert ok(host, "r = await mcp_media.nothing()\nr is None") == "True"


def test_raw_true_returns_the_whole_result(host: Any) -> None:
    value = ok(host, "r = await mcp_github.create_issue(title='t', raw=True)\nsorted(r)")
    assert value == "['content', 'structuredContent']"


def test_is_error_result_raises_tool_error_with_its_text(host: Any) -> None:
    code = (
        "from mcp import ToolError\n"
        "try:\n"
        "    await mcp_media.fails()\n"
        "except ToolError as e:\n"
        "    caught = (str(e), e.server, e.tool, e.result['isError'])\n"
        "caught"
    )
    assert ok(host, code) == "('repository not found', 'media', 'fails', True)"


@pytest.mark.parametrize(
    ("tool", "error_class"),
    [("denied", "PolicyDenied"), ("times_out", "ToolTimeout"), ("fails", "ToolError")],
)
def test_faults_raise_the_tool_error_subclass_of_their_code(
    host: Any, tool: str, error_class: str
) -> None:
    code = (
        f"import mcp\ntry:\n    mcp_media.{tool}.sync()\n"
        f"except mcp.{error_class} as e:\n"
        "    caught = (type(e).__name__, isinstance(e, mcp.ToolError))\n"
        "caught"
    )
    assert ok(host, code) == repr((error_class, True))


def test_unknown_server_fault_from_the_host_is_unknown_server(host: Any) -> None:
    code = (
        "from mcp import UnknownServer\ntry:\n    await runtime.query_tool_docs('nope')\n"
        "except UnknownServer as e:\n    caught = 'nope' in str(e)\ncaught"
    )
    assert ok(host, code) == "True"


# --- arguments ---------------------------------------------------------------------------------


def test_bytes_arguments_are_sent_base64_encoded(host: Any) -> None:
    run = host.execute(
        "with open('/dev/zero', 'rb') as f:\n    payload = f.read(1000) + b'\\xff'\n"
        "await mcp_files.write_file(path='/reports/x.bin', content=payload)"
    )
    assert run.result.value == "'wrote 1001 bytes to /reports/x.bin'"
    (call,) = run.calls
    assert base64.b64decode(call.arguments["content"]) == bytes(1000) + b"\xff"


def test_tuples_become_lists_and_nesting_is_preserved(host: Any) -> None:
    value = ok(host, "await mcp_media.echo(a=(1, 2), b={'c': [None, True, 1.5]})")
    assert value == "{'a': [1, 2], 'b': {'c': [None, True, 1.5]}}"


@pytest.mark.parametrize(
    "argument",
    ["when=__import__('datetime').date(2025, 1, 1)", "s={1, 2}", "x=float('nan')", "d={1: 'a'}"],
)
def test_non_json_arguments_raise_type_error_at_the_call_site(host: Any, argument: str) -> None:
    run = host.execute(f"coro = mcp_media.echo({argument})")
    assert run.result.error is not None
    assert run.result.error.type == "TypeError"
    assert run.calls == []


def test_positional_arguments_other_than_one_dict_are_a_type_error(host: Any) -> None:
    run = host.execute("mcp_media.echo('a', 'b')")
    assert run.result.error is not None
    assert run.result.error.type == "TypeError"


# --- concurrency -------------------------------------------------------------------------------


def test_gathered_calls_are_in_flight_at_the_same_time(host: Any) -> None:
    # The host answers each `slow` call only once three are waiting together: sequential calls
    # would break the barrier instead.
    run = host.execute(
        "import asyncio\n"
        "rs = await asyncio.gather(*(mcp_media.slow(n=i) for i in range(3)))\n"
        "([r['n'] for r in rs], sorted(r['arrival'] for r in rs))"
    )
    assert run.result.value == "([0, 1, 2], [0, 1, 2])", run.result.error
    assert len({c.call_id for c in run.calls}) == 3


def test_calls_from_user_threads_with_sync_twins_are_multiplexed(host: Any) -> None:
    value = ok(
        host,
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(3) as pool:\n"
        "    rs = list(pool.map(lambda i: mcp_media.slow.sync(n=i), range(3)))\n"
        "[r['n'] for r in rs]",
    )
    assert value == "[0, 1, 2]"


# --- runtime helpers -------------------------------------------------------------------------


def test_discovered_servers_works_with_and_without_await(host: Any) -> None:
    names = "['github', 'files', 'media', 'my-server']"
    assert ok(host, "from mcp import runtime\nawait runtime.discovered_servers()") == names
    assert ok(host, "list(runtime.discovered_servers())") == names
    assert ok(host, "runtime.discovered_servers_sync()") == names
    detailed = ok(host, "[s['name'] for s in await runtime.discovered_servers(detailed=True)]")
    assert detailed == names


def test_query_tool_docs_and_its_sync_twin(host: Any) -> None:
    code = "docs = await runtime.query_tool_docs('github')\n[t['name'] for t in docs['tools']]"
    assert ok(host, code) == "['create_issue', 'get-user.info', 'list_issues']"
    assert ok(host, "runtime.query_tool_docs_sync('github', tool='list_issues')['server']") == (
        "'github'"
    )
    (last,) = [r for r in host.requests if r.method == "query_tool_docs"][-1:]
    assert dict(last.params) == {"server": "github", "tool": "list_issues", "detail": "summary"}


def test_search_tool_docs_and_its_sync_twin(host: Any) -> None:
    code = (
        "hits = await runtime.search_tool_docs('issue', limit=1)\n"
        "[(h['server'], h['tool']) for h in hits]"
    )
    assert ok(host, code) == "[('github', 'create_issue')]"
    assert ok(host, "len(runtime.search_tool_docs_sync('i', limit=5))") == "5"


def test_list_tools_helper(host: Any) -> None:
    assert ok(host, "await runtime.list_tools('files')") == "['read_file', 'write_file']"
    assert ok(host, "runtime.list_tools_sync('my-server')") == "['ping']"


def test_bad_helper_arguments_fail_before_any_request(host: Any) -> None:
    run = host.execute("runtime.query_tool_docs_sync('github', detail='everything')")
    assert run.result.error is not None
    assert run.result.error.type == "ValueError"
    run = host.execute("runtime.search_tool_docs_sync('x', limit=0)")
    assert run.result.error is not None
    assert run.result.error.type == "ValueError"
    assert not [r for r in host.requests if r.method in ("query_tool_docs", "search_tool_docs")]


def test_reference_discovery_then_execution_pattern(host: Any) -> None:
    code = (
        "from mcp import runtime, mcp_servers\n"
        "matches = await runtime.search_tool_docs('create', limit=3)\n"
        "server_name = matches[0]['server']\n"
        "docs = await runtime.query_tool_docs(server_name)\n"
        "result = await mcp_servers[server_name].create_issue(title='x')\n"
        "print(result)"
    )
    run = host.execute(code)
    assert run.stdout == "{'number': 7, 'title': 'x'}\n"


def test_mcp_names_do_not_leak_to_the_real_sdk(host: Any) -> None:
    # The hatch test env has the MCP SDK installed; user code must still get ours.
    run = host.execute("import mcp\nimport mcp.types")
    assert run.result.error is not None
    assert run.result.error.type == "ModuleNotFoundError"
    assert ok(host, "import mcp\nmcp.__name__, hasattr(mcp, 'ClientSession')") == "('mcp', False)"


def test_calls_carry_the_current_execution_id(host: Any) -> None:
    first = host.execute("await mcp_github.create_issue(title='a')")
    second = host.execute("mcp_github.create_issue.sync(title='b')")
    assert [c.execution_id for c in first.calls] == [first.result.execution_id]
    assert [c.execution_id for c in second.calls] == [second.result.execution_id]
    requests = [f for f in first.frames if isinstance(f, Request)]
    assert all(r.execution_id == first.result.execution_id for r in requests)
    assert all(isinstance(c, Call) for c in second.calls)


def test_arguments_too_large_for_a_frame_raise_value_error_and_the_session_lives(
    host: Any,
) -> None:
    run = host.execute("await mcp_media.echo(data='x' * 20_000_000)")
    assert run.result.error is not None
    assert run.result.error.type == "ValueError"
    assert ok(host, "await mcp_media.echo(n=1)") == "{'n': 1}"


def test_a_forgotten_await_is_explained(host: Any) -> None:
    run = host.execute("mcp_github.create_issue(title='t')")
    assert "github.create_issue" in (run.result.value or "")
    assert "never awaited" in (run.result.value or "")
    assert run.calls == []


def test_a_forgotten_await_in_a_statement_warns_without_the_clients_file_path(
    host: Any,
) -> None:
    run = host.execute("mcp_github.create_issue(title='t')\nimport gc\ngc.collect()")
    assert "coroutine 'github.create_issue' was never awaited" in run.stderr
    assert "write `await` before the call" in run.stderr
    assert "bridge_sandbox_client" not in run.stderr
    assert ".py:" not in run.stderr
    assert run.calls == []


def test_a_forgotten_await_of_a_runtime_helper_names_its_blocking_twin(host: Any) -> None:
    run = host.execute("runtime.search_tool_docs('files')")
    assert "never awaited" in (run.result.value or "")
    assert "runtime.search_tool_docs_sync(...)" in (run.result.value or "")
    warned = host.execute("runtime.list_tools('media')\nimport gc\ngc.collect()")
    assert "runtime.list_tools_sync(...)" in warned.stderr
    assert ".sync(...)" not in warned.stderr.replace("_sync(...)", "")


def test_an_uncaught_tool_error_is_named_as_user_code_imports_it(host: Any) -> None:
    run = host.execute("from mcp import ToolError\nraise ToolError('boom')")
    assert run.result.error is not None
    assert run.result.error.type == "mcp.ToolError"
    assert "bridge_sandbox_client" not in run.result.error.traceback


def test_a_call_left_in_flight_by_a_finished_execution_fails_instead_of_hanging(
    host: Any,
) -> None:
    first = host.execute(
        "import asyncio\nleft = asyncio.create_task(mcp_media.hang())\nawait asyncio.sleep(0)"
    )
    assert len(first.calls) == 1
    value = ok(host, "import asyncio\nawait asyncio.wait([left])\ntype(left.exception()).__name__")
    assert value == "'ToolCancelled'"


def test_a_call_from_a_task_running_between_executions_fails_fast(host: Any) -> None:
    from bridge_protocol import Progress

    host.execute(
        "import asyncio\nfrom mcp import ToolError\n"
        "gate = asyncio.Event()\n"
        "async def later():\n"
        "    await gate.wait()\n"
        "    try:\n"
        "        await mcp_media.echo(n=1)\n"
        "    except ToolError as e:\n"
        "        globals()['failure'] = e\n"
        "    runtime.progress(1)\n"
        "task = asyncio.create_task(later())\n"
        "asyncio.get_running_loop().call_later(0.01, gate.set)\n"
        "await asyncio.sleep(0)"
    )
    host.wait_for(Progress)
    assert ok(host, "type(failure).__name__, 'no execution is running' in str(failure)") == (
        "('ToolCancelled', True)"
    )


def test_a_forked_child_cannot_touch_the_channel_and_the_parent_still_can(host: Any) -> None:
    code = (
        "import os\nfrom mcp import ToolError\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        mcp_media.echo.sync(n=1)\n"
        "    except ToolError as e:\n"
        "        os.write(1, (type(e).__name__ + '\\n').encode())\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "await mcp_media.echo(n=2)"
    )
    run = host.execute(code)
    assert run.result.value == "{'n': 2}", run.result.error
    assert run.stdout == "BridgeDisconnected\n"
    assert [dict(c.arguments) for c in run.calls] == [{"n": 2}]


def test_runtime_helpers_import_from_the_runtime_module(host: Any) -> None:
    code = (
        "from mcp.runtime import discovered_servers, search_tool_docs_sync\n"
        "import mcp.servers\n"
        "(len(discovered_servers()), len(search_tool_docs_sync('ping')), "
        "mcp.servers.my_server is mcp_servers['my-server'])"
    )
    assert ok(host, code) == "(4, 1, True)"

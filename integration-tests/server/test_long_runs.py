"""Long runs through the real bridge, real SDK clients and real podman: ``run_python`` as a task
(the 2026-07-28 Tasks extension) and how it ends, yield and resume for clients without Tasks,
cancellation within its bound, the owner of a run over HTTP, and the bounds. Questions (approvals,
relayed elicitations, ``requestState``) are in ``test_long_run_questions.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from bridge_core.catalog import find_type_checker
from mcp import Client
from mcp.shared.exceptions import MCPError

from .conftest import code_text, open_http_bridge
from .long_run_clients import (
    Tasks,
    all_text,
    bridge_client,
    http_client,
    probe_servers,
    request,
    start_task,
    token_file,
)

pytestmark = pytest.mark.container

CANCEL_BOUND = 2.0
"""The issue's bound on tasks/cancel stopping the code (the session's interrupt grace)."""
TIMES = frozenset({"duration", "sandbox_start"})
"""Fields of a result that measure time: two runs of the same code differ there only."""


async def _until_output(client: Client, task_id: str, text: str) -> None:
    """Poll ``tasks/get`` (what a Tasks client does) until the task's output shows ``text``."""
    with anyio.fail_after(60):
        got = await request(client.session, "tasks/get", {"taskId": task_id})
        while text not in got["statusMessage"]:
            await anyio.sleep(0.1)
            got = await request(client.session, "tasks/get", {"taskId": task_id})


async def test_a_task_shows_its_output_while_it_runs_and_ends_with_the_plain_result(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = Tasks()
    code = (
        "import time\nfor i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(1)\n"
        "'done'"
    )
    async with bridge_client(tmp_path, extensions=[tasks]) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run_python", {"code": code})
        plain = await client.call_tool("run_python", {"code": "'done'"})
    (created,) = tasks.created
    assert created["status"] == "working"
    assert created["ttlMs"] > 0
    assert "result" not in created
    assert "requestState" not in created
    working = [s["statusMessage"] for s in tasks.seen if s["status"] == "working"]
    # The output so far travels in the status message, growing while the code runs.
    assert any("tick 2" in m and "tick 9" not in m for m in working), working
    assert any("tick 6" in m for m in working), working
    assert tasks.seen[-1]["status"] == "completed"
    assert result.is_error is False
    assert code_text(result) == "\n".join(f"tick {i}" for i in range(10)) + "\n[result] 'done'"
    assert result.structured_content is not None
    assert result.structured_content["status"] == "ok"
    assert "run_id" not in result.structured_content  # exactly what a plain call returns
    # A quick call of the same client stays a call: no task.
    assert plain.structured_content is not None
    assert plain.structured_content["status"] == "ok"
    assert len(tasks.created) == 1


async def test_a_20_s_run_completes_through_its_task_with_a_5_s_request_timeout(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = Tasks(poll=1.0)
    code = "import time\nfor _ in range(20):\n    time.sleep(1)\nprint('twenty seconds')"
    async with bridge_client(tmp_path, extensions=[tasks]) as client:
        result = await client.call_tool("run_python", {"code": code}, read_timeout_seconds=5)
    assert result.is_error is False, all_text(result)
    assert code_text(result) == "twenty seconds"


async def test_without_tasks_a_run_yields_and_resumes_to_the_same_final_result(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = (
        "import time\nfor i in range(6):\n    print('step', i, flush=True)\n"
        "    time.sleep(0.5)\n6 * 7"
    )
    async with bridge_client(tmp_path) as client:
        plain = await client.call_tool("run_python", {"code": code})
        first = await client.call_tool("run_python", {"code": code, "yield_after": 1})
        assert first.structured_content is not None
        assert first.structured_content["state"] == "running"
        run_id = first.structured_content["run_id"]
        shown = [code_text(first)]
        final = first
        for _ in range(20):
            final = await client.call_tool("run_python", {"resume": run_id, "yield_after": 1})
            assert final.structured_content is not None
            if final.structured_content["state"] == "done":
                break
            shown.append(code_text(final))
        tools = await client.list_tools()
    assert final.structured_content is not None
    assert final.structured_content["state"] == "done"
    assert "step 0" in shown[0]
    assert "resume=" in all_text(first)
    # Everything was shown once: what yielded, then the rest with the final result.
    # (The value alone is shown bare when no line was left to show with it, as in any result.)
    lines = [line for text in [*shown, code_text(final)] for line in text.splitlines()]
    assert [line for line in lines if line.startswith("step")] == [f"step {i}" for i in range(6)]
    assert lines[-1].removeprefix("[result] ") == "42"
    assert code_text(plain).endswith("step 5\n[result] 42")
    assert plain.structured_content is not None
    assert final.structured_content["status"] == plain.structured_content["status"] == "ok"
    (tool,) = tools.tools
    listed = tool.model_dump_json(by_alias=True, exclude_none=True)
    assert len(listed.encode()) <= 900, len(listed.encode())


async def test_run_python_cancel_stops_a_yielded_run_and_unknown_ids_are_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with bridge_client(tmp_path) as client:
        first = await client.call_tool(
            "run_python",
            {"code": "print('started', flush=True)\nwhile True: pass", "yield_after": 1},
        )
        assert first.structured_content is not None
        run_id = first.structured_content["run_id"]
        stopped = await client.call_tool("run_python", {"cancel": run_id})
        after = await client.call_tool("run_python", {"code": "print('next')"})
        unknown = await client.call_tool("run_python", {"resume": "not-a-run"})
        both = await client.call_tool("run_python", {"code": "1", "resume": run_id})
    assert stopped.structured_content is not None
    assert stopped.structured_content["state"] == "cancelled"
    assert code_text(after) == "next"
    assert unknown.is_error is True
    assert "unknown run" in all_text(unknown)
    assert both.is_error is True
    assert "exactly one of" in all_text(both)


async def test_an_exception_in_a_tasks_code_completes_with_the_result_a_plain_call_gives(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = Tasks()
    code = "import time\ntime.sleep(1.5)\nraise KeyError('price')"
    async with (
        bridge_client(tmp_path / "tasks", extensions=[tasks]) as tasks_client,
        bridge_client(tmp_path / "plain") as plain_client,
    ):
        await tasks_client.call_tool("run_python", {"code": code})
        plain = await plain_client.call_tool("run_python", {"code": code})
    (created,) = tasks.created
    assert created["status"] == "working"
    ended = tasks.seen[-1]
    assert ended["status"] == "completed"
    assert "error" not in ended
    # Field by field, as sent: the task's result and the plain call's (each the session's first
    # cell), but for the time each took.
    as_task = ended["result"]
    as_call = plain.model_dump(by_alias=True, mode="json", exclude_none=True)
    del as_call["_meta"], as_call["resultType"]  # the envelope of a tools/call answer
    assert as_task.keys() == as_call.keys()
    assert as_task["isError"] is as_call["isError"] is True
    assert as_task["content"] == as_call["content"]
    task_data, call_data = as_task["structuredContent"], as_call["structuredContent"]
    assert task_data.keys() - TIMES == call_data.keys() - TIMES
    assert {k: v for k, v in task_data.items() if k not in TIMES} == {
        k: v for k, v in call_data.items() if k not in TIMES
    }
    assert task_data["error"] == {"type": "KeyError", "message": "'price'"}


@pytest.mark.skipif(find_type_checker() is None, reason="the type checker ty is not installed")
async def test_a_failed_cell_completes_with_its_own_error_when_its_type_check_cannot_run(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The one path that ended a task "failed": in mode nested a cell that failed is type-checked
    # to explain it, and the check's files could not be written (the host's temporary
    # directory gone, a full disk): the OSError ended the run, and the cell's own error was lost
    # (a plain call said "the bridge failed to run this code").
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    tasks = Tasks()
    code = "import time\ntime.sleep(1.5)\n1 / 0"
    async with bridge_client(
        tmp_path / "bridge", env={"TMPDIR": str(host_tmp)}, extensions=[tasks]
    ) as client:
        # A failed cell's type check makes the bridge settle on its temporary directory.
        checked = await client.call_tool("run_python", {"code": "1 / 0"})
        await anyio.to_thread.run_sync(shutil.rmtree, host_tmp)
        result = await client.call_tool("run_python", {"code": code})
    assert checked.structured_content is not None
    assert checked.structured_content["error"]["type"] == "ZeroDivisionError"
    assert [s["status"] for s in tasks.seen][-1] == "completed"
    assert result.structured_content is not None
    assert result.structured_content["error"]["type"] == "ZeroDivisionError"
    # (Mode nested shows a type check's findings only, never why it could not run.)


async def test_tasks_cancel_stops_a_busy_loop_within_2_s_and_the_session_goes_on(
    tmp_path: Path, sandbox_image: str
) -> None:
    # tasks/get says "cancelled" as soon as tasks/cancel is answered, whatever the code does: the
    # code's own heartbeat, kept in the session, says when it stopped.
    busy = "import time\nprint('looping')\nwhile True:\n    beat = time.time()\n"
    after_code = "import time\nprint(beat, time.time())"
    async with bridge_client(tmp_path, extensions=[Tasks()]) as client:
        session = client.session
        task_id = await start_task(client, busy)
        await _until_output(client, task_id, "looping")
        cancelled_at = time.time()
        ack = await request(session, "tasks/cancel", {"taskId": task_id})
        got = await request(session, "tasks/get", {"taskId": task_id})
        after = await client.call_tool("run_python", {"code": after_code})
        again = await request(session, "tasks/cancel", {"taskId": task_id})  # idempotent
        with pytest.raises(MCPError) as unknown:
            await request(session, "tasks/get", {"taskId": "no-such-task"})
    assert ack["resultType"] == "complete"
    assert not {"taskId", "status", "result", "error"} & set(ack)  # an empty ack
    assert got["status"] == "cancelled"
    assert "result" not in got
    last_beat, next_ran = (float(x) for x in code_text(after).split())
    assert last_beat - cancelled_at < CANCEL_BOUND, last_beat - cancelled_at
    assert next_ran - cancelled_at < CANCEL_BOUND + 1.0, next_ran - cancelled_at
    assert after.structured_content is not None
    assert not after.structured_content.get("notices")  # interrupted, not replaced: `beat` kept
    assert again["resultType"] == "complete"
    assert unknown.value.error.code == types.INVALID_PARAMS


async def test_tasks_cancel_of_code_that_ignores_the_interrupt_replaces_the_session_and_says_so(
    tmp_path: Path, sandbox_image: str
) -> None:
    stubborn = (
        "import time\nprint('looping')\nwhile True:\n    try:\n"
        "        open('/tmp/beat', 'w').write(repr(time.time()))\n        time.sleep(0.01)\n"
        "    except KeyboardInterrupt:\n        pass\n"
    )
    after_code = "import os, time\nprint(os.path.exists('/tmp/beat'), time.time())"
    async with bridge_client(tmp_path, extensions=[Tasks()]) as client:
        task_id = await start_task(client, stubborn)
        await _until_output(client, task_id, "looping")
        cancelled_at = time.time()
        await request(client.session, "tasks/cancel", {"taskId": task_id})
        after = await client.call_tool("run_python", {"code": after_code})
    exists, next_ran = code_text(after).split()
    assert exists == "False"  # a new container: the stubborn code is gone with the old one
    assert after.structured_content is not None
    notices = " ".join(after.structured_content.get("notices", []))
    assert "cancelled" in notices
    assert "killed" in notices
    # The grace (2 s) then the kill and a fresh sandbox: bounded, not the code's own time.
    assert float(next_ran) - cancelled_at < 30, float(next_ran) - cancelled_at


async def test_tasks_cancel_cancels_the_nested_call_in_flight_upstream(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The task's call waits at the probe for a third arrival that never comes; the second (from
    # another session) returns once both are there, so the cancel finds the call in flight.
    probe = "from mcp import mcp_servers\nprobe = mcp_servers['probe']\n"
    held = probe + "await probe.rendezvous(key='k', count=3)"
    meet = probe + "print(await probe.rendezvous(key='k', count=2))"
    count = probe + "print(await probe.wait_cancelled(count=1))"
    async with bridge_client(tmp_path, servers=probe_servers(), extensions=[Tasks()]) as client:
        task_id = await start_task(client, held)
        met = await client.call_tool("run_python", {"code": meet, "session": "other"})
        cancelled_at = time.monotonic()
        await request(client.session, "tasks/cancel", {"taskId": task_id})
        seen = await client.call_tool("run_python", {"code": count, "session": "other"})
        elapsed = time.monotonic() - cancelled_at
    assert code_text(met) == "met 2", all_text(met)
    assert code_text(seen) == "1", all_text(seen)
    assert elapsed < CANCEL_BOUND + 1.0, elapsed


async def test_tasks_methods_are_refused_to_a_client_that_did_not_declare_the_extension(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with bridge_client(tmp_path) as client:
        assert client.protocol_version == "2026-07-28"
        with pytest.raises(MCPError) as refused:
            await request(client.session, "tasks/get", {"taskId": "any"})
    assert refused.value.error.code == -32021  # SEP-2575: a method the client did not negotiate


async def test_over_http_another_token_can_neither_resume_nor_read_a_run(
    tmp_path: Path, sandbox_image: str
) -> None:
    tokens = token_file(tmp_path / "tokens", "alice", "bob")
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    code = "import time\nprint('alice secret output', flush=True)\ntime.sleep(4)\n'alice'"
    async with (
        open_http_bridge(tmp_path, env=env) as bridge,
        http_client(bridge.url, tokens["alice"], extensions=[Tasks()]) as alice,
    ):
        yielded = await alice.call_tool("run_python", {"code": code, "yield_after": 1})
        created = await alice.session.call_tool(
            "run_python", {"code": code, "session": "other"}, allow_claimed=True
        )
        task_id = created.model_dump(by_alias=True)["taskId"]
        assert yielded.structured_content is not None
        run_id = yielded.structured_content["run_id"]
        async with http_client(bridge.url, tokens["bob"], extensions=[Tasks()]) as bob:
            resumed = await bob.call_tool("run_python", {"resume": run_id})
            cancelled = await bob.call_tool("run_python", {"cancel": run_id})
            with pytest.raises(MCPError) as read:
                await request(bob.session, "tasks/get", {"taskId": task_id})
            with pytest.raises(MCPError) as stopped:
                await request(bob.session, "tasks/cancel", {"taskId": task_id})
        # A reconnect of alice (same principal) still finds both.
        async with http_client(bridge.url, tokens["alice"], extensions=[Tasks()]) as again:
            final = await again.call_tool("run_python", {"resume": run_id})
            got = await request(again.session, "tasks/get", {"taskId": task_id})
    for refused in (resumed, cancelled):
        assert refused.is_error is True
        assert "unknown run" in all_text(refused)
        assert "alice secret" not in all_text(refused)
    assert read.value.error.code == stopped.value.error.code == types.INVALID_PARAMS
    assert final.structured_content is not None
    assert final.structured_content["state"] == "done"
    assert got["status"] in ("working", "completed")


def _rss_kib(state_dir: Path) -> int:
    """Resident memory of the bridge process serving ``state_dir``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if b"mcp_code_execution_mode" in b" ".join(cmdline) and str(state_dir).encode() in cmdline:
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    raise AssertionError("bridge process not found")


async def test_a_thousand_task_creations_are_refused_past_the_limit_with_memory_flat(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = "import time\ntime.sleep(60)"
    refused: list[str] = []
    accepted = 0
    async with bridge_client(tmp_path, extensions=[Tasks()]) as client:
        session = client.session
        rss: list[int] = []
        for i in range(1000):
            answer = await session.call_tool(
                "run_python", {"code": code, "session": f"s{i % 4}"}, allow_claimed=True
            )
            if isinstance(answer, types.CallToolResult):
                assert answer.is_error is True
                refused.append(all_text(answer))
            else:
                accepted += 1
            if i in (100, 999):
                rss.append(await anyio.to_thread.run_sync(_rss_kib, tmp_path / "state"))
    assert accepted == 16, accepted
    assert len(refused) == 1000 - accepted
    assert "limit is 16" in refused[0]
    assert "cancel" in refused[0]
    assert rss[1] - rss[0] < 16 * 1024, rss  # KiB: 900 more refusals hold nothing


async def test_a_nested_call_to_a_tool_that_runs_only_as_a_task_is_awaited_through_it(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    # server-everything's simulate-research-query declares execution.taskSupport "required"
    # (2025-11-25 Tasks): a plain tools/call is refused; the bridge creates the task and waits
    # for its result.
    command = third_party["MCP_SERVER_EVERYTHING"]
    everything = json.dumps({"everything": {"command": command, "args": ["stdio"]}})
    code = (
        "from mcp import mcp_servers\n"
        "r = await mcp_servers['everything'].simulate_research_query(topic='tides')\n"
        "print(r)\n"
    )
    async with bridge_client(tmp_path, servers=everything) as client:
        result = await client.call_tool("run_python", {"code": code, "timeout": 60})
    assert result.is_error is False, all_text(result)
    assert "tides" in code_text(result)

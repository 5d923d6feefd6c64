"""Sandbox code abusing its channel and its output streams, through the real bridge (stdio, MCP SDK
client) and real podman.

The channel socket is an open descriptor of the sandbox process, so user code can always write to
it. The host must treat whatever arrives as untrusted: junk ends that sandbox (clearly reported,
replaced), forged frames for other executions are dropped, and the bridge keeps serving.
"""

from __future__ import annotations

import json
import shlex
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    CALL_TIMEOUT,
    bridge_pids,
    code_text,
    open_bridge,
    payload_of,
    peak_rss_mib,
    text_of,
)

pytestmark = pytest.mark.container

CHANNEL = """
import gc, os, socket
def channel_fd():
    # The unix socket (a local engine), else the stdio channel's pipe (nothing mounted: a remote
    # engine), which the sandbox client moved off fds 0 and 1 to fds of its own.
    for name in os.listdir("/proc/self/fd"):
        try:
            probe = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if probe.family == socket.AF_UNIX and str(probe.getpeername()).endswith("channel.sock"):
                return int(name), None
        except OSError:
            pass
        finally:
            probe.close()
    for o in gc.get_objects():
        if type(o).__name__ == "StdioPipes":
            return o._write_fd, o
    raise LookupError("no channel")
chan, _pipes = channel_fd()
def channel_writer():
    # sendall() and shutdown() on the channel, whichever it is.
    return socket.socket(fileno=os.dup(chan)) if _pipes is None else _pipes
"""


async def _next_call_works(bridge: Any) -> Any:
    after = await bridge.run("6 * 7")
    assert after.is_error is False
    assert text_of(after).endswith("42")
    return after


async def test_garbage_on_the_channel_ends_that_sandbox_with_a_protocol_violation(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 1", session="bystander")
        junk = await bridge.run(
            CHANNEL + "os.write(chan, b'\\xff' * 64)\nimport time\ntime.sleep(30)"
        )
        after = await _next_call_works(bridge)
        bystander = await bridge.run("kept", session="bystander")
    payload = payload_of(junk)
    assert payload["status"] == "crashed"
    assert "protocol violation by the sandbox" in payload["error"]["message"]
    assert any("new sandbox" in notice for notice in payload["notices"]), payload
    # Durable sessions: the next call runs in a new sandbox holding the last good state (here
    # none: the junk was the session's first execution, so nothing is said on the next call).
    assert "notices" not in payload_of(after)
    assert text_of(bystander) == "1"


FORGED = """
from bridge_protocol.codec import encode
from bridge_protocol.messages import Output, Result
os.write(chan, encode(Output(execution_id="someone-else", stream="stdout", text="forged")))
os.write(chan, encode(Result(execution_id="someone-else", status="ok", value="'forged'")))
'genuine'
"""


async def test_forged_frames_for_another_execution_are_dropped(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        forged = await bridge.run(CHANNEL + FORGED)
        after = await bridge.run("kept")
    assert forged.is_error is False
    assert text_of(forged) == "'genuine'"
    assert "forged" not in str(forged.model_dump(mode="json"))
    assert text_of(after) == "'state'"  # the same sandbox: nothing was reset


PROGRESS_FLOOD = """
import gc
from bridge_protocol.codec import encode
from bridge_protocol.messages import Progress
(client,) = [o for o in gc.get_objects() if type(o).__name__ == "SandboxClient"]
mine = client._execution_id  # the id of this very execution, as the host knows it
sock = channel_writer()
for n in range(1, 2001):
    sock.sendall(encode(Progress(execution_id=mine, progress=n, message="z" * 10_000)))
'sent'
"""


async def test_forged_progress_frames_past_the_client_limit_are_not_all_relayed(
    tmp_path: Path, sandbox_image: str
) -> None:
    received: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append(message)

    async with open_bridge(tmp_path) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            flood = await bridge.session.call_tool(
                "run_python",
                {"code": CHANNEL + PROGRESS_FLOOD},
                read_timeout_seconds=CALL_TIMEOUT,
                progress_callback=on_progress,
            )
        await _next_call_works(bridge)
    payload = payload_of(flood)
    print(f"{len(received)} of 2000 forged progress frames relayed")
    assert code_text(flood) == "'sent'"
    assert 0 < len(received) < 2000
    assert all(message is not None and len(message) <= 1000 for message in received)
    assert any("progress update(s) were not relayed" in notice for notice in payload["notices"])


PROBE_SERVER = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"

FORGED_CALL = """
import gc, time
from bridge_protocol.codec import encode
from bridge_protocol.messages import Call
(client,) = [o for o in gc.get_objects() if type(o).__name__ == "SandboxClient"]
call = Call(call_id=4242, execution_id=client._execution_id, server="probe", tool="echo",
            arguments={"text": "forged"})
channel_writer().sendall(encode(call))
time.sleep(1)  # the forged call's Reply arrives meanwhile; nothing in the sandbox waits for it
'sent'
"""


async def test_a_forged_call_to_a_denied_server_is_refused_by_the_host_policy(
    tmp_path: Path, sandbox_image: str
) -> None:
    started = tmp_path / "probe-started"  # created by the server's command if it ever runs
    command = f"touch {shlex.quote(str(started))}; exec {sys.executable} {PROBE_SERVER}"
    servers = {"probe": {"command": "sh", "args": ["-c", command]}}
    audit = tmp_path / "audit.jsonl"
    env = {"MCP_BRIDGE_DENY_SERVERS": "probe", "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        forged = await bridge.run(CHANNEL + FORGED_CALL)
        await _next_call_works(bridge)
    records = [json.loads(line) for line in (await anyio.Path(audit).read_text()).splitlines()]
    assert code_text(forged) == "'sent'"
    assert [(r["server"], r["tool"], r["outcome"]) for r in records] == [
        ("probe", "echo", "denied")
    ]
    assert "[policy] deny_servers" in records[0]["detail"]
    assert not await anyio.Path(started).exists()


async def test_a_half_written_frame_ends_in_the_timeout_and_a_replaced_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A length prefix promising more than ever comes: the host waits for the rest of the frame
    # (it cannot tell a slow writer from a liar), so the execution's timeout decides. 15 MiB,
    # under the frame cap: what the sandbox sends after it (result, saved state) never fills it.
    async with open_bridge(tmp_path) as bridge:
        half = await bridge.run(CHANNEL + "os.write(chan, b'\\x00\\xf0\\x00\\x00abc')", timeout=3)
        await _next_call_works(bridge)
    payload = payload_of(half)
    assert payload["status"] == "timeout"
    assert "stuck behind an incomplete frame on its channel" in payload["error"]["message"]
    assert any("killed" in notice for notice in payload["notices"])


async def test_shutting_down_the_channel_is_reported_as_a_crash_and_replaced(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = CHANNEL + "channel_writer().shutdown(socket.SHUT_RDWR)"
    async with open_bridge(tmp_path) as bridge:
        shut = await bridge.run(code)
        await _next_call_works(bridge)
    assert payload_of(shut)["status"] == "crashed"


async def test_closed_stdout_and_stderr_fail_that_execution_only(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        closed = await bridge.run("import os, sys\nos.close(1)\nos.close(2)\nprint('lost')")
        after = await bridge.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\nkept")
    assert payload_of(closed)["status"] == "error"
    assert payload_of(closed)["error"]["type"] == "OSError"
    # "lost" is delivered to the execution that wrote it
    assert code_text(closed).startswith("lost\n[traceback]\n")
    assert code_text(after) == "out\n[stderr]\nerr\n[result] 'state'"


async def test_streams_replaced_by_none_end_normally_and_are_restored(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        replaced = await bridge.run("import sys\nsys.stdout = None\nsys.stderr = None\nprint(1)\n7")
        after = await bridge.run("print('out')\nkept")
    assert payload_of(replaced)["status"] == "ok"
    assert code_text(replaced) == "7"
    assert code_text(after) == "out\n[result] 'state'"
    assert "notices" not in payload_of(after)  # the same sandbox, not a replacement


FLOOD = (
    "import sys\nchunk = 'x' * 65536\nfor _ in range(3000):\n    sys.stdout.write(chunk)\n'flooded'"
)


async def test_an_output_flood_is_capped_and_the_bridge_memory_stays_bounded(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        (pid,) = bridge_pids(bridge.state_dir)
        await bridge.run("1")
        before = peak_rss_mib(pid)
        flood = await bridge.run(FLOOD, timeout=60)
        peak = peak_rss_mib(pid)
        await _next_call_works(bridge)
    payload = payload_of(flood)
    print(f"bridge peak RSS {before:.0f} MiB before, {peak:.0f} MiB after 196 MB of output")
    assert payload["status"] == "ok"
    assert code_text(flood).endswith("\n[result] 'flooded'")
    assert len(code_text(flood)) <= 128 * 1024
    assert any("truncated" in notice for notice in payload["notices"])
    assert peak - before < 150  # far below the 196 MB written: the output is streamed, not held


THREADS = """
import threading, time
stop = threading.Event()
def chatter():
    n = 0
    while not stop.is_set():
        print("bg", n, flush=True)
        n += 1
        time.sleep(0.005)
worker = threading.Thread(target=chatter, daemon=True)
worker.start()
'started'
"""


async def test_threads_printing_after_their_execution_ended_never_break_later_results(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        started = await bridge.run(THREADS)
        during = await bridge.run("import time\ntime.sleep(0.5)\n'next'")
        stopped = await bridge.run("stop.set()\nworker.join()\n'stopped'")
        clean = await bridge.run("print('clean')\n'done'")
    assert text_of(started).endswith("'started'")
    assert code_text(during).endswith("\n[result] 'next'")
    assert "bg " in code_text(during)  # late output goes to the execution running now
    assert code_text(stopped).endswith("'stopped'")
    assert code_text(clean) == "clean\n[result] 'done'"


async def test_input_gets_eof_at_once_instead_of_hanging(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        asked = await bridge.run("answer = input('your name: ')")
        read = await bridge.run("import sys\nsys.stdin.read()")
        await _next_call_works(bridge)
    assert payload_of(asked)["error"]["type"] == "EOFError"
    assert code_text(asked).startswith("your name: \n[traceback]\n")
    assert code_text(read) == "''"  # stdin is /dev/null


PING_FLOOD = """
import time
from bridge_protocol.codec import encode
from bridge_protocol.messages import Ping
sock = channel_writer()
burst = encode(Ping(nonce=7)) * 5000  # the sandbox client's own reader takes the pongs
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    sock.sendall(burst)
'flooded'
"""


async def test_a_ping_flood_does_not_stall_the_other_sessions(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Every ping is answered with a pong by the host's reader. Both the channel's receive (bytes
    # already buffered) and its send (the socket takes a pong at once) return without a loop
    # turn: unless the reader gives the loop a turn now and then, each loop iteration runs the
    # pings of a whole buffer (~30 000 pongs, a system call each): the bystander's warm calls,
    # a few loop iterations each, then take seconds instead of milliseconds.
    flood_seconds = 8
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("1", session="bystander")  # warm
        await bridge.run("1", session="flooder")
        timings: list[float] = []
        async with anyio.create_task_group() as tg:
            code = CHANNEL + PING_FLOOD.format(seconds=flood_seconds)
            tg.start_soon(partial(bridge.run, code, session="flooder"))
            await anyio.sleep(2)  # the flood is on
            for _ in range(5):
                started = anyio.current_time()
                with anyio.fail_after(CALL_TIMEOUT):
                    done = await bridge.run("6 * 7", session="bystander")
                timings.append(anyio.current_time() - started)
                assert text_of(done).endswith("42")
        await _next_call_works(bridge)
    print("bystander warm calls during the flood:", [f"{t:.3f}" for t in timings])
    # Measured: 0.37-1.46 s each with the reader holding the loop; 25-45 ms with the turns.
    assert sorted(timings)[len(timings) // 2] < 0.2, timings

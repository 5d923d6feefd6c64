"""Resource bombs in the sandbox, through the real bridge (stdio, MCP SDK client) and real podman:
memory, processes and threads, disk, file descriptors, CPU, deep recursion.

Each bomb hits a limit of its own sandbox (an error inside the code, or the sandbox killed and
replaced with a clear notice); the bridge stays healthy, the next call works, other sessions keep
answering, and no process of a bomb outlives it.
"""

from __future__ import annotations

import os
import time
from ast import literal_eval
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import CALL_TIMEOUT, code_text, open_bridge, payload_of, stdout_of, text_of

pytestmark = [pytest.mark.container, pytest.mark.engine]


def _host_processes() -> int:
    return sum(1 for entry in os.listdir("/proc") if entry.isdigit())


async def _next_call_works(bridge: Any, session: str = "default") -> Any:
    after = await bridge.run("6 * 7", session=session)
    assert after.is_error is False
    assert text_of(after).endswith("42")
    return after


MEMORY = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))"


async def test_memory_bomb_kills_only_its_sandbox_and_the_other_session_keeps_its_state(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_MEMORY_LIMIT": "128m"}) as bridge:
        await bridge.run("kept = 'still here'", session="bystander")
        bomb = await bridge.run(MEMORY)
        after = await _next_call_works(bridge)
        bystander = await bridge.run("kept", session="bystander")
    assert bomb.structured_content["status"] == "crashed"
    assert "128m" in text_of(bomb)
    # Durable sessions: the bomb's session had no good state yet, so nothing is restored.
    assert "notices" not in payload_of(after)
    assert text_of(bystander) == "'still here'"


FORK = """
import os, time
children = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)
except OSError as exc:
    print("refused", exc.errno, len(children))
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""

THREADS = """
import threading
stop = threading.Event()
threads = []
try:
    while True:
        thread = threading.Thread(target=stop.wait)
        thread.start()
        threads.append(thread)
except RuntimeError as exc:
    print("refused", len(threads), exc)
stop.set()
for thread in threads:
    thread.join()
"""


async def test_fork_and_thread_bombs_stop_at_the_pids_limit_and_leave_no_process(
    tmp_path: Path, sandbox_image: str
) -> None:
    before = _host_processes()
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_PIDS_LIMIT": "48"}) as bridge:
        forks = await bridge.run(FORK, timeout=60)
        threads = await bridge.run(THREADS, timeout=60)
        left = await bridge.run(
            "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"
        )
        await _next_call_works(bridge)
        during = _host_processes()
    refused, errno, children = stdout_of(forks).split()
    assert (refused, errno) == ("refused", "11")  # EAGAIN
    assert 0 < int(children) < 48
    assert code_text(threads).startswith("refused ")
    assert int(code_text(threads).split()[1]) < 48
    # Every child was reaped: the sandbox holds its init and the client again, nothing else (the
    # host's count is printed only: other jobs on the machine make it move).
    pids = literal_eval(text_of(left))
    assert len(pids) == 2, pids
    assert pids[0] == 1, pids
    print(f"host processes: {before} before, {during} with the bridge, {_host_processes()} after")


DISK = """
import os
def fill(path):
    written = 0
    chunk = b"x" * (1024 * 1024)
    try:
        with open(path, "wb") as handle:
            while True:
                handle.write(chunk)
                handle.flush()
                written += 1
    except OSError as exc:
        print(path, "refused", exc.errno, written)
    finally:
        os.remove(path)
fill("/tmp/fill")
fill("/dev/shm/fill")
fill("/dev/mqueue/fill")
"""


async def test_disk_bombs_end_in_enospc_on_every_writable_place(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_TMPFS_SIZE": "16m", "MCP_BRIDGE_MEMORY_LIMIT": "256m"}
    async with open_bridge(tmp_path, env=env) as bridge:
        disk = await bridge.run(DISK, timeout=60)
        await _next_call_works(bridge)
    lines = dict(line.split(" ", 1) for line in code_text(disk).splitlines())
    assert disk.is_error is False, disk
    tmp = lines["/tmp/fill"].split()
    assert tmp[:2] == ["refused", "28"]  # ENOSPC at the configured size
    assert int(tmp[2]) <= 16
    shm = lines["/dev/shm/fill"].split()
    assert shm[:2] == ["refused", "28"]  # the runtime's 64m /dev/shm, within the memory limit
    assert int(shm[2]) <= 64
    # mqueue holds only POSIX message queues (bounded by RLIMIT_MSGQUEUE), not files: EINVAL.
    assert lines["/dev/mqueue/fill"].split()[:2] == ["refused", "22"]


FILES = """
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
opened = []
try:
    while True:
        opened.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    print("refused", exc.errno, len(opened), soft, hard)
"""


async def test_file_descriptor_bomb_stops_at_nofile_and_the_result_still_arrives(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        # The descriptors stay open past the execution: the client must still answer.
        bomb = await bridge.run(FILES)
        print_after = await bridge.run("print('still printing')\nlen(opened)")
        await bridge.run("for fd in opened:\n    os.close(fd)")
        await _next_call_works(bridge)
    refused, errno, count, soft, hard = code_text(bomb).split()
    assert (refused, errno) == ("refused", "24")  # EMFILE
    assert int(count) < int(soft) <= int(hard)
    assert code_text(print_after) == f"still printing\n[result] {count}"


SPIN = """
import time
print("spinning", flush=True)
wall, cpu = time.monotonic(), time.process_time()
while time.monotonic() - wall < {seconds}:
    pass
print("cpu share", round((time.process_time() - cpu) / (time.monotonic() - wall), 2))
"""


async def test_cpu_spin_is_held_to_the_quota_and_other_sessions_stay_responsive(
    tmp_path: Path, sandbox_image: str
) -> None:
    spinning = anyio.Event()
    spin_done = False
    latencies: list[float] = []
    answers: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "spinning":
            spinning.set()

    async with open_bridge(tmp_path, env={"MCP_BRIDGE_CPU_QUOTA": "50000"}) as bridge:
        await bridge.run("1", session="other")  # started before, so no start-up is measured
        spin_result: list[Any] = []

        async def spin() -> None:
            nonlocal spin_done
            with anyio.fail_after(CALL_TIMEOUT):
                spin_result.append(
                    await bridge.session.call_tool(
                        "run_python",
                        {"code": SPIN.format(seconds=8), "timeout": 60},
                        read_timeout_seconds=CALL_TIMEOUT,
                        progress_callback=on_progress,
                    )
                )
            spin_done = True

        async with anyio.create_task_group() as group:
            group.start_soon(spin)
            with anyio.fail_after(CALL_TIMEOUT):
                await spinning.wait()
            for _ in range(5):
                started = time.monotonic()
                answer = await bridge.run("1 + 1", session="other")
                latencies.append(time.monotonic() - started)
                answers.append(text_of(answer))
            answered_while_spinning = not spin_done
        await _next_call_works(bridge)
    (spun,) = spin_result
    share = float(code_text(spun).split()[-1])
    print(f"spinning sandbox's CPU share {share} (quota 0.5); other session's 1+1 latencies (s):")
    print(" ".join(f"{latency:.3f}" for latency in latencies))
    assert answers == ["2"] * 5
    assert answered_while_spinning
    assert share <= 0.6


async def test_recursion_error_is_an_ordinary_error_and_the_session_keeps_its_state(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        deep = await bridge.run("def down(n):\n    return down(n + 1)\ndown(0)")
        after = await bridge.run("kept")
    assert payload_of(deep)["status"] == "error"
    assert payload_of(deep)["error"]["type"] == "RecursionError"
    assert text_of(after) == "'state'"


# A crash in C code. (A C stack overflow through deeply nested repr() no longer crashes Python
# 3.13, the image's interpreter: it raises RecursionError, covered above.)
C_CRASH = """
import ctypes
ctypes.string_at(0)
"""


async def test_a_segfault_in_c_code_is_reported_as_a_crash_and_the_session_is_replaced(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'saved before the crash'")
        crashed = await bridge.run(C_CRASH, timeout=60)
        after = await bridge.run("'kept' in globals()")
    payload = payload_of(crashed)
    assert payload["status"] == "crashed"
    assert "139" in payload["error"]["message"]  # SIGSEGV
    assert any("new sandbox" in notice for notice in payload["notices"])
    # A new sandbox, restored to the state after the last successful execution.
    assert text_of(after).endswith("True")
    assert any("restored" in notice for notice in payload_of(after)["notices"])

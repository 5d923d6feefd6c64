"""Process lifecycle: handshake, refusal, shutdown, EOF, bad arguments."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from bridge_protocol import SUPPORTED_VERSIONS, ErrorCode, Output, Refusal, Shutdown, Welcome

WAIT = 20


def test_hello_offers_every_supported_version_and_the_client_version(unstarted_host: Any) -> None:
    unstarted_host.spawn()
    hello = unstarted_host.accept()
    assert tuple(hello.versions) == SUPPORTED_VERSIONS
    assert hello.client_version == "0.1.0"


def test_refusal_exits_non_zero_with_the_reason_on_stderr(unstarted_host: Any) -> None:
    process = unstarted_host.spawn()
    unstarted_host.accept()
    unstarted_host.send(
        Refusal(code=ErrorCode.UNSUPPORTED_VERSION, message="no common version", supported=(9,))
    )
    _, stderr = process.communicate(timeout=WAIT)
    assert process.returncode == 3
    assert b"no common version" in stderr
    assert b"9" in stderr


def test_shutdown_ends_the_process_with_status_zero(host: Any) -> None:
    host.send(Shutdown(reason="bye"))
    assert host.process.wait(timeout=WAIT) == 0


def test_eof_from_the_host_ends_the_process_with_status_zero(host: Any) -> None:
    host.execute("x = 1")
    host.disconnect()
    assert host.process.wait(timeout=WAIT) == 0


def test_threads_left_running_by_user_code_do_not_keep_the_process_alive(host: Any) -> None:
    host.execute("import threading\nthreading.Thread(target=threading.Event().wait).start()")
    host.send(Shutdown())
    assert host.process.wait(timeout=WAIT) == 0


def test_eof_during_execution_interrupts_it_and_exits(host: Any) -> None:
    host.submit("while True:\n    pass")
    host.disconnect()
    assert host.process.wait(timeout=WAIT) == 0


STUBBORN = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("stubborn", flush=True)
while True:
    try:
        pass
    except BaseException:
        pass
"""


def test_eof_ends_the_process_even_when_the_running_code_ignores_interrupts(host: Any) -> None:
    # A sandbox whose host is gone (a SIGKILLed bridge) must not run on: nobody can stop it.
    host.submit(STUBBORN)
    host.wait_for(Output)  # the code runs: the interrupt is what it will ignore
    host.disconnect()
    assert host.process.wait(timeout=WAIT) == 0


def test_eof_ends_the_process_even_when_user_code_replaced_os_exit(host: Any) -> None:
    host.execute("import os\nos._exit = lambda status: None")
    host.submit(STUBBORN)
    host.wait_for(Output)
    host.disconnect()
    assert host.process.wait(timeout=WAIT) == 0


def test_user_output_never_reaches_the_process_stdout(host: Any) -> None:
    host.execute("import os\nprint('hello')\nos.write(1, b'raw')")
    host.send(Shutdown())
    assert host.process.wait(timeout=WAIT) == 0
    assert host.process.stdout.read() == b""


def test_unreachable_socket_exits_with_status_one_and_says_where() -> None:
    process = subprocess.run(
        [sys.executable, "-m", "bridge_sandbox_client", "--socket", "/nonexistent/channel.sock"],
        capture_output=True,
        timeout=WAIT,
        check=False,
    )
    assert process.returncode == 1
    assert b"/nonexistent/channel.sock" in process.stderr


def test_welcome_with_an_unknown_version_fails_the_handshake(unstarted_host: Any) -> None:
    process = unstarted_host.spawn()
    unstarted_host.accept()
    unstarted_host.send(Welcome(version=999))
    _, stderr = process.communicate(timeout=WAIT)
    assert process.returncode == 1
    assert b"999" in stderr


def test_a_send_that_fails_ends_the_process_though_the_host_still_listens(host: Any) -> None:
    # Sandbox code shuts the way to the host while the way back stays open (over stdio the
    # container's init holds another copy of the pipe, so the host never sees EOF): the result
    # cannot be sent, and the sandbox must end instead of leaving the call to its timeout.
    host.submit(
        "import gc, socket\n"
        "[o for o in gc.get_objects() if type(o).__name__ == 'Channel'][0]"
        "._sock.shutdown(socket.SHUT_WR)"
    )
    assert host.process.wait(timeout=WAIT) == 0


def test_the_client_starts_without_the_import_machinery_it_does_not_use() -> None:
    # importlib.abc pulls importlib.resources, tempfile and more into every sandbox's start
    # (~9 ms of it in the image); the mcp module finder needs none of it.
    probe = (
        "import sys, bridge_sandbox_client.__main__; "
        "print(sorted(m for m in ('importlib.abc', 'importlib.resources') if m in sys.modules))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=WAIT, check=True
    )
    assert shown.stdout.strip() == "[]"
